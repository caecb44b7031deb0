// The runtime's log channel. The callback and its user pointer are swapped
// under one mutex and called outside it, so a callback may log again or
// replace itself; a message racing a replacement reaches the old or the new
// callback, never a mix of both.
#include "log.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

namespace openneuron::runtime {

namespace log_detail {
// Without a callback: warnings and errors only, to stderr.
std::atomic<int> min_level{ONRT_LOG_WARNING};
}  // namespace log_detail

namespace {

struct Sink {
  std::mutex mu;
  onrt_log_callback fn = nullptr;
  void* user = nullptr;
};

Sink& sink() {
  static Sink* s = new Sink;  // never destroyed: workers may log during exit
  return *s;
}

const char* level_name(int level) {
  if (level >= ONRT_LOG_ERROR) return "ERROR";
  if (level >= ONRT_LOG_WARNING) return "WARNING";
  if (level >= ONRT_LOG_INFO) return "INFO";
  return "DEBUG";
}

void emit(int level, const char* message) {
  onrt_log_callback fn;
  void* user;
  {
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mu);
    fn = s.fn;
    user = s.user;
  }
  if (fn != nullptr) {
    fn(level, message, user);
  } else {
    std::fprintf(stderr, "openneuron %s: %s\n", level_name(level), message);
  }
}

}  // namespace

void logf(int level, const char* fmt, ...) {
  if (!log_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string message(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(message.data(), message.size() + 1, fmt, ap);
  va_end(ap);
  emit(level, message.c_str());
}

}  // namespace openneuron::runtime

using namespace openneuron::runtime;

extern "C" void onrt_log_set_callback(onrt_log_callback fn, void* user, int min_level) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fn = fn;
  s.user = user;
  log_detail::min_level.store(fn != nullptr ? min_level : ONRT_LOG_WARNING,
                              std::memory_order_relaxed);
}

extern "C" int onrt_log_enabled(int level) { return log_enabled(level) ? 1 : 0; }

extern "C" void onrt_log(int level, const char* message) {
  if (log_enabled(level)) emit(level, message != nullptr ? message : "");
}

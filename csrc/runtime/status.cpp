// Error reporting (status.h): the thread's last error, message formatting,
// onrt_status_name and onrt_last_error.
#include "status.h"

#include <cstdarg>
#include <cstdio>

namespace openneuron::runtime {
namespace {

// Per thread so concurrent failures on other threads never garble a message.
thread_local std::string t_last_error;

std::string vformat(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  char small[256];
  int n = std::vsnprintf(small, sizeof small, fmt, copy);
  va_end(copy);
  if (n < 0) return std::string();
  if (static_cast<size_t>(n) < sizeof small) return std::string(small, n);
  std::string out(n, '\0');
  std::vsnprintf(out.data(), n + 1, fmt, args);
  return out;
}

}  // namespace

const char* last_error_cstr() { return t_last_error.c_str(); }

onrt_status fail(onrt_status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

onrt_status failf(onrt_status status, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  t_last_error = vformat(fmt, args);
  va_end(args);
  return status;
}

std::string strprintf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vformat(fmt, args);
  va_end(args);
  return out;
}

std::string format_size(uint64_t bytes) {
  constexpr double kKiB = 1024.0;
  if (bytes < 1024) return strprintf("%llu bytes", static_cast<unsigned long long>(bytes));
  const double b = static_cast<double>(bytes);
  if (b < kKiB * kKiB) return strprintf("%.2f KiB", b / kKiB);
  if (b < kKiB * kKiB * kKiB) return strprintf("%.2f MiB", b / (kKiB * kKiB));
  return strprintf("%.2f GiB", b / (kKiB * kKiB * kKiB));
}

}  // namespace openneuron::runtime

extern "C" {

const char* onrt_status_name(onrt_status status) {
  switch (status) {
    case ONRT_OK:
      return "ONRT_OK";
    case ONRT_ERROR_INVALID_ARGUMENT:
      return "ONRT_ERROR_INVALID_ARGUMENT";
    case ONRT_ERROR_INVALID_DEVICE:
      return "ONRT_ERROR_INVALID_DEVICE";
    case ONRT_ERROR_OUT_OF_MEMORY:
      return "ONRT_ERROR_OUT_OF_MEMORY";
    case ONRT_ERROR_INVALID_HANDLE:
      return "ONRT_ERROR_INVALID_HANDLE";
    case ONRT_ERROR_NOT_READY:
      return "ONRT_ERROR_NOT_READY";
    case ONRT_ERROR_EXECUTION_FAILED:
      return "ONRT_ERROR_EXECUTION_FAILED";
    case ONRT_ERROR_UNSUPPORTED:
      return "ONRT_ERROR_UNSUPPORTED";
    case ONRT_ERROR_FORKED:
      return "ONRT_ERROR_FORKED";
    case ONRT_ERROR_INVALID_CONFIG:
      return "ONRT_ERROR_INVALID_CONFIG";
    case ONRT_ERROR_INTERRUPTED:
      return "ONRT_ERROR_INTERRUPTED";
    case ONRT_ERROR_TIMEOUT:
      return "ONRT_ERROR_TIMEOUT";
  }
  return "ONRT_ERROR_UNKNOWN";
}

const char* onrt_last_error(void) { return openneuron::runtime::last_error_cstr(); }

}  // extern "C"

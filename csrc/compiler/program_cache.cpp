// The in-memory program cache. Compilation runs outside the lock, so a slow
// compile never blocks lookups of other programs; when two threads race on one
// key, the first insert wins and both get the same program. Bounded: a process
// that sees ever new shapes (a growing sequence length) would otherwise keep a
// program per shape forever; the least recently used ones go. An evicted
// program stays alive while a caller or a queued launch holds it.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "openneuron/compiler/compiler.h"

namespace openneuron::compiler {

// Read once: fixed for the process, so the graph signature alone stays the cache key.
const CompileOptions& process_compile_options() {
  static const CompileOptions options = [] {
    CompileOptions o;
    const char* fusion = std::getenv("OPENNEURON_FUSION");
    o.fuse = !(fusion && std::strcmp(fusion, "0") == 0);
    return o;
  }();
  return options;
}

// OPENNEURON_PROGRAM_CACHE_ENTRIES, read once; a value that is not a positive
// integer keeps the default, with a warning.
int64_t program_cache_capacity() {
  static const int64_t capacity = [] {
    constexpr int64_t kDefault = 16384;
    const char* v = std::getenv("OPENNEURON_PROGRAM_CACHE_ENTRIES");
    if (v == nullptr || *v == '\0') return kDefault;
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || n < 1) {
      const std::string message = std::string("OPENNEURON_PROGRAM_CACHE_ENTRIES='") + v +
                                  "' is not a positive integer; keeping " +
                                  std::to_string(kDefault) + " programs";
      onrt_log(ONRT_LOG_WARNING, message.c_str());
      return kDefault;
    }
    return static_cast<int64_t>(n);
  }();
  return capacity;
}

struct ProgramCache::Impl {
  struct Entry {
    std::string key;
    std::shared_ptr<const Program> program;
  };
  mutable std::mutex mu;
  std::list<Entry> lru;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> map;
  CacheStats stats;
};

// The capacity is read here, not first under the cache's lock: a bad value
// logs a warning, and a log sink may call into Python.
ProgramCache::ProgramCache() : impl_(std::make_unique<Impl>()) { program_cache_capacity(); }

ProgramCache& ProgramCache::global() {
  static ProgramCache* cache = new ProgramCache();  // outlives static destructors
  return *cache;
}

std::shared_ptr<const Program> ProgramCache::get_or_compile(const Graph& graph) {
  std::string key = graph.signature();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto it = impl_->map.find(key);
    if (it != impl_->map.end()) {
      ++impl_->stats.hits;
      impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
      return it->second->program;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const Program> prog = compile(graph, process_compile_options());  // throws: nothing cached
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (onrt_log_enabled(ONRT_LOG_DEBUG)) {
    const size_t n = prog->instructions.size();
    const std::string message = "compiled program " + prog->name + " (" + std::to_string(n) +
                                (n == 1 ? " instruction) in " : " instructions) in ") +
                                std::to_string(static_cast<int64_t>(secs * 1e6)) + " us";
    onrt_log(ONRT_LOG_DEBUG, message.c_str());
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  ++impl_->stats.misses;
  impl_->stats.compile_seconds += secs;
  if (auto it = impl_->map.find(key); it != impl_->map.end()) return it->second->program;
  impl_->lru.push_front(Impl::Entry{key, std::move(prog)});
  impl_->map.emplace(std::move(key), impl_->lru.begin());
  while (static_cast<int64_t>(impl_->map.size()) > program_cache_capacity()) {
    impl_->map.erase(impl_->lru.back().key);
    impl_->lru.pop_back();
    ++impl_->stats.evictions;
  }
  return impl_->lru.front().program;
}

CacheStats ProgramCache::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  CacheStats s = impl_->stats;
  s.entries = static_cast<int64_t>(impl_->map.size());
  s.capacity = program_cache_capacity();
  return s;
}

void ProgramCache::clear() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->map.clear();
  impl_->lru.clear();
  impl_->stats = CacheStats{};
}

}  // namespace openneuron::compiler

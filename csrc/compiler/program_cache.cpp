// The in-memory program cache. Compilation runs outside the lock, so a slow
// compile never blocks lookups of other programs; when two threads race on one
// key, the first insert wins and both get the same program.
#include <chrono>
#include <cstdlib>
#include <cstring>
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

struct ProgramCache::Impl {
  mutable std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const Program>> map;
  CacheStats stats;
};

ProgramCache::ProgramCache() : impl_(std::make_unique<Impl>()) {}

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
      return it->second;
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
  auto [it, inserted] = impl_->map.emplace(std::move(key), std::move(prog));
  impl_->stats.entries = static_cast<int64_t>(impl_->map.size());
  return it->second;
}

CacheStats ProgramCache::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  CacheStats s = impl_->stats;
  s.entries = static_cast<int64_t>(impl_->map.size());
  return s;
}

void ProgramCache::clear() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->map.clear();
  impl_->stats = CacheStats{};
}

}  // namespace openneuron::compiler

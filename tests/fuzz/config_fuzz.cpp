// The runtime's environment parser (csrc/runtime/config.h): platform profiles,
// OPENNEURON_NUM_CORES, NEURON_RT_VISIBLE_CORES, OPENNEURON_HBM_BYTES, the
// LAUNCH_BLOCKING flags and OPENNEURON_WATCHDOG_SECONDS. The input is one value per
// line in the order of kNames; variables past the last line are unset. Invariants:
//  * a rejected environment gives ONRT_ERROR_INVALID_CONFIG, a message, and leaves the
//    output alone;
//  * an accepted one is consistent (a known platform, 1..1024 cores, the visible cores
//    distinct and in range, a positive capacity, a watchdog in [0, 1e9]) and round-trips:
//    written back as canonical variables it parses to the same configuration.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "../../csrc/runtime/config.h"

namespace {

using namespace openneuron::runtime;

constexpr const char* kNames[] = {
    "OPENNEURON_PLATFORM",        "LOCAL_WORLD_SIZE",
    "OPENNEURON_NUM_CORES",       "NEURON_RT_VISIBLE_CORES",
    "OPENNEURON_HBM_BYTES",       "NEURON_LAUNCH_BLOCKING",
    "OPENNEURON_LAUNCH_BLOCKING", "OPENNEURON_WATCHDOG_SECONDS",
};
constexpr uint64_t kHostMemory = uint64_t{64} << 30;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "config_fuzz: invariant broken: %s\n", what);
  std::abort();
}

using Env = std::map<std::string, std::string>;

onrt_status parse(const Env& env, Config* out, std::string* error) {
  return parse_config(
      [&env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      kHostMemory, out, error);
}

// The canonical spelling of an accepted configuration.
Env canonical(const Config& c) {
  Env env;
  env["OPENNEURON_PLATFORM"] = c.platform->name;
  env["OPENNEURON_NUM_CORES"] = std::to_string(c.num_physical_cores);
  std::string visible;
  for (int core : c.visible_cores) visible += (visible.empty() ? "" : ",") + std::to_string(core);
  env["NEURON_RT_VISIBLE_CORES"] = visible;
  env["OPENNEURON_HBM_BYTES"] = std::to_string(c.hbm_bytes_per_core);
  env["OPENNEURON_LAUNCH_BLOCKING"] = c.launch_blocking ? "1" : "0";
  char watchdog[64];
  std::snprintf(watchdog, sizeof watchdog, "%.17g", c.watchdog_seconds);
  env["OPENNEURON_WATCHDOG_SECONDS"] = watchdog;
  return env;
}

bool same(const Config& a, const Config& b) {
  return a.platform == b.platform && a.num_physical_cores == b.num_physical_cores &&
         a.visible_cores == b.visible_cores && a.hbm_bytes_per_core == b.hbm_bytes_per_core &&
         a.launch_blocking == b.launch_blocking && a.watchdog_seconds == b.watchdog_seconds;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Env env;
  size_t pos = 0;
  for (const char* name : kNames) {
    if (pos > in.size()) break;
    size_t end = in.find('\n', pos);
    if (end == std::string_view::npos) end = in.size();
    // An environment value cannot hold a NUL: it ends there.
    std::string value(in.substr(pos, end - pos));
    value = value.c_str();
    env[name] = value;
    pos = end + 1;
  }
  Config cfg;
  cfg.num_physical_cores = -7;  // a sentinel a rejected parse must leave alone
  std::string error;
  const onrt_status st = parse(env, &cfg, &error);
  if (st != ONRT_OK) {
    if (st != ONRT_ERROR_INVALID_CONFIG) fail("an error other than ONRT_ERROR_INVALID_CONFIG");
    if (error.empty()) fail("a rejected environment without a message");
    if (cfg.num_physical_cores != -7) fail("a rejected environment changed the output");
    return 0;
  }
  if (cfg.platform == nullptr || find_platform(cfg.platform->name) != cfg.platform)
    fail("unknown platform");
  if (cfg.num_physical_cores < 1 || cfg.num_physical_cores > 1024) fail("core count");
  if (cfg.visible_cores.empty()) fail("no visible core");
  std::set<int> seen;
  for (int core : cfg.visible_cores)
    if (core < 0 || core >= cfg.num_physical_cores || !seen.insert(core).second)
      fail("a visible core out of range or listed twice");
  if (cfg.hbm_bytes_per_core == 0) fail("zero capacity");
  if (!(cfg.watchdog_seconds >= 0 && cfg.watchdog_seconds <= 1e9)) fail("watchdog");
  Config again;
  std::string again_error;
  if (parse(canonical(cfg), &again, &again_error) != ONRT_OK) {
    std::fprintf(stderr, "%s\n", again_error.c_str());
    fail("the canonical spelling of an accepted configuration is rejected");
  }
  if (!same(cfg, again)) fail("the canonical spelling parses to another configuration");
  return 0;
}

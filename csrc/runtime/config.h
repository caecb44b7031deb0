// Environment parsing and platform profiles, kept apart from initialisation so
// tests can feed arbitrary environments without touching the process state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "contention.h"
#include "openneuron/runtime.h"

namespace openneuron::runtime {

struct PlatformProfile {
  const char* name;
  uint64_t hbm_bytes_per_core;  // chip HBM divided over its logical cores
  bool supports_fp8;
};

// nullptr when `name` is not a known platform.
const PlatformProfile* find_platform(const std::string& name);

// Whether device memory is shareable with other processes (openneuron/ipc.h).
enum class SharingMode : uint8_t {
  kFromStart,  // every segment: one of several ranks on this host (LOCAL_WORLD_SIZE > 1)
  kOnRequest,  // segments created after onrt_ipc_enable (a process group asked)
  kOff,        // never: onrt_ipc_enable fails
};

struct Config {
  const PlatformProfile* platform = nullptr;
  int num_physical_cores = 0;
  std::vector<int> visible_cores;  // physical index of each logical core
  uint64_t hbm_bytes_per_core = 0;
  bool launch_blocking = false;
  double watchdog_seconds = 300;  // a waited-for stream idle this long is reported; 0 = off
  ContentionMode contention = ContentionMode::kAuto;
  SharingMode sharing = SharingMode::kOnRequest;
  bool protect_memory = false;  // OPENNEURON_PROTECT_MEMORY (protect.h)
};

// Returns the variable's value or nullptr when unset.
using EnvLookup = std::function<const char*(const char* name)>;

// On failure returns ONRT_ERROR_INVALID_CONFIG with the message in *error.
onrt_status parse_config(const EnvLookup& env, uint64_t host_memory_bytes, Config* out,
                         std::string* error);

// Physical memory of the host; device capacities never exceed it.
uint64_t host_physical_memory();

// parse_config over the real process environment.
onrt_status load_config(Config* out, std::string* error);

}  // namespace openneuron::runtime

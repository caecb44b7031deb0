// Configuration from the environment (config.h): platform profiles, visible
// cores, HBM size per core, LAUNCH_BLOCKING, with the user-facing messages for
// invalid values.
#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "status.h"

namespace openneuron::runtime {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
// Far above any real chip; a larger value is almost certainly a typo.
constexpr int kMaxCores = 1024;

constexpr PlatformProfile kPlatforms[] = {
    {"trn2", 96 * kGiB / 4, false},
    {"trn3", 144 * kGiB / 4, true},
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return std::string();
  size_t e = s.find_last_not_of(" \t\n\r");
  return s.substr(b, e - b + 1);
}

// Strict: the whole string must be a non-negative decimal integer that fits in 64 bits
// (every uint64_t, so a capacity written as "9999998T" can also be written in bytes).
bool parse_uint(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

std::string platform_list() {
  std::string out;
  for (const auto& p : kPlatforms) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

bool truthy(const char* v) {
  if (v == nullptr) return false;
  std::string s = trim(v);
  return s == "1" || s == "true" || s == "TRUE" || s == "True" || s == "yes" || s == "on";
}

// Accepts a byte count with an optional binary suffix (K, M, G, T, KiB, ...),
// since capacities are naturally written as "8G".
bool parse_bytes(const std::string& s, uint64_t* out) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  uint64_t v = 0;
  if (!parse_uint(s.substr(0, i), &v)) return false;
  std::string suffix = s.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() > 1 && suffix.back() == 'B') suffix.pop_back();
  if (suffix.size() == 2 && suffix[1] == 'I') suffix.pop_back();
  int shift;
  if (suffix.empty()) {
    shift = 0;
  } else if (suffix == "K") {
    shift = 10;
  } else if (suffix == "M") {
    shift = 20;
  } else if (suffix == "G") {
    shift = 30;
  } else if (suffix == "T") {
    shift = 40;
  } else {
    return false;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

onrt_status parse_visible(const std::string& raw, int num_cores, std::vector<int>* out,
                          std::string* error) {
  auto invalid = [&](const std::string& why) {
    *error = strprintf(
        "NEURON_RT_VISIBLE_CORES='%s' is invalid: %s; valid cores are 0..%d "
        "(OPENNEURON_NUM_CORES=%d), written like \"0\", \"1,3\" or \"0-2\"",
        raw.c_str(), why.c_str(), num_cores - 1, num_cores);
    return ONRT_ERROR_INVALID_CONFIG;
  };
  std::vector<int> cores;
  size_t pos = 0;
  while (pos <= raw.size()) {
    size_t comma = raw.find(',', pos);
    if (comma == std::string::npos) comma = raw.size();
    std::string item = trim(raw.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) return invalid("empty entry");
    uint64_t lo, hi;
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      if (!parse_uint(item, &lo)) return invalid("'" + item + "' is not a core index");
      hi = lo;
    } else {
      if (!parse_uint(trim(item.substr(0, dash)), &lo) ||
          !parse_uint(trim(item.substr(dash + 1)), &hi)) {
        return invalid("'" + item + "' is not a core range");
      }
      if (lo > hi) return invalid("range '" + item + "' is reversed");
    }
    if (hi >= static_cast<uint64_t>(num_cores)) {
      return invalid(strprintf("core %llu is out of range", static_cast<unsigned long long>(hi)));
    }
    for (uint64_t c = lo; c <= hi; ++c) {
      if (std::find(cores.begin(), cores.end(), static_cast<int>(c)) != cores.end()) {
        return invalid(strprintf("core %llu is listed twice", static_cast<unsigned long long>(c)));
      }
      cores.push_back(static_cast<int>(c));
    }
  }
  *out = std::move(cores);
  return ONRT_OK;
}

}  // namespace

const PlatformProfile* find_platform(const std::string& name) {
  for (const auto& p : kPlatforms) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

onrt_status parse_config(const EnvLookup& env, uint64_t host_memory_bytes, Config* out,
                         std::string* error) {
  Config cfg;

  const char* platform = env("OPENNEURON_PLATFORM");
  std::string platform_name = platform ? trim(platform) : std::string();
  if (platform_name.empty()) platform_name = "trn2";
  cfg.platform = find_platform(platform_name);
  if (cfg.platform == nullptr) {
    *error = strprintf("OPENNEURON_PLATFORM='%s' is not a known platform; valid values: %s",
                       platform_name.c_str(), platform_list().c_str());
    return ONRT_ERROR_INVALID_CONFIG;
  }

  cfg.num_physical_cores = 2;
  // A process started by torchrun (or any launcher that sets LOCAL_WORLD_SIZE)
  // uses core LOCAL_RANK, so by default it has as many cores as local ranks;
  // its peers reach its memory from the first allocation on.
  if (const char* w = env("LOCAL_WORLD_SIZE"); w != nullptr) {
    uint64_t v = 0;
    if (parse_uint(trim(w), &v) && v <= static_cast<uint64_t>(kMaxCores)) {
      if (v > 2) cfg.num_physical_cores = static_cast<int>(v);
      if (v > 1) cfg.sharing = SharingMode::kFromStart;
    }
  }
  if (const char* n = env("OPENNEURON_NUM_CORES"); n != nullptr && !trim(n).empty()) {
    uint64_t v = 0;
    if (!parse_uint(trim(n), &v) || v < 1 || v > static_cast<uint64_t>(kMaxCores)) {
      *error = strprintf("OPENNEURON_NUM_CORES='%s' is invalid: expected an integer in 1..%d", n,
                         kMaxCores);
      return ONRT_ERROR_INVALID_CONFIG;
    }
    cfg.num_physical_cores = static_cast<int>(v);
  }

  if (const char* v = env("NEURON_RT_VISIBLE_CORES"); v != nullptr && !trim(v).empty()) {
    onrt_status st = parse_visible(v, cfg.num_physical_cores, &cfg.visible_cores, error);
    if (st != ONRT_OK) return st;
  } else {
    for (int i = 0; i < cfg.num_physical_cores; ++i) cfg.visible_cores.push_back(i);
  }

  cfg.hbm_bytes_per_core = cfg.platform->hbm_bytes_per_core;
  if (host_memory_bytes > 0) {
    cfg.hbm_bytes_per_core = std::min(cfg.hbm_bytes_per_core, host_memory_bytes);
  }
  // An explicit override is taken as-is: segments are mapped lazily, so a
  // capacity beyond host memory is still useful for testing limits.
  if (const char* h = env("OPENNEURON_HBM_BYTES"); h != nullptr && !trim(h).empty()) {
    uint64_t v = 0;
    if (!parse_bytes(trim(h), &v) || v == 0) {
      *error = strprintf(
          "OPENNEURON_HBM_BYTES='%s' is invalid: expected a positive byte count such as "
          "8589934592 or 8G",
          h);
      return ONRT_ERROR_INVALID_CONFIG;
    }
    cfg.hbm_bytes_per_core = v;
  }

  cfg.launch_blocking =
      truthy(env("NEURON_LAUNCH_BLOCKING")) || truthy(env("OPENNEURON_LAUNCH_BLOCKING"));
  if (const char* w = env("OPENNEURON_WATCHDOG_SECONDS"); w != nullptr && !trim(w).empty()) {
    const std::string text = trim(w);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !(v >= 0) || v > 1e9) {
      *error = strprintf(
          "OPENNEURON_WATCHDOG_SECONDS='%s' is invalid: expected a number of seconds >= 0 "
          "(0 turns the watchdog off)",
          w);
      return ONRT_ERROR_INVALID_CONFIG;
    }
    cfg.watchdog_seconds = v;
  }
  if (const char* c = env("OPENNEURON_CONTENTION"); c != nullptr && !trim(c).empty()) {
    const std::string v = trim(c);
    if (v == "auto") {
      cfg.contention = ContentionMode::kAuto;
    } else if (v == "on" || v == "1") {
      cfg.contention = ContentionMode::kOn;
    } else if (v == "off" || v == "0") {
      cfg.contention = ContentionMode::kOff;
    } else {
      *error = strprintf("OPENNEURON_CONTENTION='%s' is invalid: expected auto, on or off", c);
      return ONRT_ERROR_INVALID_CONFIG;
    }
  }
  if (const char* c = env("OPENNEURON_SHAREABLE_MEMORY"); c != nullptr && !trim(c).empty()) {
    const std::string v = trim(c);
    if (v == "on" || v == "1") {
      cfg.sharing = SharingMode::kFromStart;
    } else if (v == "off" || v == "0") {
      cfg.sharing = SharingMode::kOff;
    } else if (v != "auto") {
      *error =
          strprintf("OPENNEURON_SHAREABLE_MEMORY='%s' is invalid: expected auto, on or off", c);
      return ONRT_ERROR_INVALID_CONFIG;
    }
  }
  if (const char* c = env("OPENNEURON_PROTECT_MEMORY"); c != nullptr && !trim(c).empty()) {
    const std::string v = trim(c);
    if (v == "on" || v == "1") {
      cfg.protect_memory = true;
    } else if (v != "off" && v != "0") {
      *error =
          strprintf("OPENNEURON_PROTECT_MEMORY='%s' is invalid: expected 1 (on) or 0 (off)", c);
      return ONRT_ERROR_INVALID_CONFIG;
    }
  }
  *out = std::move(cfg);
  return ONRT_OK;
}

uint64_t host_physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

onrt_status load_config(Config* out, std::string* error) {
  return parse_config([](const char* name) { return std::getenv(name); }, host_physical_memory(),
                      out, error);
}

}  // namespace openneuron::runtime

// Environment parsing, tested through the internal parser so each case gets a
// fresh environment (onrt_init itself runs once per process).
#include "../../../csrc/runtime/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace openneuron::runtime {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kBigHost = 1024 * kGiB;

struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

onrt_status parse(const Env& env, Config* cfg, std::string* err, uint64_t host = kBigHost) {
  return parse_config(env.lookup(), host, cfg, err);
}

TEST(ConfigTest, DefaultsAreTwoTrn2Cores) {
  Env env;
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << err;
  EXPECT_STREQ(cfg.platform->name, "trn2");
  EXPECT_FALSE(cfg.platform->supports_fp8);
  EXPECT_EQ(cfg.num_physical_cores, 2);
  EXPECT_EQ(cfg.visible_cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(cfg.hbm_bytes_per_core, 24 * kGiB);
  EXPECT_FALSE(cfg.launch_blocking);
}

TEST(ConfigTest, LaunchersGetOneCorePerLocalRank) {
  Config cfg;
  std::string err;
  // torchrun --nproc_per_node=4: rank 3 needs neuron:3.
  ASSERT_EQ(parse(Env{{{"LOCAL_WORLD_SIZE", "4"}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.num_physical_cores, 4);
  // Fewer local ranks than the default keep the default; an explicit count wins.
  ASSERT_EQ(parse(Env{{{"LOCAL_WORLD_SIZE", "1"}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.num_physical_cores, 2);
  ASSERT_EQ(parse(Env{{{"LOCAL_WORLD_SIZE", "4"}, {"OPENNEURON_NUM_CORES", "1"}}}, &cfg, &err),
            ONRT_OK)
      << err;
  EXPECT_EQ(cfg.num_physical_cores, 1);
}

TEST(ConfigTest, Trn3HasMoreMemoryAndFp8) {
  Env env{{{"OPENNEURON_PLATFORM", "trn3"}}};
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << err;
  EXPECT_STREQ(cfg.platform->name, "trn3");
  EXPECT_TRUE(cfg.platform->supports_fp8);
  EXPECT_EQ(cfg.hbm_bytes_per_core, 36 * kGiB);
}

TEST(ConfigTest, UnknownPlatformListsValidOnes) {
  Env env{{{"OPENNEURON_PLATFORM", "trn9"}}};
  Config cfg;
  std::string err;
  EXPECT_EQ(parse(env, &cfg, &err), ONRT_ERROR_INVALID_CONFIG);
  EXPECT_NE(err.find("trn9"), std::string::npos) << err;
  EXPECT_NE(err.find("trn2, trn3"), std::string::npos) << err;
}

TEST(ConfigTest, CapacityIsCappedByHostMemory) {
  Env env;
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(env, &cfg, &err, 8 * kGiB), ONRT_OK) << err;
  EXPECT_EQ(cfg.hbm_bytes_per_core, 8 * kGiB);
}

TEST(ConfigTest, HbmOverrideWinsEvenOverHostMemory) {
  Env env{{{"OPENNEURON_HBM_BYTES", "64G"}}};
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(env, &cfg, &err, 8 * kGiB), ONRT_OK) << err;
  EXPECT_EQ(cfg.hbm_bytes_per_core, 64 * kGiB);

  env.vars["OPENNEURON_HBM_BYTES"] = "1048576";
  ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.hbm_bytes_per_core, 1048576u);

  env.vars["OPENNEURON_HBM_BYTES"] = "512MiB";
  ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.hbm_bytes_per_core, 512u << 20);

  // Every capacity a suffix can spell can be spelled in bytes (found by config_fuzz).
  env.vars["OPENNEURON_HBM_BYTES"] = "9999998T";
  ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << err;
  env.vars["OPENNEURON_HBM_BYTES"] = std::to_string(cfg.hbm_bytes_per_core);
  ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.hbm_bytes_per_core, 9999998ull << 40);
  env.vars["OPENNEURON_HBM_BYTES"] = "18446744073709551616";  // 2^64
  EXPECT_EQ(parse(env, &cfg, &err), ONRT_ERROR_INVALID_CONFIG);
}

TEST(ConfigTest, BadHbmOverrideIsRejected) {
  for (const char* bad : {"lots", "0", "12X", "-5"}) {
    Env env{{{"OPENNEURON_HBM_BYTES", bad}}};
    Config cfg;
    std::string err;
    EXPECT_EQ(parse(env, &cfg, &err), ONRT_ERROR_INVALID_CONFIG) << bad;
    EXPECT_NE(err.find("OPENNEURON_HBM_BYTES"), std::string::npos) << err;
  }
}

TEST(ConfigTest, NumCores) {
  Env env{{{"OPENNEURON_NUM_CORES", "8"}}};
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.num_physical_cores, 8);
  EXPECT_EQ(cfg.visible_cores.size(), 8u);

  for (const char* bad : {"0", "abc", "2x", "-1", "99999"}) {
    env.vars["OPENNEURON_NUM_CORES"] = bad;
    EXPECT_EQ(parse(env, &cfg, &err), ONRT_ERROR_INVALID_CONFIG) << bad;
    EXPECT_NE(err.find("OPENNEURON_NUM_CORES"), std::string::npos) << err;
  }
}

TEST(ConfigTest, VisibleCoresSelectAndRenumber) {
  struct Case {
    const char* value;
    std::vector<int> expected;
  };
  for (const Case& c : {Case{"0", {0}}, Case{"1,3", {1, 3}}, Case{"0-2", {0, 1, 2}},
                        Case{"3,0-1", {3, 0, 1}}, Case{" 2 , 1 ", {2, 1}}}) {
    Env env{{{"OPENNEURON_NUM_CORES", "4"}, {"NEURON_RT_VISIBLE_CORES", c.value}}};
    Config cfg;
    std::string err;
    ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK) << c.value << ": " << err;
    EXPECT_EQ(cfg.visible_cores, c.expected) << c.value;
  }
}

TEST(ConfigTest, InvalidVisibleCoresListTheValidRange) {
  for (const char* bad : {"4", "0-7", "x", "1,,2", "2-1", "1,1", "-1"}) {
    Env env{{{"OPENNEURON_NUM_CORES", "4"}, {"NEURON_RT_VISIBLE_CORES", bad}}};
    Config cfg;
    std::string err;
    EXPECT_EQ(parse(env, &cfg, &err), ONRT_ERROR_INVALID_CONFIG) << bad;
    EXPECT_NE(err.find("NEURON_RT_VISIBLE_CORES"), std::string::npos) << err;
    EXPECT_NE(err.find("0..3"), std::string::npos) << err;
  }
}

TEST(ConfigTest, LaunchBlockingAcceptsBothNames) {
  Config cfg;
  std::string err;
  for (const char* name : {"NEURON_LAUNCH_BLOCKING", "OPENNEURON_LAUNCH_BLOCKING"}) {
    Env env{{{name, "1"}}};
    ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK);
    EXPECT_TRUE(cfg.launch_blocking) << name;
    env.vars.insert_or_assign(name, std::string("0"));
    ASSERT_EQ(parse(env, &cfg, &err), ONRT_OK);
    EXPECT_FALSE(cfg.launch_blocking) << name;
  }
}

TEST(ConfigTest, ContentionMode) {
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(Env{}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.contention, ContentionMode::kAuto);
  const std::pair<const char*, ContentionMode> modes[] = {{"auto", ContentionMode::kAuto},
                                                          {" on ", ContentionMode::kOn},
                                                          {"1", ContentionMode::kOn},
                                                          {"off", ContentionMode::kOff},
                                                          {"0", ContentionMode::kOff}};
  for (const auto& [text, mode] : modes) {
    ASSERT_EQ(parse(Env{{{"OPENNEURON_CONTENTION", text}}}, &cfg, &err), ONRT_OK) << text;
    EXPECT_EQ(cfg.contention, mode) << text;
  }
  for (const char* bad : {"yes", "2", "auto,on"}) {
    EXPECT_EQ(parse(Env{{{"OPENNEURON_CONTENTION", bad}}}, &cfg, &err), ONRT_ERROR_INVALID_CONFIG);
    EXPECT_NE(err.find("OPENNEURON_CONTENTION='"), std::string::npos) << err;
  }
}

TEST(ConfigTest, SharingMode) {
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(Env{}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.sharing, SharingMode::kOnRequest);
  // One of several ranks on this host: shareable from the first allocation.
  ASSERT_EQ(parse(Env{{{"LOCAL_WORLD_SIZE", "2"}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.sharing, SharingMode::kFromStart);
  ASSERT_EQ(parse(Env{{{"LOCAL_WORLD_SIZE", "1"}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.sharing, SharingMode::kOnRequest);
  ASSERT_EQ(
      parse(Env{{{"LOCAL_WORLD_SIZE", "2"}, {"OPENNEURON_SHAREABLE_MEMORY", "off"}}}, &cfg, &err),
      ONRT_OK);
  EXPECT_EQ(cfg.sharing, SharingMode::kOff);
  ASSERT_EQ(parse(Env{{{"OPENNEURON_SHAREABLE_MEMORY", " on "}}}, &cfg, &err), ONRT_OK);
  EXPECT_EQ(cfg.sharing, SharingMode::kFromStart);
  ASSERT_EQ(parse(Env{{{"OPENNEURON_SHAREABLE_MEMORY", "auto"}}}, &cfg, &err), ONRT_OK);
  EXPECT_EQ(cfg.sharing, SharingMode::kOnRequest);
  EXPECT_EQ(parse(Env{{{"OPENNEURON_SHAREABLE_MEMORY", "yes"}}}, &cfg, &err),
            ONRT_ERROR_INVALID_CONFIG);
  EXPECT_NE(err.find("OPENNEURON_SHAREABLE_MEMORY='yes'"), std::string::npos) << err;
}

TEST(ConfigTest, ProtectMemory) {
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(Env{}, &cfg, &err), ONRT_OK) << err;
  EXPECT_FALSE(cfg.protect_memory);
  ASSERT_EQ(parse(Env{{{"OPENNEURON_PROTECT_MEMORY", " 1 "}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_TRUE(cfg.protect_memory);
  ASSERT_EQ(parse(Env{{{"OPENNEURON_PROTECT_MEMORY", "off"}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_FALSE(cfg.protect_memory);
  EXPECT_EQ(parse(Env{{{"OPENNEURON_PROTECT_MEMORY", "yes"}}}, &cfg, &err),
            ONRT_ERROR_INVALID_CONFIG);
  EXPECT_NE(err.find("OPENNEURON_PROTECT_MEMORY='yes' is invalid"), std::string::npos) << err;
}

TEST(ConfigTest, HostMemoryIsKnown) { EXPECT_GT(host_physical_memory(), 0u); }

TEST(ConfigTest, WatchdogSeconds) {
  Config cfg;
  std::string err;
  ASSERT_EQ(parse(Env{}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.watchdog_seconds, 300);
  ASSERT_EQ(parse(Env{{{"OPENNEURON_WATCHDOG_SECONDS", " 2.5 "}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.watchdog_seconds, 2.5);
  ASSERT_EQ(parse(Env{{{"OPENNEURON_WATCHDOG_SECONDS", "0"}}}, &cfg, &err), ONRT_OK) << err;
  EXPECT_EQ(cfg.watchdog_seconds, 0);
  for (const char* bad : {"-1", "soon", "5s", "nan"}) {
    EXPECT_EQ(parse(Env{{{"OPENNEURON_WATCHDOG_SECONDS", bad}}}, &cfg, &err),
              ONRT_ERROR_INVALID_CONFIG)
        << bad;
    EXPECT_NE(err.find("OPENNEURON_WATCHDOG_SECONDS='"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace openneuron::runtime

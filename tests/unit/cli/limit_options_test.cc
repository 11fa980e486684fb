// The build limits of kiln worker, serve and build (cli/src/limit_options.h).
#include "limit_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/error.h"
#include "pressure_options.h"

namespace kiln::cli {
namespace {

using ::testing::HasSubstr;

TEST(LimitOptionsTest, ParsesEachLimit) {
  BuildLimitOptions o{"512M", "1000", "50", "2G", ""};
  auto r = parseBuildLimits(o);
  EXPECT_EQ(r,
            (worker::ResourceLimits{512u << 20, 1000, 50, uint64_t{2} << 30}));
  EXPECT_FALSE(parseBigBuildLimits(o));
  EXPECT_EQ(buildLimitArgs(o),
            (std::vector<std::string>{
                "--build-memory-max", "512M", "--build-pids-max", "1000",
                "--build-cpu-weight", "50", "--build-disk-max", "2G"}));
}

TEST(LimitOptionsTest, BigBuildLimits) {
  BuildLimitOptions o;
  o.bigBuild = "memory-max=16G,disk-max=100G";
  auto r = parseBigBuildLimits(o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->memoryMaxBytes, uint64_t{16} << 30);
  EXPECT_EQ(r->diskMaxBytes, uint64_t{100} << 30);
  EXPECT_EQ(r->pidsMax, 0u);
}

TEST(LimitOptionsTest, BadValuesNameTheirOption) {
  auto error = [](BuildLimitOptions o) {
    try {
      parseBuildLimits(o);
      parseBigBuildLimits(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(error({"2GB", "", "", "", ""}),
              HasSubstr("--build-memory-max: invalid size '2GB'"));
  EXPECT_THAT(error({"", "0", "", "", ""}),
              HasSubstr("--build-pids-max: invalid value '0'"));
  EXPECT_THAT(error({"", "", "10001", "", ""}),
              HasSubstr("--build-cpu-weight: invalid value '10001'"));
  EXPECT_THAT(error({"", "", "", "", "swap-max=1G"}),
              HasSubstr("unknown limit 'swap-max'"));
  EXPECT_THAT(error({"", "", "", "", "memory-max"}),
              HasSubstr("want KEY=VALUE"));
}

TEST(PressureOptionsTest, ParsesEachThresholdAndGivesItsArguments) {
  PressureOptions o{"16", "20", "35.5", "50", "10G"};
  auto t = parsePressureOptions(o);
  EXPECT_EQ(t.maxLoadAverage, 16.0);
  EXPECT_EQ(t.maxMemoryPressure, 20.0);
  EXPECT_EQ(t.maxCpuPressure, 35.5);
  EXPECT_EQ(t.maxIoPressure, 50.0);
  EXPECT_EQ(t.minFreeDiskBytes, uint64_t{10} << 30);
  EXPECT_EQ(pressureArgs(o),
            (std::vector<std::string>{
                "--max-load-average", "16", "--max-memory-pressure", "20",
                "--max-cpu-pressure", "35.5", "--max-io-pressure", "50",
                "--min-free-disk", "10G"}));
  EXPECT_EQ(parsePressureOptions({}), protocol::PressureThresholds{});
  // The command line's wins over serve's config.
  PressureOptions given;
  given.maxIoPressure = "10";
  mergePressureOptions(given, o);
  EXPECT_EQ(given, (PressureOptions{"16", "20", "35.5", "10", "10G"}));
}

TEST(PressureOptionsTest, BadValuesNameTheirOption) {
  auto error = [](PressureOptions o) {
    try {
      parsePressureOptions(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(error({"", "101", "", "", ""}),
              HasSubstr("--max-memory-pressure: invalid value '101'"));
  EXPECT_THAT(error({"0", "", "", "", ""}),
              HasSubstr("--max-load-average: invalid value '0'"));
  EXPECT_THAT(error({"", "", "2x", "", ""}),
              HasSubstr("--max-cpu-pressure: invalid value '2x'"));
  EXPECT_THAT(error({"", "", "", "nan", ""}),
              HasSubstr("--max-io-pressure: invalid value 'nan'"));
  EXPECT_THAT(error({"", "", "", "", "10GB"}), HasSubstr("--min-free-disk"));
}

}  // namespace
}  // namespace kiln::cli

// The worker's pressure figures: parsing /proc/pressure and /proc/meminfo,
// reading them from a folder laid out like /proc, and the heartbeats and
// Hello that carry them and the thresholds to the scheduler.

#include "kiln/worker/pressure.h"

#include <filesystem>

#include "daemon_fixture.h"

namespace kiln::worker {
namespace {

namespace proto = protocol;
using namespace std::chrono_literals;

TEST(Pressure, ParsesTheSomeLineOfPsi) {
  EXPECT_EQ(parsePsiSome("some avg10=42.17 avg60=3.00 avg300=0.50 "
                         "total=123456\nfull avg10=1.00 avg60=0.00 "
                         "avg300=0.00 total=99\n"),
            42.17);
  EXPECT_EQ(parsePsiSome("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
            0.0);
  EXPECT_EQ(parsePsiSome("full avg10=1.00 avg60=0 avg300=0 total=1\n"),
            std::nullopt);
  EXPECT_EQ(parsePsiSome("some avg60=1.00 total=1\n"), std::nullopt);
  EXPECT_EQ(parsePsiSome("some avg10=abc\n"), std::nullopt);
  EXPECT_EQ(parsePsiSome("some avg10=100.5 avg60=0\n"), std::nullopt);
  EXPECT_EQ(parsePsiSome(""), std::nullopt);
}

TEST(Pressure, ParsesMemAvailable) {
  EXPECT_EQ(parseMemAvailable("MemTotal:       24576000 kB\n"
                              "MemFree:         1000000 kB\n"
                              "MemAvailable:   12000000 kB\n"),
            uint64_t{12000000} << 10);
  EXPECT_EQ(parseMemAvailable("MemTotal: 1 kB\n"), std::nullopt);
  EXPECT_EQ(parseMemAvailable("MemAvailable: lots kB\n"), std::nullopt);
  EXPECT_EQ(parseMemAvailable("MemAvailable: 12\n"), std::nullopt);
}

TEST(Pressure, ReadsAFolderLaidOutLikeProc) {
  TempDir dir("pressure");
  std::filesystem::create_directories(dir.path() + "/pressure");
  writeFile(dir.path() + "/pressure/memory",
            "some avg10=25.50 avg60=1 avg300=0 total=5\n"
            "full avg10=3.00 avg60=0 avg300=0 total=1\n");
  writeFile(dir.path() + "/pressure/io", "garbage\n");
  writeFile(dir.path() + "/meminfo", "MemAvailable: 2048 kB\n");
  MachinePressure p = procPressureSource(dir.path())->read();
  EXPECT_EQ(p.memory, 25.5);
  EXPECT_EQ(p.cpu, std::nullopt);  // missing
  EXPECT_EQ(p.io, std::nullopt);   // malformed
  EXPECT_EQ(p.freeMemory, uint64_t{2048} << 10);
}

TEST(Pressure, TheHostsProcIsReadable) {
  // Whatever this host offers: values within their ranges, or absent.
  MachinePressure p = procPressureSource("/proc")->read();
  for (auto v : {p.memory, p.cpu, p.io})
    if (v) {
      EXPECT_TRUE(*v >= 0 && *v <= 100) << *v;
    }
  ASSERT_TRUE(p.freeMemory.has_value());  // Linux has had it since 3.14
  EXPECT_GT(*p.freeMemory, 0u);
}

using fixture::DaemonTest;

TEST_F(DaemonTest, HeartbeatsCarryPressureAndHelloTheThresholds) {
  thresholds_.maxMemoryPressure = 20;
  thresholds_.minFreeDiskBytes = uint64_t{5} << 30;
  MachinePressure p;
  p.memory = 42.5;
  p.io = 1.25;
  p.freeMemory = uint64_t{3} << 30;
  pressure_->set(p);
  startDaemon();
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Hello>(); }));
  EXPECT_EQ(sched_.last<proto::Hello>()->thresholds, thresholds_);
  ASSERT_TRUE(pollUntilWelcomed());
  ASSERT_TRUE(pumpUntil([&] { return sched_.last<proto::Heartbeat>(); }));
  auto beat = *sched_.last<proto::Heartbeat>();
  EXPECT_EQ(beat.memoryPressure, 42.5);
  EXPECT_EQ(beat.cpuPressure, std::nullopt);
  EXPECT_EQ(beat.ioPressure, 1.25);
  EXPECT_EQ(beat.freeMemoryBytes, uint64_t{3} << 30);

  // The next heartbeat (one interval later on the fake clock) reports the
  // machine as it is then.
  p.memory = 0;
  pressure_->set(p);
  sched_.received.clear();
  clock_.advance(200ms);
  ASSERT_TRUE(pumpUntil([&] {
    auto* b = sched_.last<proto::Heartbeat>();
    return b && b->memoryPressure == 0.0;
  }));
}

}  // namespace
}  // namespace kiln::worker

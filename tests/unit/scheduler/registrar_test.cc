// The registrar adds verified uploads off the service thread: reports in
// order, errors as reports, a readable wake descriptor, nothing dropped at
// shutdown.
#include "kiln/scheduler/registrar.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

store::StorePath pathNamed(char c, const std::string& name) {
  return store::StorePath(std::string(32, c) + "-" + name);
}

// A registration whose "NAR" is `content` in an unlinked temporary file.
Registration makeRegistration(const TempDir& dir, int64_t step,
                              const std::string& name,
                              const std::string& content) {
  std::string tmp = dir.path() + "/" + name;
  writeFile(tmp, content);
  AutoCloseFD fd(open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
  unlink(tmp.c_str());
  return {step, "out", store::ValidPathInfo(pathNamed('a' + step, name)),
          std::move(fd)};
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

std::string drain(Source& src) {
  std::string s;
  char buf[64];
  while (size_t n = src.read(buf, sizeof buf)) s.append(buf, n);
  return s;
}

TEST(Registrar, RegistersInOrderAndWakesTheLoop) {
  TempDir dir;
  Sync<std::vector<std::string>> seen;
  Registrar reg([&](const Registration& r, Source& nar) {
    seen.lock()->push_back(r.info.path.baseName().substr(33) + "=" + drain(nar));
  });
  EXPECT_FALSE(readable(reg.wakeFd()));
  reg.submit(makeRegistration(dir, 1, "first", "nar one"));
  reg.submit(makeRegistration(dir, 2, "second", "nar two"));
  std::vector<RegistrationDone> done;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        if (!readable(reg.wakeFd())) return false;
        for (auto& d : reg.takeDone()) done.push_back(d);
        return done.size() == 2;
      },
      20s));
  EXPECT_EQ(done[0].step, 1);
  EXPECT_EQ(done[1].step, 2);
  EXPECT_EQ(done[0].output, "out");
  EXPECT_EQ(done[0].error, "");
  EXPECT_EQ(done[1].error, "");
  EXPECT_EQ(*seen.lock(),
            (std::vector<std::string>{"first=nar one", "second=nar two"}));
  EXPECT_EQ(reg.pending(), 0u);
  EXPECT_FALSE(readable(reg.wakeFd()));  // takeDone cleared it
}

TEST(Registrar, AFailedRegistrationIsReportedAndTheNextOneStillRuns) {
  TempDir dir;
  Registrar reg([&](const Registration& r, Source&) {
    if (r.info.path.baseName().ends_with("-bad"))
      throw Error("disk full while adding " + r.info.path.baseName());
  });
  reg.submit(makeRegistration(dir, 1, "bad", "x"));
  reg.submit(makeRegistration(dir, 2, "good", "y"));
  std::vector<RegistrationDone> done;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        for (auto& d : reg.takeDone()) done.push_back(d);
        return done.size() == 2;
      },
      20s));
  EXPECT_NE(done[0].error.find("disk full while adding"), std::string::npos);
  EXPECT_EQ(done[1].error, "");
}

TEST(Registrar, ShutdownRegistersWhatIsQueued) {
  TempDir dir;
  std::atomic<int> added{0};
  Sync<bool> gate(false);
  {
    Registrar reg([&](const Registration&, Source&) {
      auto open = gate.lock();
      open.wait([&] { return *open; });
      ++added;
    });
    for (int i = 1; i <= 3; i++)
      reg.submit(makeRegistration(dir, i, "p" + std::to_string(i), "z"));
    *gate.lock() = true;
    gate.notifyAll();
  }
  EXPECT_EQ(added.load(), 3);
}

}  // namespace
}  // namespace kiln::scheduler

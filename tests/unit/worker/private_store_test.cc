// enterPrivateStore: layout checks and the order of system calls (fake), a
// refused call turned into an error saying what to do, and the real thing
// in a forked child (root only): the child sees its store at the logical
// directory, the parent does not.
#include "kiln/worker/private_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeMountSystem : public MountSystem {
 public:
  void unshareMountNamespace() override { call("unshare"); }
  void makeRootPrivate() override { call("rprivate /"); }
  void makeDirs(const std::string& p) override { call("mkdir " + p); }
  void bindMount(const std::string& s, const std::string& t) override {
    call("bind " + s + " " + t);
  }
  std::vector<std::string> calls;
  std::string failOn;  // first word of the call that fails
  int failErrno = EPERM;

 private:
  void call(const std::string& c) {
    if (!failOn.empty() && c.rfind(failOn, 0) == 0)
      throw SysError(c, failErrno);
    calls.push_back(c);
  }
};

TEST(PrivateStore, UnsharesThenBindMountsTheStoreOnTheLogicalDir) {
  FakeMountSystem sys;
  enterPrivateStore("/var/lib/w1/store", "/nix/store", sys);
  EXPECT_THAT(sys.calls,
              ElementsAre("unshare", "rprivate /", "mkdir /var/lib/w1/store",
                          "mkdir /nix/store",
                          "bind /var/lib/w1/store /nix/store"));
}

TEST(PrivateStore, RefusesBadLayoutsBeforeAnySystemCall) {
  for (auto [phys, logical] : std::vector<std::pair<std::string, std::string>>{
           {"relative/store", "/nix/store"},
           {"/w/store", "/"},
           {"/w/store/", "/nix/store"},
           {"/w/../store", "/nix/store"},
           {"/w//store", "/nix/store"},
           {"/nix/store", "/nix/store"},
           {"/nix/store/w/store", "/nix/store"},
           {"/w/store", "/w/store/nix/store"}}) {
    FakeMountSystem sys;
    EXPECT_THROW(enterPrivateStore(phys, logical, sys), Error)
        << phys << " " << logical;
    EXPECT_TRUE(sys.calls.empty()) << phys << " " << logical;
  }
  FakeMountSystem sys;
  try {
    enterPrivateStore("/nix/store/w/store", "/nix/store", sys);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("neither inside the other"));
  }
}

TEST(PrivateStore, ARefusedCallSaysWhatToDo) {
  FakeMountSystem sys;
  sys.failOn = "unshare";
  try {
    enterPrivateStore("/w/store", "/nix/store", sys);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("unshare"));
    EXPECT_THAT(m, HasSubstr("Operation not permitted"));
    EXPECT_THAT(m, HasSubstr("CAP_SYS_ADMIN"));
    EXPECT_THAT(m, HasSubstr("--store-mounted-at-logical"));
  }
  FakeMountSystem threaded;
  threaded.failOn = "unshare";
  threaded.failErrno = EINVAL;
  try {
    enterPrivateStore("/w/store", "/nix/store", threaded);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("before the process starts threads"));
  }
  FakeMountSystem bind;
  bind.failOn = "bind";
  EXPECT_THROW(enterPrivateStore("/w/store", "/nix/store", bind), Error);
  EXPECT_EQ(bind.calls.size(), 4u);
}

// The real system calls, in a forked (single-threaded) child.
TEST(PrivateStore, ChildSeesItsOwnStoreAtTheLogicalDir) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  TempDir dir;
  std::string phys = dir.path() + "/state/store";
  std::string logical = dir.path() + "/logical/store";
  createDirs(phys);
  writeFile(phys + "/marker", "mine");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 1;
    try {
      enterPrivateStore(phys, logical);
      rc = readFile(logical + "/marker") == "mine" ? 0 : 2;
    } catch (...) {
      rc = 3;
    }
    _exit(rc);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  // The mount lived in the child's namespace only.
  EXPECT_TRUE(pathExists(logical));
  EXPECT_FALSE(pathExists(logical + "/marker"));
}

}  // namespace
}  // namespace kiln::worker

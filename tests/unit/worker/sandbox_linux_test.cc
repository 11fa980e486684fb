// The `linux` sandbox plugin through the build runner: what a builder sees
// and every escape the issue lists, each of which must fail. Builders run
// /bin/sh and the escape probe (tests/support/sandbox_probe.c), which exits
// 0 only when an escape succeeded; the scripts record each probe's exit
// code in $out, so one build checks several attempts.
#include <arpa/inet.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "kiln/common/file.h"
#include "sandbox_fixture.h"
#include "test_support.h"

namespace kiln::worker::sbtest {
namespace {

using kiln::StepStatus;
using ::testing::HasSubstr;

/// Runs the probe with `args` and appends "<label>=<exit code>" to $out.
std::string probe(const std::string& label, const std::string& args) {
  return "/probe " + args + "; echo " + label + "=$? >> $out; ";
}

/// A TCP listener on 127.0.0.1 that answers every connection with `reply`.
class Listener {
 public:
  explicit Listener(std::string reply) : reply_(std::move(reply)) {
    fd_ = AutoCloseFD(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len) < 0 ||
        ::listen(fd_.get(), 8) < 0 ||
        ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len) < 0)
      throwSysError("listening on loopback");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Listener() {
    ::shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
  }
  std::string port() const { return std::to_string(port_); }
  int accepted() const { return accepted_; }

 private:
  void serve() {
    for (;;) {
      int c = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ++accepted_;
      ssize_t n = ::write(c, reply_.data(), reply_.size());
      (void)n;
      ::close(c);
    }
  }
  std::string reply_;
  AutoCloseFD fd_;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

/// Processes whose command line contains `token`.
int processesWith(const std::string& token) {
  int n = 0;
  DIR* d = ::opendir("/proc");
  while (auto* e = ::readdir(d)) {
    std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd;
    try {
      cmd = readFile("/proc/" + pid + "/cmdline");
    } catch (const Error&) {
      continue;
    }
    if (cmd.find(token) != std::string::npos) ++n;
  }
  ::closedir(d);
  return n;
}

/// What builds left in `scratch`: every entry but the kept sandbox roots,
/// and whatever their /tmp and store directory hold.
std::vector<std::string> leftOfBuilds(const std::string& scratch) {
  std::vector<std::string> left;
  for (auto& e :
       kiln::test::nonEmptyLines(kiln::test::run({"ls", "-A", scratch}).out)) {
    if (::geteuid() != 0 || e.rfind("kiln-sandbox-", 0) != 0) {
      left.push_back(e);
      continue;
    }
    for (const char* dir : {"/tmp", "/nix/store"})
      for (auto& f : kiln::test::nonEmptyLines(
               kiln::test::run({"ls", "-A", scratch + "/" + e + dir}).out))
        left.push_back(e + dir + "/" + f);
  }
  return left;
}

TEST_F(SandboxTest, BuilderSeesOnlyItsClosureAtTheLogicalPath) {
  auto in = addInput("input", "the input\n");
  auto outside = addInput("outside", "not in the closure\n");
  auto r =
      request("closure", "read x < " + logical(in) + "; echo \"$x\" > $out; " +
                             probe("outside", "read " + logical(outside)) +
                             "echo \"$NIX_BUILD_TOP $PWD\" >> $out");
  r.inputClosure = {in};
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  auto& o = res.outputs.at(0);
  EXPECT_EQ(o.physicalPath, physical(*r.drv.outputs["out"].path));
  EXPECT_EQ(readFile(o.physicalPath), "the input\noutside=1\n/build /build\n");
  EXPECT_EQ(o.references, store::StorePathSet{});
  // Nothing of the build is left in its scratch folder: the sandbox's root
  // is removed in the background once the outputs moved out or, for a
  // build user's root (the worker runs as root), kept for the next build
  // with nothing in the places its builder could write.
  EXPECT_TRUE(kiln::test::pollUntil(
      [&] { return leftOfBuilds(root_.path() + "/build").empty(); },
      std::chrono::seconds(30)));
}

TEST_F(SandboxTest, IdentityInsideIsAnUnprivilegedBuildUser) {
  auto r = request(
      "identity",
      "while read k v rest; do case $k in Uid:|Gid:|CapEff:|CapBnd:|"
      "CapAmb:|NoNewPrivs:|Groups:) echo \"$k $v\" >> $out;; esac; done "
      "< /proc/self/status; read h < /proc/sys/kernel/hostname; "
      "echo \"host $h pid $$\" >> $out");
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  EXPECT_EQ(readFile(res.outputs.at(0).physicalPath),
            "Uid: 1000\nGid: 100\nGroups: \nCapEff: 0000000000000000\n"
            "CapBnd: 0000000000000000\nCapAmb: 0000000000000000\n"
            "NoNewPrivs: 1\nhost localhost pid 1\n");
}

// Every namespace the issue lists is the build's own: none is the test's
// (a new user, mount, PID, network, IPC and UTS namespace per build).
TEST_F(SandboxTest, EveryNamespaceIsTheBuildsOwn) {
  std::string script = ": > $out; ";
  std::string want;
  for (std::string ns : {"user", "mnt", "pid", "net", "ipc", "uts"}) {
    char link[128];
    ssize_t n = ::readlink(("/proc/self/ns/" + ns).c_str(), link, sizeof link);
    ASSERT_GT(n, 0) << ns;
    script += probe(ns, "ns " + ns + " '" + std::string(link, n) + "'");
    want += ns + "=1\n";
  }
  auto res = build(request("namespaces", script));
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  EXPECT_EQ(readFile(res.outputs.at(0).physicalPath), want) << log_;
}

TEST_F(SandboxTest, CannotReadHostSecrets) {
  TempDir keys("sandbox-keys");
  writeFile(keys.path() + "/worker.key", "SECRET");
  auto r = request("secrets",
                   ": > $out; " + probe("shadow", "read /etc/shadow") +
                       probe("home", "read /home") +
                       probe("key", "read " + keys.path() + "/worker.key") +
                       probe("root", "read /root"));
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  EXPECT_EQ(readFile(res.outputs.at(0).physicalPath),
            "shadow=1\nhome=1\nkey=1\nroot=1\n")
      << log_;
}

TEST_F(SandboxTest, CannotWriteTheStoreTheDatabaseOrAnInput) {
  auto in = addInput("victim", "original\n");
  TempDir state("sandbox-state");
  writeFile(state.path() + "/db.sqlite", "database");
  auto r = request("writer",
                   ": > $out; " + probe("store", "write /nix/store/evil") +
                       probe("physical", "write " + physicalDir_ + "/evil") +
                       probe("db", "write " + state.path() + "/db.sqlite") +
                       probe("input", "write " + logical(in)) + "rm -f " +
                       logical(in) + " 2>/dev/null; " +
                       probe("after-rm", "read " + logical(in)));
  r.inputClosure = {in};
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  // Writing /nix/store/evil succeeds inside (the outputs' parent is
  // writable) but lands in the build's scratch root, never in the store.
  EXPECT_THAT(readFile(res.outputs.at(0).physicalPath),
              HasSubstr("physical=1\ndb=1\ninput=1\nafter-rm=0\n"));
  EXPECT_FALSE(pathExists(physicalDir_ + "/evil"));
  EXPECT_EQ(readFile(physical(in)), "original\n");
  EXPECT_EQ(readFile(state.path() + "/db.sqlite"), "database");
}

TEST_F(SandboxTest, NoNetworkButLoopbackOfItsOwn) {
  Listener host("hello from the host\n");
  auto r =
      request("net", ": > $out; " + probe("host", "connect " + host.port()));
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  EXPECT_EQ(readFile(res.outputs.at(0).physicalPath), "host=1\n") << log_;
  EXPECT_EQ(host.accepted(), 0);
}

TEST_F(SandboxTest, FixedOutputReachesTheHostAndIsHashChecked) {
  Listener host("fetched bytes\n");
  auto r = request("fetch", "/probe fetch " + host.port() + " $out");
  makeFixed(r, "fetched bytes\n");
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  EXPECT_EQ(readFile(res.outputs.at(0).physicalPath), "fetched bytes\n");

  auto bad = request("fetch-bad", "/probe fetch " + host.port() + " $out");
  makeFixed(bad, "something else\n");
  res = build(bad);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_THAT(res.errorMsg, HasSubstr("hash mismatch"));
  EXPECT_FALSE(pathExists(physical(*bad.drv.outputs["out"].path)));
  EXPECT_EQ(host.accepted(), 2);
}

TEST_F(SandboxTest, CannotKillOrTraceTheWorker) {
  std::string me = std::to_string(::getpid());
  auto r =
      request("killer", ": > $out; " + probe("kill", "kill " + me) +
                            probe("ptrace", "ptrace " + me) +
                            probe("proc", "read /proc/" + me + "/environ") +
                            "/probe killall; echo survived >> $out");
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  EXPECT_EQ(readFile(res.outputs.at(0).physicalPath),
            "kill=1\nptrace=1\nproc=1\nsurvived\n");
}

TEST_F(SandboxTest, NoDaemonSurvivesTheBuild) {
  std::string token = "kiln-daemon-" + baseNameOf(root_.path());
  auto r = request("daemon", probe("daemon", "daemon " + token));
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  // The probe saw its daemon running before the build ended...
  EXPECT_EQ(readFile(res.outputs.at(0).physicalPath), "daemon=0\n") << log_;
  // ...and the kernel killed it with the namespace's PID 1.
  EXPECT_EQ(processesWith(token), 0);
}

TEST_F(SandboxTest, MissingBuilderIsABuildFailure) {
  auto r = request("nobuilder", "");
  r.drv.builder = "/no/such/builder";
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_EQ(res.errorMsg,
            "cannot start the builder: executing '/no/such/builder': No such "
            "file or directory");
}

// The same tests with the worker as an ordinary user (nobody): the
// sandbox then maps that user's own uid (no build-user pool) and must hold
// all the same.
TEST(SandboxUnprivileged, EscapeTestsPassAsNobody) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to nobody";
  if (!kiln::test::haveProgram("setpriv")) GTEST_SKIP() << "setpriv missing";
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  auto r = kiln::test::run(
      {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
       std::string(self, n), "--gtest_filter=SandboxTest.*"},
      "", {"TMPDIR=/tmp"});
  if (r.out.find("the linux sandbox cannot run here") != std::string::npos)
    GTEST_SKIP() << "not as nobody on this host:\n" << r.out;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[  PASSED  ] 13 tests."));
}

}  // namespace
}  // namespace kiln::worker::sbtest

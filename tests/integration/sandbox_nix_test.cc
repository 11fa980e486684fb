// kiln's `linux` sandbox against Nix 2.8's: the same derivations (written by
// nix-instantiate into a chroot store, so Nix always sandboxes) built by
// `nix-build --option sandbox true` and by kiln's runner in the `linux`
// sandbox must give byte-identical outputs. Each builder prints what a
// sandbox decides: its environment, its identity and id mappings
// (/proc/self/status, the inside columns of uid_map/gid_map), the mounts it
// sees (device, mount point, type), host and domain name, /etc, the root's
// and /dev's entries, and what of the store it sees.
//
// Deliberate differences, not printed: mount options (kiln mounts inputs
// and extra paths read-only, nosuid, nodev), the host side of the id maps
// (kiln maps a build user from its pool, Nix as root without build users
// maps root), owners seen from inside (Nix shows its mapped root as
// nixbld), the capability bounding set (kiln empties it) and Nix's seccomp
// filter (kiln has none; outputs are registered from NARs, which carry no
// setuid bits).
#include <gtest/gtest.h>
#include <unistd.h>

#include "kiln/common/file.h"
#include "kiln/store/derivation.h"
#include "kiln/worker/build_runner.h"
#include "test_support.h"

namespace kiln::worker {
namespace {

const char* kExpr = R"nix(
let
  sh = "/bin/sh";
  drv = name: script: derivation {
    inherit name; system = builtins.currentSystem; builder = sh;
    args = ["-c" script];
  };
  p = ''p() { while IFS= read -r l; do echo "$l"; done < "$1"; }; '';
in rec {
  dep = drv "dep" "echo dependency > $out";
  env = drv "env" "export -p > $out";
  identity = drv "identity" (p + ''
    while read k v rest; do
      case $k in Uid:|Gid:|Groups:|CapInh:|CapPrm:|CapEff:|CapAmb:|NoNewPrivs:|NSpid:|NStgid:)
        echo "$k $v";; esac
    done < /proc/self/status > $out
    while read a b c; do echo "uid $a $c"; done < /proc/self/uid_map >> $out
    while read a b c; do echo "gid $a $c"; done < /proc/self/gid_map >> $out
    echo "pid $$" >> $out
  '');
  mounts = drv "mounts" ''
    while read dev dir type rest; do echo "$dev $dir $type"; done < /proc/self/mounts > $out
  '';
  names = drv "names" (p + ''
    { p /proc/sys/kernel/hostname; p /proc/sys/kernel/domainname
      p /etc/passwd; p /etc/group; p /etc/hosts
      echo /*; echo /dev/*; echo /dev/pts/*; echo /tmp/* /build/*
      echo "$(umask) $PWD"; } > $out
  '');
  withdep = drv "withdep" (p + ''
    { echo /nix/store/*; p ${dep}; } > $out
    echo x > /nix/store/not-an-output 2>/dev/null || true
  '');
}
)nix";

class SandboxNix : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix-build")) GTEST_SKIP() << "nix-build missing";
    paths_ = "/bin/sh /lib /usr/lib";
    if (pathExists("/lib64")) paths_ += " /lib64";
    writeFile(root_.path() + "/default.nix", kExpr);
    plugins::PluginRegistry& reg = registry();
    sandbox_ = std::make_unique<PluginSandbox>(
        reg.require(KILN_PLUGIN_SANDBOX, "linux"),
        plugins::PluginConfig{{"extra-paths", paths_}});
    if (auto why = sandbox_->probe(); !why.empty())
      GTEST_SKIP() << "kiln's linux sandbox cannot run here: " << why;
    createDirs(root_.path() + "/build");
  }

  static plugins::PluginRegistry& registry() {
    static plugins::PluginRegistry r;
    r.loadDirectories({test::pluginBuildDir()});
    return r;
  }

  /// A Nix command on the chroot store, sandboxed as root can here.
  test::RunResult nix(std::vector<std::string> argv) {
    argv.insert(argv.begin() + 1, {"--store", store_});
    if (argv[0] == "nix-build")
      for (auto s :
           {"--option", "sandbox", "true", "--option", "build-users-group", "",
            "--option", "substituters", "", "--option", "sandbox-paths",
            paths_.c_str(), "--option", "cores", "1", "--no-out-link"})
        argv.push_back(s);
    return test::run(argv, "", {"NIX_REMOTE="});
  }

  std::string line(const std::string& s) { return s.substr(0, s.find('\n')); }
  std::string physical(const std::string& logical) {
    return physicalStore_ + "/" + baseNameOf(logical);
  }

  /// kiln's output of `attr` (built in the linux sandbox) and Nix's.
  std::pair<std::string, std::string> both(const std::string& attr,
                                           store::StorePathSet closure = {}) {
    auto drvFile = line(nix({"nix-instantiate", file(), "-A", attr}).out);
    EXPECT_FALSE(drvFile.empty());
    store::StoreDir sd("/nix/store");
    BuildRequest req;
    req.drvPath = sd.parsePath(drvFile);
    req.drv = store::readDerivationFile(sd, physical(drvFile));
    req.inputClosure = std::move(closure);
    BuildRunnerConfig cfg;
    cfg.store = {sd, physicalStore_, false};
    cfg.buildDirParent = root_.path() + "/build";
    BuildRunner runner(cfg, *sandbox_, RealClock::instance());
    std::string log;
    auto res = runner.run(req, [&](std::string_view d) { log += d; });
    EXPECT_EQ(res.status, StepStatus::kSuccess)
        << res.errorMsg << log;
    if (res.outputs.empty()) return {};
    std::string kiln = readFile(res.outputs[0].physicalPath);
    deletePath(res.outputs[0].physicalPath);
    auto built = nix({"nix-build", drvFile});
    EXPECT_EQ(built.exitCode, 0) << built.err;
    return {kiln, readFile(physical(line(built.out)))};
  }
  std::string file() { return root_.path() + "/default.nix"; }

  TempDir root_{"sandbox-nix"};
  std::string store_ = root_.path() + "/s";
  std::string physicalStore_ = store_ + "/nix/store";
  std::string paths_;
  std::unique_ptr<PluginSandbox> sandbox_;
};

TEST_F(SandboxNix, SameOutputsAsNixSandbox) {
  auto dep = nix({"nix-build", file(), "-A", "dep"});
  if (dep.exitCode != 0)
    GTEST_SKIP() << "nix-build cannot sandbox here: " << dep.err;
  for (auto attr : {"env", "identity", "mounts", "names"}) {
    auto [kiln, nix] = both(attr);
    EXPECT_EQ(kiln, nix) << attr;
    EXPECT_FALSE(kiln.empty()) << attr;
  }
  store::StoreDir sd("/nix/store");
  auto [kiln, nixOut] = both("withdep", {sd.parsePath(line(dep.out))});
  EXPECT_EQ(kiln, nixOut);
  EXPECT_NE(kiln.find("dependency"), std::string::npos) << kiln;
}

}  // namespace
}  // namespace kiln::worker

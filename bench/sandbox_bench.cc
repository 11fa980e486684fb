// Per-build overhead of kiln's sandboxes against Nix's (issue 10,
// bench/README.md): N trivial derivations (`echo i > $out`, default 500),
// written once by nix-instantiate, built one after another
//   - by kiln's BuildRunner in the `none` sandbox and in the `linux`
//     sandbox (same process, same drvs; outputs removed between rounds),
//   - by `nix-store --realise -j1` with sandbox = false and sandbox = true
//     (outputs deleted between the two),
// alternating ROUNDS times (default 2) in the same run; and, where the
// worker may make control groups, in the `linux` sandbox with limits per
// build (issue 33: a group each, 1G memory, 1024 processes, a 1G build
// directory checked every second). Prints per-build wall times and the
// sandbox's setup cost: kiln linux - kiln none against Nix sandbox - Nix
// no sandbox (goal: kiln's at most half of Nix's).
//
//   sandbox_bench [N] [ROUNDS]      (needs root for Nix's sandbox here)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/derivation.h"
#include "kiln/worker/build_runner.h"
#include "kiln/worker/cgroups.h"
#include "test_support.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Setup {
  std::string dir, storeDir, paths;
  std::vector<std::string> drvs, outs;
};

std::vector<std::string> nixEnv(const Setup& s) {
  return {"NIX_STORE_DIR=" + s.storeDir, "NIX_STATE_DIR=" + s.dir + "/state",
          "NIX_LOG_DIR=" + s.dir + "/log", "NIX_REMOTE="};
}

void instantiate(Setup& s, int n) {
  writeFile(s.dir + "/default.nix",
            "builtins.genList (i: derivation { name = \"t-${toString i}\"; "
            "system = builtins.currentSystem; builder = \"/bin/sh\"; "
            "args = [\"-c\" \"echo ${toString i} > $out\"]; }) " +
                std::to_string(n));
  auto r =
      test::run({"nix-instantiate", s.dir + "/default.nix"}, "", nixEnv(s));
  if (r.exitCode != 0) throw Error("nix-instantiate: " + r.err);
  s.drvs = test::nonEmptyLines(r.out);
  store::StoreDir sd(s.storeDir);
  for (auto& d : s.drvs) {
    auto drv = store::readDerivationFile(sd, d);
    s.outs.push_back(sd.printPath(*drv.outputs.at("out").path));
  }
}

/// Seconds per build of every drv in `sandbox`, each in a control group
/// of `groups` with limits when it is not null.
double kilnRound(const Setup& s, worker::Sandbox& sandbox,
                 std::shared_ptr<worker::Cgroups> groups = nullptr) {
  store::StoreDir sd(s.storeDir);
  worker::BuildRunnerConfig cfg;
  cfg.store = {sd, s.storeDir, false};
  cfg.buildDirParent = s.dir + "/build";
  cfg.impureEnv = {};
  cfg.cgroups = groups;
  worker::BuildRunner runner(cfg, sandbox, RealClock::instance());
  std::vector<worker::BuildRequest> reqs;
  for (auto& d : s.drvs) {
    worker::BuildRequest r;
    r.drvPath = sd.parsePath(d);
    r.drv = store::readDerivationFile(sd, d);
    if (groups) r.limits.resources = {1 << 30, 1024, 0, 1 << 30};
    reqs.push_back(std::move(r));
  }
  double total = 0;
  for (auto& r : reqs) {
    auto t0 = Clock::now();
    auto res = runner.run(r, [](std::string_view) {});
    total += since(t0);
    if (res.status != StepStatus::kSuccess)
      throw Error("kiln " + sandbox.name() + ": " + res.errorMsg);
    deletePath(res.outputs.at(0).physicalPath);
  }
  return total / reqs.size();
}

/// Seconds per build of `nix-store --realise -j1` of every drv.
double nixRound(const Setup& s, bool sandbox) {
  std::vector<std::string> argv = {
      "nix-store", "--realise",         "-j1",
      "--option",  "sandbox",           sandbox ? "true" : "false",
      "--option",  "build-users-group", "",
      "--option",  "substituters",      "",
      "--option",  "sandbox-paths",     s.paths};
  argv.insert(argv.end(), s.drvs.begin(), s.drvs.end());
  auto t0 = Clock::now();
  auto r = test::run(argv, "", nixEnv(s));
  double t = since(t0);
  if (r.exitCode != 0) throw Error("nix-store --realise: " + r.err);
  std::vector<std::string> del = {"nix-store", "--delete"};
  del.insert(del.end(), s.outs.begin(), s.outs.end());
  auto d = test::run(del, "", nixEnv(s));
  if (d.exitCode != 0) throw Error("nix-store --delete: " + d.err);
  return t / s.drvs.size();
}

int run(int n, int rounds) {
  TempDir dir("sandbox-bench");
  Setup s{dir.path(), dir.path() + "/store", "/bin/sh /lib /usr/lib", {}, {}};
  if (pathExists("/lib64")) s.paths += " /lib64";
  createDirs(s.storeDir);
  createDirs(s.dir + "/build");
  instantiate(s, n);
  plugins::PluginRegistry reg;
  reg.loadDirectories({test::pluginBuildDir()});
  worker::PluginSandbox none(reg.require(KILN_PLUGIN_SANDBOX, "none"), {});
  worker::PluginSandbox linux(reg.require(KILN_PLUGIN_SANDBOX, "linux"),
                              {{"extra-paths", s.paths}});
  std::string why;
  auto groups = worker::hostCgroups(false, why);
  if (!groups) std::printf("no limits round: %s\n", why.c_str());
  double kn = 1e9, kl = 1e9, nn = 1e9, ns = 1e9;  // best round of each
  double kg = 1e9;                                // linux with limits
  for (int i = 0; i < rounds; ++i) {
    double a = kilnRound(s, none), b = kilnRound(s, linux);
    double g = groups ? kilnRound(s, linux, groups) : 0;
    double c = nixRound(s, false), d = nixRound(s, true);
    std::printf(
        "round %d: kiln none %.2f ms, kiln linux %.2f ms, kiln linux with "
        "limits %.2f ms, nix no-sandbox %.2f ms, nix sandbox %.2f ms per "
        "build\n",
        i + 1, a * 1e3, b * 1e3, g * 1e3, c * 1e3, d * 1e3);
    kn = std::min(kn, a), kl = std::min(kl, b), nn = std::min(nn, c),
    ns = std::min(ns, d), kg = std::min(kg, g);
  }
  if (groups)
    std::printf(
        "  with limits (%s): kiln linux %.2f ms, sandbox setup %.2f ms, "
        "ratio kiln/nix %.2f\n",
        groups->describe().c_str(), kg * 1e3, (kg - kn) * 1e3,
        (kg - kn) / (ns - nn));
  double kOver = kl - kn, nOver = ns - nn;
  std::printf(
      "best of %d rounds, %d builds each (ms per build):\n"
      "  kiln none %.2f | kiln linux %.2f | nix sandbox=false %.2f | nix "
      "sandbox=true %.2f\n"
      "  sandbox setup: kiln %.2f ms, nix %.2f ms, ratio kiln/nix %.2f "
      "(goal <= 0.5)\n"
      "  whole build in a sandbox: kiln/nix %.2f\n",
      rounds, n, kn * 1e3, kl * 1e3, nn * 1e3, ns * 1e3, kOver * 1e3,
      nOver * 1e3, kOver / nOver, kl / ns);
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  try {
    return kiln::bench::run(argc > 1 ? std::atoi(argv[1]) : 500,
                            argc > 2 ? std::atoi(argv[2]) : 2);
  } catch (const std::exception& e) {
    std::cerr << "sandbox_bench: " << e.what() << "\n";
    return 1;
  }
}

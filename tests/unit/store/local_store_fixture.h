#pragma once
// Shared helpers for the LocalStore tests.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/store/derivation.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"
#include "test_support.h"

namespace kiln::store::testing {

/// A temporary state directory with helpers to build NARs and trees.
class LocalStoreTest : public ::testing::Test {
 protected:
  TempDir dir_{"kiln-ls"};
  std::string state_ = dir_.path() + "/state";

  /// The NAR of a regular file holding `contents`.
  static std::string narOf(std::string_view contents) {
    StringSink s;
    dumpString(contents, s);
    return s.s;
  }
  /// The `.drv` text of a derivation `name` with input sources `srcs` and
  /// input derivations `drvs` (their "out"), its outputs filled in (inputs
  /// are read from `physicalRoot`).
  static std::string drvText(const StoreDir& sd, const std::string& name,
                             const StorePathSet& srcs = {},
                             const StorePathSet& drvs = {},
                             const std::string& physicalRoot = "") {
    Derivation d;
    d.name = name;
    d.outputs["out"] = {};
    d.inputSrcs = srcs;
    for (auto& p : drvs) d.inputDrvs[p] = {"out"};
    d.platform = "x86_64-linux";
    d.builder = "/bin/sh";
    d.env = {{"name", name}, {"out", ""}};
    DrvHashCache cache(sd, fileDrvLoader(sd, physicalRoot));
    fillOutputPaths(d, cache);
    return printDerivation(sd, d);
  }
  /// Info for a NAR of `contents` registered at a made-up path.
  static ValidPathInfo infoFor(const StorePath& path, const std::string& nar) {
    ValidPathInfo info(path);
    info.narHash = hashString(HashAlgo::kSha256, nar);
    info.narSize = nar.size();
    return info;
  }
  /// Names in the physical root (store objects and temporaries).
  static std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(dir))
      out.push_back(e.path().filename().string());
    return out;
  }
  /// Recreates the spec's source inputs (vectors/src/make-inputs.sh) and
  /// returns the folder holding them (hello.txt, tool.sh, dir/).
  std::string makeInputs() {
    std::string d = dir_.path() + "/inputs";
    createDirs(d);
    writeFile(d + "/make-inputs.sh",
              readFile(test::vectorPath("src/make-inputs.sh")));
    auto r = test::run({"sh", d + "/make-inputs.sh"});
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return d + "/in";
  }
};

/// Runs `fn` in a forked child; returns its exit code (fn's result), or
/// 128+signal.
inline pid_t forkChild(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
    }
    ::_exit(rc);
  }
  return pid;
}

/// Waits for a child started by forkChild.
inline int waitChild(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Runs `adders` forked processes (`adder(i)` gives each one's exit code)
/// while another forked process collects garbage in `state` until they
/// have finished (and at least three times); expects every exit code 0.
/// `stopFile` (created here) tells the collector to stop.
inline void runAddersAgainstCollector(const std::string& state, const std::string& stopFile,
                                      int adders, const std::function<int(int)>& adder) {
  { LocalStore init(state); }  // create the database once, up front
  pid_t gc = forkChild([&] {
    LocalStore store(state);
    for (int runs = 0; !pathExists(stopFile) || runs < 3; ++runs) store.collectGarbage();
    return 0;
  });
  std::vector<pid_t> pids;
  for (int i = 0; i < adders; ++i) pids.push_back(forkChild([&, i] { return adder(i); }));
  for (auto pid : pids) EXPECT_EQ(waitChild(pid), 0);
  writeFile(stopFile, "");
  EXPECT_EQ(waitChild(gc), 0);
}

}  // namespace kiln::store::testing

#pragma once
// A fixture for sandboxed builds: a physical store in a temporary folder
// mapped at the logical /nix/store (so the mapping is exercised), the
// `linux` sandbox plugin from the build tree with /bin/sh, the C library
// and the escape probe as extra paths, and helpers to make derivations
// and inputs. Skips when the host cannot run the sandbox (probe).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/worker/build_runner.h"
#include "kiln/worker/platform.h"
#include "kiln/worker/sandbox.h"

namespace kiln::worker::sbtest {

/// The extra paths every sandbox test needs: the shell, libc, the probe.
std::string sandboxTestPaths();

/// Loads sandbox `name` from the build tree's plugin folder.
std::unique_ptr<PluginSandbox> loadTestSandbox(
    const std::string& name, plugins::PluginConfig config = {});

/// Loads platforms `names` from the build tree's plugin folder.
std::shared_ptr<Platforms> loadTestPlatforms(
    const std::vector<std::string>& names);

/// A derivation named `name` in `store` running `/bin/sh -c script`, with
/// `outputs` (their paths and `$outputs` as Nix sets them); `hashSeed`
/// makes its paths unique (e.g. per test folder). Limits: 30 s silent,
/// 60 s in all.
BuildRequest shellRequest(const store::StoreDir& store, const std::string& name,
                          const std::string& script,
                          const std::string& hashSeed = "",
                          const std::vector<std::string>& outputs = {"out"});

class SandboxTest : public ::testing::Test {
 protected:
  SandboxTest();
  void SetUp() override;

  /// A derivation running `/bin/sh -c script` with output `out`.
  BuildRequest request(const std::string& name, const std::string& script);
  /// Makes `r` a flat sha256 fixed-output derivation of `contents`.
  void makeFixed(BuildRequest& r, const std::string& contents);
  /// A store path holding one file; added to the closure of later builds
  /// when `inClosure`.
  store::StorePath addInput(const std::string& name,
                            const std::string& contents);
  /// Builds `r` in `sandbox_` (log in log_).
  BuildResult build(const BuildRequest& r);
  /// Where store path `p` lives on the host.
  std::string physical(const store::StorePath& p) const;
  /// The logical path of `p` (what builders see).
  std::string logical(const store::StorePath& p) const;

  TempDir root_{"sandbox-test"};
  store::StoreDir logical_{"/nix/store"};
  std::string physicalDir_;
  std::unique_ptr<PluginSandbox> sandbox_;
  std::shared_ptr<const Platforms> platforms_;  ///< null: none (build())
  std::shared_ptr<Cgroups> cgroups_;  ///< the builds' groups; null: none
  std::string log_;
};

}  // namespace kiln::worker::sbtest

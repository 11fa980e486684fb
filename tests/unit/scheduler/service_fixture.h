#pragma once
// Helpers for the scheduler service tests: derivations written into a
// central store (as nix-instantiate would), outputs made valid, and a
// service on an ephemeral loopback port.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/service.h"
#include "kiln/store/derivation.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"

namespace kiln::scheduler::testing {

/// Writes a derivation named `name` depending on the `out` output of each
/// of `deps` (full .drv paths) into `store`; returns its full .drv path.
/// `out` declares its output (e.g. a fixed output's hashAlgo and hash).
inline std::string makeDrv(store::LocalStore& store, const std::string& name,
                           const std::vector<std::string>& deps = {},
                           const std::string& system = "x86_64-linux",
                           const std::map<std::string, std::string>& env = {},
                           const store::DerivationOutput& out = {}) {
  const auto& sd = store.storeDir();
  store::Derivation d;
  d.name = name;
  d.outputs["out"] = out;
  for (auto& dep : deps) d.inputDrvs[store.parsePath(dep)] = {"out"};
  d.platform = system;
  d.builder = "/bin/sh";
  d.args = {"-c", "echo " + name + " > $out"};
  d.env = {
      {"name", name}, {"system", system}, {"builder", "/bin/sh"}, {"out", ""}};
  for (auto& [k, v] : env) d.env[k] = v;
  store::DrvHashCache cache(sd, store::fileDrvLoader(sd, store.physicalRoot()));
  store::fillOutputPaths(d, cache);
  store::StorePathSet refs = d.inputSrcs;
  for (auto& [p, o] : d.inputDrvs) refs.insert(p);
  auto path = store.addText(name + ".drv", store::printDerivation(sd, d), refs);
  return store.printPath(path);
}

/// The output path of a derivation made by makeDrv.
inline store::StorePath outPath(store::LocalStore& store,
                                const std::string& drvPath) {
  auto d = store::readDerivationFile(
      store.storeDir(), store.physicalPath(store.parsePath(drvPath)));
  return *d.outputs.at("out").path;
}

/// The NAR a builder would produce for `drvPath`'s output (a file).
inline std::string outputNar(const std::string& contents) {
  StringSink s;
  store::dumpString(contents, s);
  return s.s;
}

/// Registers the output of `drvPath` as if it had been built.
inline void makeOutputValid(store::LocalStore& store,
                            const std::string& drvPath) {
  std::string nar = outputNar("built\n");
  store::ValidPathInfo info(outPath(store, drvPath));
  info.narHash = hashString(HashAlgo::kSha256, nar);
  info.narSize = nar.size();
  StringSource src(nar);
  store.addFromNar(info, src);
}

/// A service configuration on an ephemeral loopback port, plain text.
/// Creates project "p" and its jobset "j" of location /nowhere, checked
/// on demand only, with the fields of `extra` besides; returns the
/// jobset's API answer.
inline nlohmann::json createJobset(
    SchedulerService& svc, nlohmann::json extra = nlohmann::json::object()) {
  svc.applyRequest("project-create", {{"name", "p"}});
  nlohmann::json args = {{"project", "p"},
                         {"name", "j"},
                         {"location", "/nowhere"},
                         {"checkInterval", 0}};
  args.update(extra);
  return svc.applyRequest("jobset-create", args);
}

inline ServiceConfig testConfig(const std::string& stateDir) {
  ServiceConfig c;
  c.stateDir = stateDir;
  c.listen = "tcp://127.0.0.1:*";
  c.insecurePlaintext = true;
  c.heartbeatInterval = std::chrono::milliseconds(200);
  c.core.retryBackoffBase = std::chrono::milliseconds(1);
  c.core.retryBackoffMax = std::chrono::milliseconds(1);
  return c;
}

/// An evaluation that always gives `jobs`, as evaluating a collection
/// would.
class FixedRunner final : public EvalRunner {
 public:
  explicit FixedRunner(std::vector<Job> jobs) : jobs_(std::move(jobs)) {}
  std::vector<Job> evaluate(const JobsetSpec&, const Checkout&,
                            const EvalStore&) override {
    return jobs_;
  }

 private:
  std::vector<Job> jobs_;
};

/// A checkout that is always the same.
class FixedFetcher final : public InputFetcher {
 public:
  Checkout fetch(const JobsetSpec&, const std::string&) override {
    return {"/nowhere", "sha256:fixed", ""};
  }
};

}  // namespace kiln::scheduler::testing

#include "sandbox_fixture.h"

#include <unistd.h>

#include "kiln/common/hash.h"
#include "test_support.h"

namespace kiln::worker::sbtest {

std::string sandboxTestPaths() {
  // Built by the kiln_sandbox_probe target (tests/unit/worker).
  return "/bin/sh /lib /lib64? /usr/lib /probe=" + test::binaryDir() +
         "/tests/unit/worker/kiln_sandbox_probe";
}

namespace {

plugins::PluginRegistry& buildTreePlugins() {
  static plugins::PluginRegistry registry;
  registry.loadDirectories({test::pluginBuildDir()});
  return registry;
}

}  // namespace

std::unique_ptr<PluginSandbox> loadTestSandbox(const std::string& name,
                                               plugins::PluginConfig config) {
  auto& p = buildTreePlugins().require(KILN_PLUGIN_SANDBOX, name);
  return std::make_unique<PluginSandbox>(p, std::move(config));
}

std::shared_ptr<Platforms> loadTestPlatforms(
    const std::vector<std::string>& names) {
  auto out = std::make_shared<Platforms>();
  for (auto& n : names)
    out->add(std::make_unique<PluginPlatform>(
        buildTreePlugins().require(KILN_PLUGIN_PLATFORM, n),
        plugins::PluginConfig{}));
  return out;
}

SandboxTest::SandboxTest() : physicalDir_(root_.path() + "/store") {
  createDirs(physicalDir_);
  createDirs(root_.path() + "/build");
}

void SandboxTest::SetUp() {
  sandbox_ = loadTestSandbox("linux", {{"extra-paths", sandboxTestPaths()}});
  if (auto why = sandbox_->probe(); !why.empty())
    GTEST_SKIP() << "the linux sandbox cannot run here: " << why;
}

BuildRequest shellRequest(const store::StoreDir& store, const std::string& name,
                          const std::string& script,
                          const std::string& hashSeed,
                          const std::vector<std::string>& outputs) {
  BuildRequest r;
  auto& d = r.drv;
  d.name = name;
  d.platform = "x86_64-linux";
  d.builder = "/bin/sh";
  d.args = {"-c", script};
  d.env = {{"builder", "/bin/sh"}, {"name", name}, {"system", "x86_64-linux"}};
  auto drvHash = hashString(HashAlgo::kSha256, name + hashSeed);
  for (auto& o : outputs) {
    auto path = store.makeOutputPath(o, drvHash, name);
    d.outputs[o].path = path;
    d.env[o] = store.printPath(path);
  }
  if (outputs.size() > 1) {
    std::string all;
    for (auto& o : outputs) all += (all.empty() ? "" : " ") + o;
    d.env["outputs"] = all;
  }
  r.drvPath = store.makeTextPath(name + ".drv", drvHash, {});
  r.limits.maxSilent = std::chrono::seconds(30);
  r.limits.timeout = std::chrono::seconds(60);
  return r;
}

BuildRequest SandboxTest::request(const std::string& name,
                                  const std::string& script) {
  return shellRequest(logical_, name, script, root_.path());
}

void SandboxTest::makeFixed(BuildRequest& r, const std::string& contents) {
  auto h = hashString(HashAlgo::kSha256, contents);
  auto out = logical_.makeFixedOutputPath(r.drv.name, false, h);
  r.drv.outputs["out"] = {out, "sha256", h.toHex()};
  r.drv.env["out"] = logical_.printPath(out);
}

store::StorePath SandboxTest::addInput(const std::string& name,
                                       const std::string& contents) {
  auto p =
      logical_.makeTextPath(name, hashString(HashAlgo::kSha256, contents), {});
  writeFile(physical(p), contents);
  ::chmod(physical(p).c_str(), 0444);
  return p;
}

BuildResult SandboxTest::build(const BuildRequest& r) {
  BuildRunnerConfig c;
  c.store = {logical_, physicalDir_, false};
  c.buildDirParent = root_.path() + "/build";
  c.impureEnv = {};
  c.platforms = platforms_;
  c.cgroups = cgroups_;
  BuildRunner runner(c, *sandbox_, RealClock::instance());
  log_.clear();
  return runner.run(r, [&](std::string_view chunk) { log_ += chunk; });
}

std::string SandboxTest::physical(const store::StorePath& p) const {
  return physicalDir_ + "/" + p.baseName();
}

std::string SandboxTest::logical(const store::StorePath& p) const {
  return logical_.printPath(p);
}

}  // namespace kiln::worker::sbtest

// A sandbox plugin for the loader's tests, written with the C++ helper.
// Compiled several times: TEST_PLUGIN_NAME names it, and defining
// KILN_PLUGIN_ABI_MINOR=0 builds it against the previous minor ABI (a
// smaller function table, without `probe`). It starts nothing.
#include "kiln/plugin/plugin.hpp"

namespace {

class FakeSandbox {
 public:
  struct Build {};
  static constexpr uint32_t kCapabilities = 0;
  explicit FakeSandbox(kiln::plugin::Host host) : host_(host) {
    if (host_.config("fail-create"))
      throw kiln::plugin::Failure(KILN_ERR_UNSUPPORTED, "told to fail");
    host_.log(KILN_LOG_INFO, "created");
    host_.metricAdd("created_total", 1);
  }
  std::string buildDir(const std::string& hostBuildDir) {
    return host_.config("build-dir").value_or(hostBuildDir);
  }
  std::unique_ptr<Build> start(const kiln_sandbox_spec&,
                               kiln_sandbox_process&) {
    throw kiln::plugin::Failure::sys("executing 'nothing'", 2);
  }
  void finish(std::unique_ptr<Build>) {}
  void probe() {
    throw kiln::plugin::Failure(KILN_ERR_UNSUPPORTED, "probe says no");
  }

 private:
  kiln::plugin::Host host_;
};

}  // namespace

KILN_SANDBOX_PLUGIN(FakeSandbox, TEST_PLUGIN_NAME, "0.0.1",
                    "a sandbox that starts nothing (tests)")

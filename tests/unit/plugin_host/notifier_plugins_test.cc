// The in-tree notifier plugins through the C ABI: `command` runs its
// command with the event on stdin and fails on a non-zero exit; `webhook`
// validates its URL (https: webhook_tls_test.cc); a notifier of an older minor has no deliver function.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"
#include "test_support.h"

namespace kiln::plugins {
namespace {

using ::testing::HasSubstr;

const kiln_notifier_functions& notifier(PluginRegistry& r,
                                        const std::string& name) {
  auto* p = r.loadFile(test::pluginBuildDir() + "/kiln-plugin-" +
                       name + ".so");
  if (!p) throw Error("cannot load notifier " + name);
  EXPECT_EQ(p->kind, KILN_PLUGIN_NOTIFIER);
  EXPECT_GE(p->functionsSize, KILN_NOTIFIER_DELIVER_MIN_SIZE);
  return *static_cast<const kiln_notifier_functions*>(p->functions);
}

// An instance of `f` configured with `config`; the error text if create
// failed.
struct Instance {
  Instance(const kiln_notifier_functions& f, PluginConfig config)
      : f_(f), host_(KILN_PLUGIN_NOTIFIER, "test", std::move(config)) {
    if (f_.create(host_.table(), &i_, &err) != KILN_OK) i_ = nullptr;
  }
  ~Instance() {
    if (i_) f_.destroy(i_);
  }
  // The error of delivering `body`, "" on success.
  std::string deliver(const std::string& body) {
    kiln_error e{};
    if (f_.deliver(i_, "build.finished", body.c_str(), body.size(), &e) ==
        KILN_OK)
      return "";
    return e.message;
  }
  const kiln_notifier_functions& f_;
  HostServices host_;
  void* i_ = nullptr;
  kiln_error err{};
};

TEST(NotifierPlugins, CommandGetsTheEventOnStdinAndFailsOnNonZeroExit) {
  PluginRegistry r;
  auto& f = notifier(r, "command");
  TempDir d("kiln-notify-cmd");
  std::string out = d.path() + "/got";
  Instance ok(f,
              {{"command", "cat > " + out + "; echo $KILN_EVENT >> " + out}});
  ASSERT_TRUE(ok.i_) << ok.err.message;
  EXPECT_EQ(ok.deliver("{\"id\":\"x\"}"), "");
  EXPECT_EQ(readFile(out), "{\"id\":\"x\"}build.finished\n");
  Instance failing(f, {{"command", "exit 3"}});
  EXPECT_THAT(failing.deliver("{}"), HasSubstr("exited with 3"));
  Instance slow(f, {{"command", "exec sleep 30"}, {"timeout-ms", "100"}});
  EXPECT_THAT(slow.deliver("{}"), HasSubstr("signal 9"));
  Instance none(f, {});
  EXPECT_FALSE(none.i_);
  EXPECT_THAT(none.err.message, HasSubstr("needs a command"));
}

TEST(NotifierPlugins, WebhookRefusesWhatIsNotAnHttpUrl) {
  PluginRegistry r;
  auto& f = notifier(r, "webhook");
  for (auto url : {"ftp://x", "http://", "https://", ""}) {
    Instance bad(f, {{"url", url}});
    EXPECT_FALSE(bad.i_) << url;
    EXPECT_THAT(bad.err.message, HasSubstr("http(s)://HOST")) << url;
  }
  Instance noSecret(f, {{"url", "http://127.0.0.1:1/x"},
                        {"secret-file", "/nonexistent/secret"}});
  EXPECT_FALSE(noSecret.i_);
  EXPECT_THAT(noSecret.err.message, HasSubstr("/nonexistent/secret"));
  // Nothing listens on port 1: a failure to retry, not a crash.
  Instance unreachable(f, {{"url", "http://127.0.0.1:1/x"}});
  ASSERT_TRUE(unreachable.i_) << unreachable.err.message;
  EXPECT_THAT(unreachable.deliver("{}"), HasSubstr("127.0.0.1:1/x"));
}

TEST(NotifierPlugins, ANotifierOfAnOlderMinorLoadsWithoutDeliver) {
  PluginRegistry r;
  r.loadDirectories({test::testPluginDir() + "/good"});
  auto* p = r.find(KILN_PLUGIN_NOTIFIER, "test-notifier");
  ASSERT_TRUE(p);
  EXPECT_LT(p->functionsSize, KILN_NOTIFIER_DELIVER_MIN_SIZE);
}

}  // namespace
}  // namespace kiln::plugins

// The plugin loader: what it accepts (all four kinds, a plugin built
// against the previous minor ABI) and what it refuses, naming the file and
// the reason (another ABI major, an unknown kind, a missing required
// function, a duplicate name, a library without the entry point).
#include "kiln/plugin_host/registry.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "kiln/common/file.h"
#include "kiln/plugin_host/host_services.h"
#include "test_support.h"

namespace kiln::plugins {
namespace {

using ::testing::HasSubstr;

std::string dir(const std::string& c) {
  return test::testPluginDir() + "/" + c;
}
std::string lib(const std::string& c, const std::string& name) {
  return dir(c) + "/kiln-plugin-" + name + ".so";
}

/// Loads one folder and returns its only refusal's reason (checking it
/// names the file).
std::string refusedReason(const std::string& c, const std::string& name) {
  PluginRegistry r;
  r.loadDirectories({dir(c)});
  EXPECT_TRUE(r.plugins().empty());
  auto refused = r.refusals();
  if (refused.size() != 1) {
    ADD_FAILURE() << "expected one refusal in " << c;
    return "";
  }
  EXPECT_EQ(refused[0].file, lib(c, name));
  return refused[0].reason;
}

/// The function table of the `test-current` sandbox loaded into `r`, or
/// nullptr if it was refused.
const kiln_sandbox_functions* currentSandbox(PluginRegistry& r) {
  auto* p = r.loadFile(lib("good", "test-current"));
  return p ? static_cast<const kiln_sandbox_functions*>(p->functions) : nullptr;
}

TEST(PluginRegistry, LoadsEveryGoodPluginWithItsFacts) {
  PluginRegistry r;
  r.loadDirectories({dir("good"), dir("does-not-exist")});
  EXPECT_TRUE(r.refusals().empty());
  auto* cur = r.find(KILN_PLUGIN_SANDBOX, "test-current");
  ASSERT_NE(cur, nullptr);
  EXPECT_EQ(cur->file, lib("good", "test-current"));
  EXPECT_EQ(cur->version, "0.0.1");
  EXPECT_EQ(cur->abiMajor, unsigned(KILN_PLUGIN_ABI_MAJOR));
  EXPECT_EQ(cur->abiMinor, unsigned(KILN_PLUGIN_ABI_MINOR_LATEST));
  EXPECT_EQ(cur->functionsSize, sizeof(kiln_sandbox_functions));
  auto* notifier = r.find(KILN_PLUGIN_NOTIFIER, "test-notifier");
  ASSERT_NE(notifier, nullptr);
  auto* evaluator = r.find(KILN_PLUGIN_EVALUATOR, "test-evaluator");
  ASSERT_NE(evaluator, nullptr);
  EXPECT_EQ(evaluator->functionsSize, sizeof(kiln_evaluator_functions));
  EXPECT_EQ(r.plugins().size(), 5u);
}

TEST(PluginRegistry, PluginOfThePreviousMinorLoadsWithItsSmallerTable) {
  PluginRegistry r;
  auto* p = r.loadFile(lib("good", "test-minor0"));
  ASSERT_NE(p, nullptr) << r.refusals().at(0).reason;
  EXPECT_EQ(p->abiMinor, 0u);
  EXPECT_EQ(p->functionsSize, KILN_SANDBOX_FUNCTIONS_MIN_SIZE);
  EXPECT_LT(p->functionsSize, sizeof(kiln_sandbox_functions));
  // Its functions work through the current header's table (the host reads
  // only what the size covers).
  auto* fns = static_cast<const kiln_sandbox_functions*>(p->functions);
  HostServices host(KILN_PLUGIN_SANDBOX, "test-minor0",
                    {{"build-dir", "/build"}});
  void* inst = nullptr;
  kiln_error err{};
  ASSERT_EQ(fns->create(host.table(), &inst, &err), KILN_OK) << err.message;
  char buf[64];
  ASSERT_EQ(fns->build_dir(inst, "/tmp/x", buf, sizeof buf, &err), KILN_OK);
  EXPECT_STREQ(buf, "/build");
  fns->destroy(inst);
  EXPECT_EQ(pluginCounter("sandbox", "test-minor0", "created_total"), 1.0);
}

// An evaluator built against minor 3, before evaluators had `evaluate`:
// it loads with the common table only, and creating it still works.
TEST(PluginRegistry, EvaluatorOfThePreviousMinorLoadsWithoutEvaluate) {
  PluginRegistry r;
  auto* p = r.loadFile(lib("good", "test-evaluator-minor3"));
  ASSERT_NE(p, nullptr) << r.refusals().at(0).reason;
  EXPECT_EQ(p->kind, KILN_PLUGIN_EVALUATOR);
  EXPECT_EQ(p->abiMinor, 3u);
  EXPECT_EQ(p->functionsSize, sizeof(kiln_generic_functions));
  EXPECT_LT(p->functionsSize, KILN_EVALUATOR_EVALUATE_MIN_SIZE);
  auto* fns = static_cast<const kiln_evaluator_functions*>(p->functions);
  HostServices host(KILN_PLUGIN_EVALUATOR, "test-evaluator-minor3", {});
  void* inst = nullptr;
  kiln_error err{};
  ASSERT_EQ(fns->create(host.table(), &inst, &err), KILN_OK) << err.message;
  fns->destroy(inst);
  EXPECT_EQ(pluginCounter("evaluator", "test-evaluator-minor3", "created"),
            1.0);
}

// A current evaluator reports its lines through the sink; a failure is a
// status and a message, not an exception, and so is the host's refusal.
TEST(PluginRegistry, EvaluatorTalksThroughTheSinkWithCodes) {
  PluginRegistry r;
  auto* p = r.loadFile(lib("good", "test-evaluator"));
  ASSERT_NE(p, nullptr);
  auto* fns = static_cast<const kiln_evaluator_functions*>(p->functions);
  struct Seen {
    std::vector<std::string> lines;
    bool refuse = false;
  } seen;
  kiln_eval_sink sink{
      sizeof sink, &seen,
      [](void* ctx, const char* line, size_t len, kiln_error* e) {
        auto* s = static_cast<Seen*>(ctx);
        if (s->refuse) {
          e->code = KILN_ERR_INVALID;
          std::snprintf(e->message, sizeof e->message, "host says no");
          return kiln_status{KILN_ERR_INVALID};
        }
        s->lines.emplace_back(line, len);
        return kiln_status{KILN_OK};
      },
      [](void*, const char*, const char* const*, kiln_error*) {
        return kiln_status{KILN_OK};
      }};
  const char* none[] = {nullptr};
  kiln_eval_request req{sizeof req, "js", "/c", "/c/default.nix", "",
                        none,       none, "/s", "/nix/store",     "/w"};
  for (auto [config, want] : std::vector<std::pair<PluginConfig, kiln_status>>{
           {{{"lines", "{\"attr\":\"a\"}\nb"}}, KILN_OK},
           {{{"fail", "no collection"}}, KILN_ERR_FAILED}}) {
    HostServices host(KILN_PLUGIN_EVALUATOR, "t", config);
    void* inst = nullptr;
    kiln_error err{};
    ASSERT_EQ(fns->create(host.table(), &inst, &err), KILN_OK);
    EXPECT_EQ(fns->evaluate(inst, &req, &sink, &err), want);
    if (want != KILN_OK) {
      EXPECT_STREQ(err.message, "no collection (jobset js)");
    }
    seen.refuse = true;
    if (want == KILN_OK) {
      EXPECT_EQ(fns->evaluate(inst, &req, &sink, &err), KILN_ERR_INVALID);
      EXPECT_STREQ(err.message, "host says no");
    }
    seen.refuse = false;
    fns->destroy(inst);
  }
  EXPECT_EQ(seen.lines, (std::vector<std::string>{"{\"attr\":\"a\"}", "b"}));
}

TEST(PluginRegistry, ExceptionsBecomeErrorCodesAtTheBoundary) {
  PluginRegistry r;
  auto* fns = currentSandbox(r);
  ASSERT_NE(fns, nullptr);
  HostServices failing(KILN_PLUGIN_SANDBOX, "x", {{"fail-create", ""}});
  void* inst = nullptr;
  kiln_error err{};
  EXPECT_EQ(fns->create(failing.table(), &inst, &err), KILN_ERR_UNSUPPORTED);
  EXPECT_STREQ(err.message, "told to fail");
  HostServices host(KILN_PLUGIN_SANDBOX, "x", {});
  ASSERT_EQ(fns->create(host.table(), &inst, &err), KILN_OK);
  kiln_sandbox_spec spec{};
  kiln_sandbox_process proc{};
  void* build = nullptr;
  EXPECT_EQ(fns->start(inst, &spec, &build, &proc, &err), KILN_ERR_SYSTEM);
  EXPECT_EQ(err.sys_errno, 2);
  EXPECT_THAT(err.message, HasSubstr("executing 'nothing'"));
  EXPECT_EQ(fns->probe(inst, &err), KILN_ERR_UNSUPPORTED);
  fns->destroy(inst);
}

// The host's services as a plugin sees them: its configuration looked up
// by key, and what it logs in kiln's log, labelled with kind and name.
TEST(PluginRegistry, HostServicesGiveConfigurationAndLogWithTheLabel) {
  PluginRegistry r;
  auto* fns = currentSandbox(r);
  ASSERT_NE(fns, nullptr);
  HostServices host(KILN_PLUGIN_SANDBOX, "chatty", {{"build-dir", "/b"}});
  void* inst = nullptr;
  kiln_error err{};
  testing::internal::CaptureStderr();
  auto created = fns->create(host.table(), &inst, &err);
  std::string logged = testing::internal::GetCapturedStderr();
  ASSERT_EQ(created, KILN_OK) << err.message;
  EXPECT_THAT(logged, HasSubstr("kiln: info: sandbox chatty: created\n"));
  char buf[64];
  ASSERT_EQ(fns->build_dir(inst, "/tmp/x", buf, sizeof buf, &err), KILN_OK);
  EXPECT_STREQ(buf, "/b");
  fns->destroy(inst);
}

// Loaded libraries stay mapped for the life of the process, refused ones
// and those of a registry that is gone included.
TEST(PluginRegistry, NeverUnloadsALibrary) {
  {
    PluginRegistry r;
    ASSERT_NE(r.loadFile(lib("good", "test-current")), nullptr);
    r.loadDirectories({dir("major")});
    ASSERT_EQ(r.refusals().size(), 1u);
  }
  for (auto file : {lib("good", "test-current"), lib("major", "test-major")}) {
    void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
    EXPECT_NE(h, nullptr) << file << " was unloaded";
    if (h) ::dlclose(h);  // drops only the reference dlopen just took
  }
}

TEST(PluginRegistry, RefusesAnotherAbiMajor) {
  EXPECT_THAT(refusedReason("major", "test-major"),
              HasSubstr("built for plugin ABI 2."));
}

TEST(PluginRegistry, RefusesAnUnknownKind) {
  EXPECT_THAT(refusedReason("kind", "test-kind"),
              HasSubstr("unknown plugin kind 99"));
}

TEST(PluginRegistry, RefusesAMissingRequiredFunction) {
  EXPECT_THAT(refusedReason("missing", "test-nostart"),
              HasSubstr("missing required sandbox function start (null)"));
  EXPECT_THAT(refusedReason("short", "test-short"),
              HasSubstr("missing required sandbox function start (the table"));
}

TEST(PluginRegistry, RefusesALibraryWithoutTheEntryPoint) {
  EXPECT_THAT(refusedReason("notplugin", "test-none"),
              HasSubstr("no kiln_plugin_entry symbol"));
}

TEST(PluginRegistry, RefusesADuplicateNameNamingTheFirstFile) {
  PluginRegistry r;
  r.loadDirectories({dir("dup")});
  ASSERT_EQ(r.plugins().size(), 1u);
  EXPECT_EQ(r.plugins()[0].file, lib("dup", "test-dup-a"));
  ASSERT_EQ(r.refusals().size(), 1u);
  EXPECT_EQ(r.refusals()[0].file, lib("dup", "test-dup-b"));
  EXPECT_THAT(r.refusals()[0].reason,
              HasSubstr("duplicate sandbox plugin 'dup': already loaded from " +
                        lib("dup", "test-dup-a")));
}

TEST(PluginRegistry, LoadingAFileTwiceGivesTheSamePlugin) {
  PluginRegistry r;
  auto* a = r.loadFile(lib("good", "test-current"));
  auto* b = r.loadFile(dir("good") + "/../good/kiln-plugin-test-current.so");
  EXPECT_EQ(a, b);
  EXPECT_TRUE(r.refusals().empty());
}

TEST(PluginRegistry, RequireNamesWhatExists) {
  PluginRegistry r;
  r.loadDirectories({dir("good")});
  try {
    r.require(KILN_PLUGIN_SANDBOX, "nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no sandbox plugin named 'nope'"));
    EXPECT_THAT(e.what(), HasSubstr("test-current"));
  }
}

// Where kiln looks by default, from the folder of its executable: an
// installed tree wherever it was moved, else the build tree's layout.
TEST(PluginDirsBeside, FindsTheInstalledFolderWhereverThePrefixIs) {
  TempDir prefix("kiln-prefix");
  createDirs(prefix.path() + "/bin");
  createDirs(prefix.path() + "/lib/kiln/plugins");
  createDirs(prefix.path() + "/plugins/lib");  // the installed layout wins
  EXPECT_EQ(pluginDirsBeside(prefix.path() + "/bin"),
            std::vector<std::string>{prefix.path() + "/lib/kiln/plugins"});
}

TEST(PluginDirsBeside, FindsTheBuildTreeFolderBesideCli) {
  TempDir build("kiln-build");
  createDirs(build.path() + "/cli");
  createDirs(build.path() + "/plugins/lib");
  EXPECT_EQ(pluginDirsBeside(build.path() + "/cli"),
            std::vector<std::string>{build.path() + "/plugins/lib"});
}

TEST(PluginDirsBeside, OtherProgramsGetTheConfiguredFolders) {
  TempDir elsewhere("kiln-elsewhere");
  auto dirs = pluginDirsBeside(elsewhere.path());
  ASSERT_FALSE(dirs.empty());
  EXPECT_THAT(dirs.back(), testing::EndsWith("/lib/kiln/plugins"));
  for (auto& d : dirs)
    EXPECT_THAT(d, testing::Not(HasSubstr(elsewhere.path())));
}

TEST(PluginRegistry, KindNames) {
  EXPECT_EQ(kindName(KILN_PLUGIN_EVALUATOR), "evaluator");
  EXPECT_EQ(parseKind("platform"), KILN_PLUGIN_PLATFORM);
  EXPECT_EQ(parseKind("bogus"), std::nullopt);
}

}  // namespace
}  // namespace kiln::plugins

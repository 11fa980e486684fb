#include "kiln/worker/build_env.h"

#include <gtest/gtest.h>

#include "kiln/common/error.h"

namespace kiln::worker {
namespace {

using Env = std::map<std::string, std::string>;

const store::StoreDir kStore("/nix/store");
const std::string kOut = "/nix/store/n6j4hfgmpg431aimzs3q9qrxr4raibkq-envtest";
const std::string kDev =
    "/nix/store/hxga0mj360p2p6657a3h24bl2kllk12a-envtest-dev";
const std::string kTop = "/tmp/nix-build-envtest.drv-0";

/// The derivation of the Nix 2.8 experiment recorded in docs/worker.md:
/// outputs out and dev, a passAsFile attribute, bools and a number.
store::Derivation envtestDrv() {
  store::Derivation d;
  d.name = "envtest";
  d.outputs["out"].path = kStore.parsePath(kOut);
  d.outputs["dev"].path = kStore.parsePath(kDev);
  d.platform = "x86_64-linux";
  d.builder = "/bin/sh";
  d.args = {"-c", "env > $out"};
  d.env = {{"big", "contents of big"},
           {"builder", "/bin/sh"},
           {"dev", kDev},
           {"f", ""},
           {"foo", "bar baz"},
           {"name", "envtest"},
           {"num", "3"},
           {"out", kOut},
           {"outputs", "out dev"},
           {"passAsFile", "big"},
           {"system", "x86_64-linux"},
           {"t", "1"}};
  return d;
}

BuildEnvContext context() { return {kTop, "/nix/store", 2, {}}; }

// Exactly what `env` printed inside Nix 2.8's unsandboxed build of the same
// derivation (PWD, which the shell adds, left out).
TEST(BuildEnv, MatchesNix28Exactly) {
  auto benv = makeBuildEnvironment(kStore, envtestDrv(), context());
  const std::string attr =
      ".attr-1lak0mvllw8rv9i9ygkglvhqsq19qi9ynl4bi7gbf69ab5nzw89a";
  Env want = {{"TEMPDIR", kTop},
              {"HOME", "/homeless-shelter"},
              {"foo", "bar baz"},
              {"outputs", "out dev"},
              {"NIX_BUILD_CORES", "2"},
              {"dev", kDev},
              {"bigPath", kTop + "/" + attr},
              {"builder", "/bin/sh"},
              {"NIX_LOG_FD", "2"},
              {"TMPDIR", kTop},
              {"out", kOut},
              {"TEMP", kTop},
              {"TERM", "xterm-256color"},
              {"f", ""},
              {"PATH", "/path-not-set"},
              {"system", "x86_64-linux"},
              {"t", "1"},
              {"TMP", kTop},
              {"NIX_BUILD_TOP", kTop},
              {"passAsFile", "big"},
              {"NIX_STORE", "/nix/store"},
              {"num", "3"},
              {"name", "envtest"}};
  EXPECT_EQ(benv.env, want);
  EXPECT_EQ(benv.files, (Env{{attr, "contents of big"}}));
}

// Nix 2.8 lets the derivation override PATH, HOME, NIX_STORE and
// NIX_BUILD_CORES but not the build-dir variables, NIX_LOG_FD or TERM.
TEST(BuildEnv, WhichVariablesTheDerivationMayOverride) {
  auto d = envtestDrv();
  d.env = {{"HOME", "h"},       {"PATH", "p"},
           {"NIX_STORE", "s"},  {"NIX_BUILD_CORES", "c"},
           {"TMPDIR", "t"},     {"NIX_BUILD_TOP", "b"},
           {"NIX_LOG_FD", "9"}, {"TERM", "dumb"}};
  auto env = makeBuildEnvironment(kStore, d, context()).env;
  EXPECT_EQ(env["HOME"], "h");
  EXPECT_EQ(env["PATH"], "p");
  EXPECT_EQ(env["NIX_STORE"], "s");
  EXPECT_EQ(env["NIX_BUILD_CORES"], "c");
  EXPECT_EQ(env["TMPDIR"], kTop);
  EXPECT_EQ(env["NIX_BUILD_TOP"], kTop);
  EXPECT_EQ(env["NIX_LOG_FD"], "2");
  EXPECT_EQ(env["TERM"], "xterm-256color");
}

// Names listed in passAsFile that are not attributes are ignored;
// duplicates give one file.
TEST(BuildEnv, PassAsFileIgnoresMissingNames) {
  auto d = envtestDrv();
  d.env = {{"a", "x"}, {"passAsFile", "missing a  a"}};
  auto benv = makeBuildEnvironment(kStore, d, context());
  EXPECT_EQ(benv.env.count("a"), 0u);
  EXPECT_EQ(benv.env.count("missingPath"), 0u);
  EXPECT_EQ(
      benv.env["aPath"],
      kTop + "/.attr-1fs8xspqaxw0p5r4wz0lz3pqd9sdvhirmcriqbxcmg8vr89835ya");
  EXPECT_EQ(benv.files.size(), 1u);
}

// `builtins.placeholder "dev"` in a variable, a passAsFile file or an
// argument becomes the output's path, as in Nix 2.8 (where `echo
// ${placeholder "out"}` in args printed the output path).
TEST(BuildEnv, OutputPlaceholdersBecomeOutputPaths) {
  auto d = envtestDrv();
  std::string dev = store::hashPlaceholder("dev");
  std::string out = store::hashPlaceholder("out");
  d.env["flags"] = "DEVPREFIX=" + dev + " DOC=" + dev + "/doc";
  d.env["big"] = "in a file: " + out;
  auto benv = makeBuildEnvironment(kStore, d, context());
  EXPECT_EQ(benv.env["flags"], "DEVPREFIX=" + kDev + " DOC=" + kDev + "/doc");
  EXPECT_EQ(benv.files.begin()->second, "in a file: " + kOut);
  EXPECT_EQ(rewriteOutputPlaceholders(kStore, d, "echo " + out + " > $out"),
            "echo " + kOut + " > $out");
  // An output without a known path (content-addressed) keeps its text.
  d.outputs["dev"].path.reset();
  EXPECT_EQ(rewriteOutputPlaceholders(kStore, d, dev), dev);
}

// Fixed-output builds get impureEnvVars from the worker (empty when unset)
// and NIX_OUTPUT_CHECKED=1, as seen in Nix 2.8.
TEST(BuildEnv, FixedOutputImpureVariables) {
  store::Derivation d;
  d.name = "fodtest";
  d.outputs["out"] = {
      kStore.parsePath("/nix/store/fz3jkcyrcm043msjpil186wszg2fl410-fodtest"),
      "sha256", std::string(64, '0')};
  d.builder = "/bin/sh";
  d.env = {{"impureEnvVars", "http_proxy KILNX"}, {"name", "fodtest"}};
  auto ctx = context();
  ctx.impureEnv = [](const std::string& n) -> std::optional<std::string> {
    if (n == "KILNX") return "hello";
    return std::nullopt;
  };
  auto env = makeBuildEnvironment(kStore, d, ctx).env;
  EXPECT_EQ(env["KILNX"], "hello");
  EXPECT_EQ(env.at("http_proxy"), "");
  EXPECT_EQ(env["NIX_OUTPUT_CHECKED"], "1");
  // Input-addressed builds get neither.
  auto plain = makeBuildEnvironment(kStore, envtestDrv(), ctx).env;
  EXPECT_EQ(plain.count("NIX_OUTPUT_CHECKED"), 0u);
}

// Structured attrs: no derivation variables, .attrs.json with the outputs
// as a map and .attrs.sh, byte for byte as Nix 2.8 wrote them.
TEST(BuildEnv, StructuredAttrsMatchNix28) {
  store::Derivation d;
  d.name = "satest2";
  const std::string out = "/nix/store/5h1m63llhj1m6im6i0g83f722n6bb7y2-satest2";
  d.outputs["out"].path = kStore.parsePath(out);
  d.builder = "/bin/sh";
  d.env = {
      {"__json",
       R"({"builder":"/bin/sh","l3":[true,false],"l4":[null],"l5":["x",2],"name":"satest2",)"
       R"("outputs":["out"],"s2":{"a":true,"b":null,"c":false},"s3":{},)"
       R"("s4":{"x-y":1,"z":"q'"},"system":"x86_64-linux","fl":1.5,"a-b":"x","e":[],)"
       R"("nest":[[1],"a"],"q":"it's \"q\" $x\nl","b":true,"f":false,"n":null,"neg":-3})"},
      {"out", out}};
  auto benv = makeBuildEnvironment(kStore, d, context());
  EXPECT_EQ(benv.env.count("out"), 0u);
  EXPECT_EQ(benv.env["NIX_ATTRS_JSON_FILE"], kTop + "/.attrs.json");
  EXPECT_EQ(benv.env["NIX_ATTRS_SH_FILE"], kTop + "/.attrs.sh");
  EXPECT_EQ(benv.env.size(), 13u);
  EXPECT_EQ(
      benv.files[".attrs.json"],
      R"({"a-b":"x","b":true,"builder":"/bin/sh","e":[],"f":false,"fl":1.5,"l3":[true,false],)"
      R"("l4":[null],"l5":["x",2],"n":null,"name":"satest2","neg":-3,"nest":[[1],"a"],)"
      R"("outputs":{"out":")" +
          out +
          R"("},"q":"it's \"q\" $x\nl",)"
          R"("s2":{"a":true,"b":null,"c":false},"s3":{},"s4":{"x-y":1,"z":"q'"},)"
          R"("system":"x86_64-linux"})");
  EXPECT_EQ(benv.files[".attrs.sh"],
            "declare b=1\n"
            "declare builder='/bin/sh'\n"
            "declare -a e=()\n"
            "declare f=\n"
            "declare -a l3=(1  )\n"
            "declare -a l4=('' )\n"
            "declare -a l5=('x' 2 )\n"
            "declare n=''\n"
            "declare name='satest2'\n"
            "declare neg=-3\n"
            "declare -A outputs=(['out']='" +
                out +
                "' )\n"
                "declare q='it'\\''s \"q\" $x\nl'\n"
                "declare -A s2=(['a']=1 ['b']='' ['c']= )\n"
                "declare -A s3=()\n"
                "declare -A s4=(['x-y']=1 ['z']='q'\\''' )\n"
                "declare system='x86_64-linux'\n");
}

TEST(BuildEnv, MalformedStructuredAttrsAreRejected) {
  auto d = envtestDrv();
  d.env = {{"__json", "[1,2]"}};
  EXPECT_THROW(makeBuildEnvironment(kStore, d, context()), FormatError);
  d.env = {{"__json", "{not json"}};
  try {
    makeBuildEnvironment(kStore, d, context());
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'envtest': __json is not valid JSON"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::worker

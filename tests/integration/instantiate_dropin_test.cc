// `kiln instantiate` as a drop-in for nix-instantiate 2.8: for each flag
// combination, the same stdout, stderr (up to the program's name) and exit
// code as the real nix-instantiate run in the same folder (read-only mode,
// so neither writes a store).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

constexpr const char* kCollection = R"({ who ? "world", n ? 1 }:
let mk = name: derivation { inherit name; system = "x86_64-linux"; builder = "/bin/sh";
                            args = [ "-c" "echo ${who} > $out" ]; };
in {
  hello = mk "hello";
  multi = derivation { name = "multi"; system = "x"; builder = "/b"; outputs = [ "out" "lib" ]; };
  set = { recurseForDerivations = true; a = mk "a"; b = mk "b"; };
  plain = { a = mk "pa"; };
  list = [ (mk "l1") (mk "l2") ];
  twice = let d = mk "d"; in { a = d; b = d; };
  value = { x = n; y = [ 1 "two" ./default.nix ]; z = who; f = x: x; };
  num = n * 2;
}
)";

struct Case {
  std::vector<std::string> args;
  std::vector<std::string> env = {};
  std::string input = "";  ///< stdin
};

// Names the case by its flags (letters, digits and '-' only, so the ctest
// name is stable and readable instead of the bytes of the struct).
void PrintTo(const Case& c, std::ostream* os) {
  std::string name;
  for (auto& a : c.args) {
    for (char ch : a)
      if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-') name += ch;
    name += '_';
    if (name.size() > 60) break;
  }
  *os << name.substr(0, 60);
}

class InstantiateDropIn : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "nix-instantiate is not installed";
    createDirs(dir_ + "/nixconf");
    writeFile(dir_ + "/nixconf/nix.conf", "build-users-group =\n");
    writeFile(dir_ + "/default.nix", kCollection);
    createDirs(dir_ + "/sp/lib");
    writeFile(dir_ + "/sp/lib/default.nix", "{ v = 42; }\n");
  }

  test::RunResult run(const std::string& program) {
    // The environment is set by the shell, so the case's NIX_PATH wins.
    std::string cmd = "cd '" + dir_ + "' && NIX_PATH= NIX_CONF_DIR='" + dir_ + "/nixconf'";
    for (auto& e : GetParam().env) cmd += " " + e;  // VAR=value, no spaces
    cmd += " exec " + program + " --readonly-mode";
    for (auto& a : GetParam().args) cmd += " '" + a + "'";
    auto r = test::run({"sh", "-c", cmd}, GetParam().input);
    for (std::string name : {"nix-instantiate", "kiln instantiate"})
      for (size_t at; (at = r.err.find(name)) != std::string::npos;)
        r.err.replace(at, name.size(), "PROGRAM");
    return r;
  }

  TempDir tmp_{"kiln-dropin"};
  std::string dir_ = tmp_.path();
};

TEST_P(InstantiateDropIn, SameOutputErrorsAndExitCode) {
  auto nix = run("nix-instantiate");
  auto ours = run(test::kilnBinary() + " instantiate");
  EXPECT_LT(nix.exitCode, 2) << nix.err;  // the case ran (no shell error)
  EXPECT_EQ(ours.exitCode, nix.exitCode);
  EXPECT_EQ(ours.out, nix.out);
  EXPECT_EQ(ours.err, nix.err);
}

std::vector<Case> cases() {
  std::vector<Case> c = {
      {{}},  // ./default.nix
      {{"default.nix"}},
      {{"-A", "hello", "-A", "set"}},
      {{"-A", "multi"}},
      {{"-A", "multi.lib"}},  // drvPath!lib
      {{"-A", "plain"}},      // no recurseForDerivations: nothing
      {{"-A", "list"}},
      {{"-A", "list.1"}},
      {{"-A", "twice"}},  // one value, printed once
      {{"--argstr", "who", "bob", "-A", "hello"}},
      {{"--arg", "n", "5", "--eval", "-A", "num"}},
      {{"--eval", "-A", "value"}},
      {{"--eval", "--strict", "-A", "value"}},
      {{"--eval", "--strict", "--json", "-A", "value.y"}},  // no newline
      {{"--eval", "--json", "-A", "num", "-A", "value.z"}},
      {{"--eval", "--xml", "-A", "value"}},
      {{"--eval", "--strict", "--xml", "--no-location", "-A", "value"}},
      {{"--parse", "default.nix"}},
      {{"--parse", "-E", "x: rec { b = 1; a.c = \"$x\"; inherit x; }"}},
      {{"-E", "with import ./. {}; [ hello { x = multi; } ]"}},
      {{"--eval", "-E", "(import <lib>).v", "-I", "lib=sp/lib"}},
      {{"--eval", "-E", "import <lib>", "-I", "sp"}},
      {{"--eval", "-E", "(import <lib>).v"}, {"NIX_PATH=lib=sp/lib"}},
      {{"--eval", "-"}, {}, "1 + 2"},
      {{"--eval", "-E", "1", "-E", "2"}},
      {{"-A", "nope"}},
      {{"missing.nix"}},
      {{"--eval", "-E", "throw \"x\""}},
      {{"-E", "[ [ 1 ] ]"}},
      {{"--bogus"}},
      {{"-A"}},
      // Restricted evaluation (--option restrict-eval true): Nix's errors.
      {{"--option", "restrict-eval", "true", "--eval", "-E", "builtins.readFile /etc/passwd"}},
      {{"--option", "restrict-eval", "true", "--show-trace", "--eval", "-E", "import /etc/passwd"}},
      {{"--restrict-eval", "--eval", "-E", "builtins.readDir /etc"}},
      {{"--restrict-eval", "--eval", "-E", "builtins.path { path = /etc; }"}},
      {{"--restrict-eval", "--eval", "-E", "\"${/etc/passwd}\""}},
      {{"--restrict-eval", "--eval", "-E", "builtins.pathExists /etc/passwd"}},
      {{"--restrict-eval", "--eval", "-E", "builtins.getEnv \"HOME\""}},
      {{"--restrict-eval", "-A", "hello"}},  // ./default.nix is not allowed
      {{"--restrict-eval", "-I", ".", "-A", "hello"}},
      {{"--restrict-eval", "-I", "lib=sp/lib", "--eval", "-E", "(import <lib>).v"}},
      {{"--restrict-eval", "--eval", "-E", "builtins.storePath /nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x"}},
      {{"--restrict-eval", "--option", "allowed-uris", "https://a.org", "--eval", "-E",
        "builtins.fetchTarball \"https://a.organ/x\""}},
      {{"--restrict-eval", "--eval", "-E", "builtins.fetchurl \"file:///etc/passwd\""}},
      // Nix's common flags: accepted, values checked as Nix checks them.
      {{"-vvv", "--quiet", "--debug", "-j4", "--cores", "2K", "--timeout", "10", "--max-silent-time",
        "5", "-Q", "-K", "-k", "--fallback", "--repair", "--impure", "--eval-store", "auto",
        "--log-format", "raw", "--override-flake", "a", "b", "--sandbox", "--no-sandbox",
        "--extra-substituters", "x", "--builders", "", "-A", "hello"}},
      {{"--option", "foo", "bar", "--option", "cores", "x", "--option", "restrict-eval", "maybe",
        "--option", "build-cores", "3", "--option", "extra-allowed-uris", "x", "--eval", "-A", "num"}},
      {{"--cores", "abc", "-A", "hello"}},
      {{"--cores", "-1", "-A", "hello"}},
      {{"-j", "3x", "-A", "hello"}},
      {{"--log-lines", "x", "-A", "hello"}},
      {{"-A", "hello", "--option", "x"}},
      {{"--system", "aarch64-linux", "--eval", "-E", "builtins.currentSystem"}},
      {{"--option", "system", "i686-linux", "--eval", "-E", "builtins.currentSystem"}},
      {{"--eval-only", "-A", "num"}},
      {{"--parse-only", "-E", "1 + 2"}},
      {{"--dry-run", "-A", "hello"}},
      {{"--no-gc-warning", "-A", "hello"}},
      {{"--find-file", "lib", "-I", "sp"}},
      {{"--find-file", "nope"}},
      {{"--eval", "--", "-E", "1"}},
      {{"--option", "show-trace", "true", "--eval", "-E", "let f = x: x.a; in f {}"}},
      {{"--eval", "-E", "(import <lib>).v"}, {"NIX_PATH=lib=nope"}},
      // Former known differences: `+` errors at the operand, `all` and
      // unforced attributes of a derivation as <CODE>, functionArgs
      // derivation, "while realising the context" traces.
      {{"--eval", "-E", "1 + \"a\""}},
      {{"--eval", "-E", "let x = \"s\"; y = 1; in x   +   y"}},
      {{"--eval", "-E", "\"a\" + {}"}},
      {{"--eval", "-E", "1 + (2 + true)"}},
      {{"--eval", "--show-trace", "-E", "let f = x: x + \"a\"; in f 1"}},
      {{"--eval", "-A", "hello"}},
      {{"--eval", "-A", "multi"}},
      {{"--eval", "-A", "multi.all"}},
      {{"--eval", "--strict", "-A", "multi"}},
      {{"--eval", "-E", "(derivation { name = \"d\"; system = \"x\"; builder = \"/b\"; }).all"}},
      // Forcing an element of `all` forces that output's attribute too (as
      // Nix's `map (x: x.value) outputsList` does): `dev` prints as a set.
      {{"--eval", "-E",
        "let d = derivation { name = \"d\"; system = \"x\"; builder = \"/b\"; outputs = [ "
        "\"out\" \"dev\" ]; }; in builtins.seq (builtins.elemAt d.all 1) d"}},
      {{"--eval", "-E", "builtins.functionArgs derivation"}},
      {{"--eval", "-E", "[ derivation builtins.derivationStrict ]"}},
      {{"--eval", "-E", "builtins.readFile 1"}},
      {{"--eval", "--show-trace", "-E", "builtins.readFile 1"}},
      {{"--eval", "--show-trace", "-E", "import 1"}},
      // Pure evaluation (--option pure-eval true): Nix 2.8's refusals.
      {{"--option", "pure-eval", "true", "--eval", "-E", "1 + 2"}},
      {{"--option", "pure-eval", "true", "-A", "hello"}},  // ./default.nix is refused
      {{"--pure-eval", "--eval", "-E", "builtins.currentTime"}},
      {{"--pure-eval", "--eval", "-E", "__currentTime"}},
      {{"--pure-eval", "--eval", "-E", "builtins.currentSystem"}},
      {{"--pure-eval", "--eval", "-E", "[ (builtins ? currentSystem) (builtins ? currentTime) ]"}},
      {{"--pure-eval", "--eval", "-E", "builtins.getEnv \"HOME\""}},
      {{"--pure-eval", "--eval", "-E", "builtins.readFile ./default.nix"}},
      {{"--pure-eval", "--show-trace", "--eval", "-E", "import /etc/passwd"}},
      {{"--pure-eval", "--eval", "-E", "builtins.readDir /etc"}},
      {{"--pure-eval", "--eval", "-E", "builtins.pathExists /etc/passwd"}},
      {{"--pure-eval", "--eval", "-E", "\"${./default.nix}\""}},
      {{"--pure-eval", "--eval", "-E", "builtins.storePath /nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x"}},
      {{"--pure-eval", "-I", "lib=sp/lib", "--eval", "-E", "(import <lib>).v"}},
      {{"--pure-eval", "--eval", "-E", "builtins.nixPath"}, {"NIX_PATH=lib=sp/lib"}},
      {{"--pure-eval", "--eval", "-E", "import <nix/fetchurl.nix>"}},
      {{"--pure-eval", "--eval", "-E", "builtins.fetchurl \"https://a.org/x\""}},
      {{"--pure-eval", "--eval", "-E", "builtins.fetchTarball { url = \"https://a.org/x\"; }"}},
      {{"--pure-eval", "--eval", "-E", "builtins.fetchGit \"https://a.org/x\""}},
      {{"--pure-eval", "--restrict-eval", "--eval", "-E", "builtins.readFile /etc/passwd"}},
      {{"--pure-eval", "-E", "derivation { name = \"d\"; system = \"x\"; builder = \"/b\"; }"}},
      {{"--option", "pure-eval", "false", "--eval", "-E", "builtins ? currentTime"}},
  };
  return c;
}

INSTANTIATE_TEST_SUITE_P(Flags, InstantiateDropIn, ::testing::ValuesIn(cases()));

// A shell script written for nix-instantiate 2.8, run once with the real
// one and once with kiln as `nix-instantiate` on PATH (a symlink to the
// kiln binary): the same stdout, stderr and exit code.
constexpr const char* kScript = R"(set -eu
export NIX_PATH=lib=$PWD/sp/lib
nix-instantiate --version | cut -d' ' -f3
nix-instantiate --eval -E '(import <lib>).v'
nix-instantiate --eval --strict --json -A value.y; echo
nix-instantiate --store "local?root=$PWD/chroot" -j4 --cores 2 --option sandbox false \
  --show-trace --no-gc-warning -A hello -A set
drv=$(nix-instantiate --readonly-mode --no-gc-warning -A hello)
test -n "$drv" && echo "got a .drv"
nix-instantiate --parse -E '1 + 2'
nix-instantiate --find-file lib/default.nix
nix-instantiate --option restrict-eval true --eval -E 'builtins.readFile /etc/passwd' 2>&1 \
  || echo "refused: $?"
nix-instantiate --restrict-eval -I . --eval -E '(import ./. {}).num'
nix-instantiate --eval --argstr who bob -A value.z
nix-instantiate --dry-run --quiet -A set 2>/dev/null
if nix-instantiate --eval -E 'throw "x"' 2>/dev/null; then echo unexpected; else echo "failed: $?"; fi
nix-instantiate --eval -E 'builtins.getEnv "HOME"' --option restrict-eval true
ls chroot/nix/store | grep '\.drv$'
)";

TEST(InstantiateScript, RunsWithKilnAsNixInstantiate) {
  if (!test::haveProgram("nix-instantiate")) GTEST_SKIP() << "nix-instantiate is not installed";
  auto runScript = [](const std::string& nixInstantiate) {
    TempDir tmp("kiln-script");
    std::string dir = tmp.path();
    createDirs(dir + "/nixconf");
    writeFile(dir + "/nixconf/nix.conf", "build-users-group =\n");
    writeFile(dir + "/default.nix", kCollection);
    createDirs(dir + "/sp/lib");
    writeFile(dir + "/sp/lib/default.nix", "{ v = 42; }\n");
    writeFile(dir + "/script.sh", kScript);
    std::string path = "/usr/bin:/bin";
    if (!nixInstantiate.empty()) {  // kiln, found first on PATH
      createDirs(dir + "/bin");
      if (symlink(nixInstantiate.c_str(), (dir + "/bin/nix-instantiate").c_str()) != 0)
        throw SysError("symlink", errno);
      path = dir + "/bin:" + path;
    }
    auto r = test::run({"sh", "-c",
                        "cd '" + dir + "' && PATH='" + path + "' NIX_CONF_DIR='" + dir +
                            "/nixconf' KILN_STATE_DIR='" + dir + "/kiln' exec sh script.sh"});
    for (std::string* text : {&r.out, &r.err})
      for (size_t at; (at = text->find(dir)) != std::string::npos;) text->replace(at, dir.size(), "DIR");
    return r;
  };
  auto nix = runScript("");
  auto ours = runScript(test::kilnBinary());
  EXPECT_EQ(nix.exitCode, 0) << nix.err;
  EXPECT_EQ(ours.exitCode, nix.exitCode) << ours.err;
  EXPECT_EQ(ours.out, nix.out);
  EXPECT_EQ(ours.err, nix.err);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// `kiln eval --pure-eval`: Nix's pure evaluation for a job set. Only
// --allow-path paths are readable (the file itself needs one), getEnv
// gives "", currentSystem is not defined; each refusal fails its job alone.
TEST(EvalPure, RefusesImpureInputsPerJob) {
  TempDir tmp("kiln-pure-eval");
  writeFile(tmp.path() + "/default.nix", R"({
  home = derivation { name = "h${builtins.getEnv "HOME"}"; system = "x"; builder = "/b"; };
  sys = derivation { name = "sys"; system = builtins.currentSystem; builder = "/b"; };
  peek = derivation { name = "peek"; system = "x"; builder = builtins.readFile /etc/passwd; };
})");
  std::string file = tmp.path() + "/default.nix";
  auto refused = test::run({test::kilnBinary(), "eval", "--pure-eval", "--readonly-mode", file});
  EXPECT_EQ(refused.exitCode, 1);
  EXPECT_NE(refused.err.find("access to absolute path '" + file +
                             "' is forbidden in pure eval mode (use '--impure' to override)"),
            std::string::npos)
      << refused.err;

  auto r = test::run({test::kilnBinary(), "eval", "--pure-eval", "--allow-path", tmp.path(),
                      "--readonly-mode", "--json", file},
                     "", {"HOME=/home/secret"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find(R"({"attr":"home","name":"h",)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attribute 'currentSystem' missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("access to absolute path '/etc/passwd' is forbidden in pure eval mode"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("/home/secret"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln

// Runs the Nix 2.8 language conformance suite (shared/conformance/
// nix-lang-2.8) against `kiln instantiate`, one test per case, as the
// suite's README describes: a copy of the folder named `lang` in a scratch
// working directory, NIX_PATH=lang/dir3:lang/dir4, TEST_VAR=foo, `.flags`
// files passed through, parse tests reading standard input.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "kiln/common/file.h"
#include "test_support.h"

namespace {

std::string suiteDir() { return kiln::test::sharedDir() + "/conformance/nix-lang-2.8"; }

bool fileExists(const std::string& p) { return kiln::pathExists(p); }

// The active cases, by file name (without .nix).
std::vector<std::string> listCases() {
  std::vector<std::string> out;
  DIR* d = opendir(suiteDir().c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() < 5 || n.compare(n.size() - 4, 4, ".nix") != 0) continue;
    n = n.substr(0, n.size() - 4);
    bool parse = n.rfind("parse-", 0) == 0;
    bool evalFail = n.rfind("eval-fail-", 0) == 0;
    bool evalOkay = n.rfind("eval-okay-", 0) == 0;
    if (evalOkay && !fileExists(suiteDir() + "/" + n + ".exp") &&
        !fileExists(suiteDir() + "/" + n + ".exp.xml"))
      continue;  // disabled upstream
    if (parse || evalFail || evalOkay) out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// name -> reason, from tests/data/lang-expected-failures.txt.
std::map<std::string, std::string> expectedFailures() {
  std::map<std::string, std::string> out;
  std::ifstream in(kiln::test::sourceDir() + "/tests/data/lang-expected-failures.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, reason;
    ls >> name;
    std::getline(ls, reason);
    out[name] = reason;
  }
  return out;
}

struct Totals {
  int passed = 0, failed = 0, expected = 0, unexpectedPass = 0;
};
Totals totals;
std::unique_ptr<kiln::TempDir> work;
std::string setupError;  // non-empty when the scratch copy could not be made

class LangEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    work = std::make_unique<kiln::TempDir>("kiln-lang");
    auto r = kiln::test::run({"cp", "-r", suiteDir(), work->path() + "/lang"});
    if (r.exitCode != 0) setupError = "copying " + suiteDir() + " failed: " + r.err;
  }
  void TearDown() override {
    std::printf("[lang conformance] %d of %zu passed, %d expected failures, %d failing, "
                "%d unexpectedly passing\n",
                totals.passed, listCases().size(), totals.expected, totals.failed,
                totals.unexpectedPass);
    work.reset();
  }
};
::testing::Environment* const kEnv = ::testing::AddGlobalTestEnvironment(new LangEnvironment);

std::string shellQuote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Runs kiln in the scratch directory; returns (exit code, stdout, stderr).
kiln::test::RunResult kiln(const std::string& args, const std::string& input = "") {
  std::string cmd = "cd " + shellQuote(work->path()) + " && exec " +
                    shellQuote(kiln::test::kilnBinary()) + " instantiate " + args;
  return kiln::test::run({"sh", "-c", cmd}, input,
                         {"NIX_PATH=lang/dir3:lang/dir4", "TEST_VAR=foo",
                          "KILN_STATE_DIR=" + work->path() + "/state"});
}

// Whether the case passes; `why` says what went wrong otherwise.
bool runCase(const std::string& name, std::string& why) {
  std::string dir = suiteDir() + "/" + name;
  std::string flags;
  if (fileExists(dir + ".flags")) {
    // Split on whitespace like the upstream harness's unquoted $(cat …).
    std::istringstream words(kiln::readFile(dir + ".flags"));
    std::string w;
    while (words >> w) flags += shellQuote(w) + " ";
  }
  std::string file = "lang/" + name + ".nix";
  if (name.rfind("parse-", 0) == 0) {
    auto r = kiln("--parse -", kiln::readFile(dir + ".nix"));
    bool shouldFail = name.rfind("parse-fail-", 0) == 0;
    why = "exit " + std::to_string(r.exitCode) + ": " + r.err;
    return shouldFail ? (r.exitCode == 1 && !r.err.empty()) : r.exitCode == 0;
  }
  if (name.rfind("eval-fail-", 0) == 0) {
    auto r = kiln("--eval --strict " + file + " " + flags);
    why = "exit " + std::to_string(r.exitCode) + ": " + r.out + r.err;
    return r.exitCode == 1 && r.err.find("error:") != std::string::npos;
  }
  bool xml = !fileExists(dir + ".exp");
  auto r = kiln("--eval --strict " + std::string(xml ? "--xml --no-location " : "") + file + " " + flags);
  std::string expected = kiln::readFile(dir + (xml ? ".exp.xml" : ".exp"));
  why = "exit " + std::to_string(r.exitCode) + "\n--- expected\n" + expected + "--- got\n" + r.out +
        "--- stderr\n" + r.err;
  return r.exitCode == 0 && r.out == expected;
}

class LangConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(LangConformance, Case) {
  const std::string& name = GetParam();
  ASSERT_EQ(setupError, "");
  static const auto known = expectedFailures();
  std::string why;
  bool ok = runCase(name, why);
  auto it = known.find(name);
  if (it != known.end()) {
    if (ok) {
      ++totals.unexpectedPass;
      ++totals.passed;
      FAIL() << name << " now passes: remove it from tests/data/lang-expected-failures.txt";
    }
    ++totals.expected;
    GTEST_SKIP() << "expected failure:" << it->second;
  }
  if (ok) ++totals.passed;
  else ++totals.failed;
  EXPECT_TRUE(ok) << name << ": " << why;
}

std::string caseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(NixLang28, LangConformance, ::testing::ValuesIn(listCases()), caseName);

TEST(LangConformanceSuite, HasAllActiveCases) { EXPECT_EQ(listCases().size(), 137u); }

}  // namespace

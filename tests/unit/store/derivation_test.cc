// Derivations against the vectors made by Nix 2.8 (spec §3): exact .drv
// bytes, recomputed output and .drv paths, intermediate masked ATerms and
// modulo hashes, and `nix show-derivation` JSON.
#include "kiln/store/derivation.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::store {
namespace {

namespace fs = std::filesystem;

std::string drvVector(const std::string& rel) {
  return test::vectorPath("drv/" + rel);
}

std::vector<std::string> storeDrvFiles() {
  std::vector<std::string> files;
  for (auto& e : fs::directory_iterator(drvVector("store")))
    if (e.path().extension() == ".drv") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

DrvHashCache vectorCache() {
  StoreDir sd;
  return DrvHashCache(sd, fileDrvLoader(sd, drvVector("store")));
}

TEST(DerivationVectors, EveryDrvParsesAndPrintsIdentically) {
  StoreDir sd;
  auto files = storeDrvFiles();
  ASSERT_GE(files.size(), 16u);
  for (auto& f : files) {
    std::string bytes = readFile(f);
    Derivation drv = readDerivationFile(sd, f);
    EXPECT_EQ(printDerivation(sd, drv), bytes) << f;
    EXPECT_FALSE(drv.name.empty());
    EXPECT_EQ(sd.printPath(derivationPath(sd, drv)),
              "/nix/store/" + baseNameOf(f))
        << f;
  }
}

// The masked form the evaluator produces: no output paths, output env
// entries removed (fillOutputPaths must add them back).
Derivation unfilled(const Derivation& drv) {
  Derivation d = drv;
  for (auto& [name, o] : d.outputs) {
    o.path.reset();
    d.env.erase(name);
  }
  return d;
}

std::map<std::string, std::string> parseOutputsField(const std::string& s) {
  std::map<std::string, std::string> m;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    m[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return m;
}

TEST(DerivationVectors, OutputAndDrvPathsRecomputed) {
  StoreDir sd;
  auto rows = test::readTsv(drvVector("index.tsv"));
  ASSERT_EQ(rows.size(), 17u);
  auto cache = vectorCache();
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::string& drvPath = rows[i][2];
    Derivation orig = readDerivationFile(
        sd, drvVector("store/" + drvPath.substr(sd.dir().size() + 1)));
    Derivation d = unfilled(orig);
    fillOutputPaths(d, cache);
    EXPECT_EQ(d, orig) << drvPath;
    EXPECT_EQ(sd.printPath(derivationPath(sd, d)), drvPath);
    std::map<std::string, std::string> got;
    for (auto& [name, o] : d.outputs) got[name] = sd.printPath(*o.path);
    EXPECT_EQ(got, parseOutputsField(rows[i][3])) << drvPath;
  }
}

/// One `drv:` block of intermediate.txt: the lines after the header.
struct IntermediateBlock {
  std::string drvPath;
  std::vector<std::string> lines;
};

std::vector<IntermediateBlock> readIntermediate() {
  std::ifstream in(drvVector("intermediate.txt"));
  std::vector<IntermediateBlock> blocks;
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("drv: "))
      blocks.push_back({line.substr(5), {}});
    else if (!blocks.empty() && !line.starts_with("====="))
      blocks.back().lines.push_back(line);
  }
  return blocks;
}

std::string afterPrefix(const std::string& line, const std::string& prefix) {
  EXPECT_TRUE(line.starts_with(prefix)) << line;
  return line.substr(prefix.size());
}

void checkBlock(const IntermediateBlock& b, DrvHashCache& cache) {
  StoreDir sd;
  StorePath path = sd.parsePath(b.drvPath);
  Derivation drv =
      readDerivationFile(sd, drvVector("store/" + path.baseName()));
  const auto& L = b.lines;
  size_t checked = 0;
  for (size_t i = 0; i < L.size(); ++i) {
    const std::string& l = L[i];
    if (l.starts_with("input ")) {
      auto arrow = l.find(" -> ");
      StorePath in = sd.parsePath(l.substr(6, arrow - 6));
      EXPECT_EQ(cache.hashOf(in).toHex(), l.substr(arrow + 4, 64)) << l;
      ++checked;
    } else if (l == "masked ATerm:") {
      EXPECT_EQ(printModuloAterm(cache, drv, true), L[i + 1]) << b.drvPath;
      ++checked;
    } else if (l.starts_with("sha256(masked ATerm) = ")) {
      EXPECT_EQ(cache.hashModulo(drv, true).toHex(),
                afterPrefix(l, "sha256(masked ATerm) = "));
      ++checked;
    } else if (l.starts_with("hashDerivationModulo")) {
      EXPECT_EQ(cache.hashOf(path).toHex(), l.substr(l.rfind(' ') + 1)) << l;
      ++checked;
    } else if (l.starts_with("fixed-output; modulo-hash input string: '")) {
      EXPECT_TRUE(isFixedOutput(drv));
      auto& o = drv.outputs.at("out");
      std::string s = "fixed:out:" + o.hashAlgo + ":" + o.hash + ":" +
                      sd.printPath(*o.path);
      EXPECT_EQ("'" + s + "'", l.substr(l.find('\'')));
      ++checked;
    } else if (l.starts_with("drv path fingerprint: '")) {
      std::string fp = l.substr(l.find('\'') + 1);
      fp.pop_back();
      std::string refs;
      for (auto& s : drv.inputSrcs) refs += ":" + sd.printPath(s);
      for (auto& [d, o] : drv.inputDrvs) refs += ":" + sd.printPath(d);
      // Fingerprint refs are sorted as full paths; compare as a set.
      std::string aterm = printDerivation(sd, drv);
      std::string tail =
          ":sha256:" + hashString(HashAlgo::kSha256, aterm).toHex() +
          ":/nix/store:" + drv.name + ".drv";
      EXPECT_TRUE(fp.starts_with("text")) << fp;
      EXPECT_TRUE(fp.ends_with(tail)) << fp;
      EXPECT_EQ(fp.size(), 4 + refs.size() + tail.size()) << fp;
      EXPECT_EQ(afterPrefix(L[i + 1], "   -> "), b.drvPath);
      ++checked;
    }
  }
  EXPECT_GE(checked, 3u) << b.drvPath;
}

TEST(DerivationVectors, IntermediateMaskedAtermsAndHashes) {
  auto blocks = readIntermediate();
  ASSERT_EQ(blocks.size(), 16u);
  auto cache = vectorCache();
  for (auto& b : blocks) checkBlock(b, cache);
}

TEST(DerivationVectors, ShowDerivationJsonExact) {
  StoreDir sd;
  size_t n = 0;
  for (auto& e : fs::directory_iterator(drvVector("show"))) {
    std::string base = e.path().filename().string();
    base = base.substr(0, base.size() - 5);  // strip ".json"
    StorePath p(base);
    std::map<StorePath, Derivation> m;
    m.emplace(p, readDerivationFile(sd, drvVector("store/" + base)));
    EXPECT_EQ(showDerivationJson(sd, m), readFile(e.path().string())) << base;
    ++n;
  }
  EXPECT_EQ(n, 16u);
  EXPECT_EQ(showDerivationJson(sd, {}), "{}\n");
}

TEST(DerivationVectors, EscapesAndControlBytes) {
  std::string out;
  printAtermString(
      out,
      std::string("a\"b\\c\nd\re\tf\x01g\x1bh\x7fi\x08j\x0ck\xc3\xa9", 23));
  EXPECT_EQ(
      out,
      std::string(
          "\"a\\\"b\\\\c\\nd\\re\\tf\x01g\x1bh\x7fi\x08j\x0ck\xc3\xa9\"", 30));
}

// Escapes found 16 bytes at a time must land at the same places as one
// byte at a time: every special byte at every offset of a long string.
TEST(DerivationVectors, EscapesAtEveryOffsetOfLongStrings) {
  const std::string specials = "\"\\\n\r\t";
  const std::string named[] = {"\\\"", "\\\\", "\\n", "\\r", "\\t"};
  for (size_t len : {15u, 16u, 17u, 33u, 70u})
    for (size_t at = 0; at < len; ++at)
      for (size_t k = 0; k < specials.size(); ++k) {
        std::string in(len, 'x');
        in[at] = specials[k];
        in[len - 1 - at / 2] = '\t';  // a second escape, sometimes the same byte
        std::string expected = "\"";
        for (char c : in) {
          size_t j = specials.find(c);
          expected += j == std::string::npos ? std::string(1, c) : named[j];
        }
        expected += "\"";
        std::string out;
        printAtermString(out, in);
        ASSERT_EQ(out, expected) << "len " << len << " at " << at << " k " << k;
      }
}

// `in` as an ATerm string literal, escaped one byte at a time.
std::string bytewise(std::string_view in) {
  std::string r = "\"";
  for (char c : in) {
    if (c == '"') r += "\\\"";
    else if (c == '\\') r += "\\\\";
    else if (c == '\n') r += "\\n";
    else if (c == '\r') r += "\\r";
    else if (c == '\t') r += "\\t";
    else r += c;
  }
  return r + "\"";
}

// Strings dense with escapes (several in one 16-byte block, runs of them,
// every byte value around them), appended after other text: the same bytes
// as escaping one byte at a time.
TEST(DerivationVectors, DenseEscapesMatchBytewiseEscaping) {
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1103515245 + 12345, seed >> 16; };
  const std::string specials = "\"\\\n\r\t";
  for (int round = 0; round < 2000; ++round) {
    std::string in(next() % 90, 'x');
    for (char& c : in) {
      uint32_t r = next();
      c = r % 3 ? specials[r % specials.size()] : static_cast<char>(r >> 3);
    }
    std::string out = "prefix";
    printAtermString(out, in);
    ASSERT_EQ(out, "prefix" + bytewise(in)) << "round " << round;
  }
}

// Bytes up to CR are looked at as possible escapes 16 or 32 at a time:
// only TAB, LF and CR among them are escaped, at any offset, in blocks of
// any mix (every other one stays raw, as Nix writes it).
TEST(DerivationVectors, OnlyTabLfCrAmongLowBytesAreEscaped) {
  for (int c = 0; c <= 0x0e; ++c)
    for (size_t len : {16u, 31u, 32u, 47u, 64u, 70u})
      for (size_t at = 0; at < len; at += 3) {
        std::string in(len, 'y');
        in[at] = static_cast<char>(c);
        if (at + 20 < len) in[at + 20] = '"';
        std::string out;
        printAtermString(out, in);
        ASSERT_EQ(out, bytewise(in)) << "byte " << c << " len " << len << " at " << at;
      }
}

// Many env keys, added out of order and at the end (as derivationStrict
// does), with values needing every escape: printed sorted by key, parsed
// back to the same record and printed to the same bytes.
TEST(DerivationVectors, ManyEnvKeysRoundTripSortedAndEscaped) {
  Derivation drv;
  drv.name = "many";
  drv.outputs["out"].path =
      StoreDir().parsePath("/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-many");
  drv.platform = "x86_64-linux";
  drv.builder = "/bin/sh";
  drv.args = {"-c", "echo \"hi\"\n"};
  for (int i = 199; i >= 100; --i)  // descending: each one goes first
    drv.env["k" + std::to_string(i)] = "v" + std::to_string(i);
  for (int i = 200; i < 300; ++i)  // ascending: hinted at the end
    drv.env.insert_or_assign(drv.env.end(), "k" + std::to_string(i),
                             "a\"b\\c\nd\re\tf" + std::to_string(i));
  drv.env["k150"] = "replaced";
  drv.env["out"] = "/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-many";
  std::string want =
      R"(Derive([("out","/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-many","","")],[],[],"x86_64-linux","/bin/sh",["-c","echo \"hi\"\n"],[)";
  for (int i = 100; i < 300; ++i) {
    std::string n = std::to_string(i);
    want += "(\"k" + n + "\",\"";
    want += i == 150 ? "replaced"
            : i < 200 ? "v" + n
                      : "a\\\"b\\\\c\\nd\\re\\tf" + n;
    want += "\"),";
  }
  want += R"(("out","/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-many")]))";
  std::string text = printDerivation(StoreDir(), drv);
  EXPECT_EQ(text, want);
  Derivation back = parseDerivation(StoreDir(), text, "many");
  EXPECT_EQ(back, drv);
  EXPECT_EQ(printDerivation(StoreDir(), back), want);
  ASSERT_EQ(back.env.size(), 201u);
  EXPECT_EQ(back.env.begin()->first, "k100");
  EXPECT_EQ(back.env.at("k150"), "replaced");
}

// ---- malformed input ---------------------------------------------------

const std::string kSimple =
    R"(Derive([("out","/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple","","")],[],[],"x86_64-linux","/bin/sh",["-c","echo hello > $out"],[("builder","/bin/sh"),("name","simple"),("out","/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple"),("system","x86_64-linux")]))";
const std::string kOutPath =
    "/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple";
const std::string kSrc =
    "/nix/store/nnzvn49qiz1r42ic5k4hb921rsb0i5vd-d4-src.txt";

std::string replaced(std::string s, const std::string& from,
                     const std::string& to) {
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

/// Parses `text` and returns the FormatError message ("" if it parsed).
std::string parseError(const std::string& text) {
  try {
    parseDerivation(StoreDir(), text, "simple", "test.drv");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(DerivationParse, AcceptsTheVectorText) {
  EXPECT_EQ(parseError(kSimple), "");
  EXPECT_EQ(printDerivation(StoreDir(),
                            parseDerivation(StoreDir(), kSimple, "simple")),
            kSimple);
}

struct BadCase {
  std::string text;
  std::string message;  ///< expected substring of the error
};

TEST(DerivationParse, RejectsMalformedInputWithClearErrors) {
  std::string srcs = R"(,[],[],"x86_64)";
  std::vector<BadCase> cases = {
      {"",
       "unexpected end of input: expected 'D', found end of input at byte 0"},
      {kSimple.substr(0, 60),
       "unexpected end of input inside a string at byte 60"},
      {kSimple.substr(0, kSimple.size() - 1),
       "unexpected end of input: expected ')'"},
      {replaced(kSimple, "Derive(", "Derivx("),
       "unexpected token: expected 'e', found 'x' at byte 5"},
      {replaced(kSimple, "echo hello", "echo \\q"),
       "invalid escape sequence: '\\' followed by 'q' at byte 120"},
      {replaced(kSimple, "echo hello", "echo\nhello"),
       "unescaped control character"},
      {kSimple + "\n", "trailing garbage after the derivation (1 bytes)"},
      {kSimple + ")", "trailing garbage"},
      {replaced(kSimple, R"([("out",")", R"([("zz","","",""),("out",")"),
       "unsorted output 'out'"},
      {replaced(kSimple, R"([("out",")", R"([("out","","",""),("out",")"),
       "duplicate output 'out'"},
      {replaced(kSimple, R"(("name","simple"))",
                R"(("name","simple"),("name","x"))"),
       "duplicate environment variable 'name'"},
      {replaced(kSimple, R"(("builder","/bin/sh"),)", "") + "",
       ""},  // placeholder, replaced below
      {replaced(kSimple, srcs, R"(,[],["/nix/store/short-src"],"x86_64)"),
       "invalid input source"},
      {replaced(kSimple, srcs,
                ",[],[\"/tmp/" + kSrc.substr(11) + "\"],\"x86_64"),
       "is not in the Nix store /nix/store"},
      {replaced(kSimple, srcs,
                ",[],[\"" + kSrc + "\",\"" + kSrc + "\"],\"x86_64"),
       "duplicate input source"},
      {replaced(kSimple, srcs, ",[(\"" + kSrc + "\",[\"out\"])],[],\"x86_64"),
       "does not end in .drv"},
      {replaced(kSimple, "\"" + kOutPath + "\",\"\",\"\"",
                "\"/nix/store/x\",\"\",\"\""),
       "invalid output path"},
      {replaced(kSimple, R"("","")],[])", R"("sha256","abc")],[])"),
       "is not lowercase base16 sha256"},
      {replaced(kSimple, R"("","")],[])", R"("sha257","abc")],[])"),
       "unknown hash algorithm 'sha257'"},
      {replaced(kSimple, R"("","")],[])", R"("","abc")],[])"),
       "has a hash but no hash algorithm"},
      {replaced(
           kSimple,
           R"([("out","/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple","","")])",
           "[]"),
       "derivation has no outputs"},
      {replaced(kSimple, R"([("out",")", R"([("drv",")"),
       "output name 'drv' is not allowed"},
      {replaced(kSimple, R"("x86_64-linux","/bin/sh")",
                R"("x86_64-linux" "/bin/sh")"),
       "unexpected token: expected ','"},
  };
  // Unsorted env keys (swap the first two entries).
  cases[11] = {replaced(kSimple, R"(("builder","/bin/sh"),("name","simple"))",
                        R"(("name","simple"),("builder","/bin/sh"))"),
               "unsorted environment variable 'builder'"};
  for (auto& c : cases) {
    std::string err = parseError(c.text);
    EXPECT_NE(err.find(c.message), std::string::npos)
        << "input: " << c.text << "\nerror: " << err
        << "\nexpected: " << c.message;
    EXPECT_TRUE(err.starts_with("test.drv: ")) << err;
  }
}

TEST(DerivationParse, RejectsAbsurdSizes) {
  std::string big(kMaxDerivationSize + 1, ' ');
  EXPECT_NE(parseError(big).find("exceeds the derivation size limit"),
            std::string::npos);
}

TEST(DerivationParse, ReadFileErrors) {
  StoreDir sd;
  TempDir tmp;
  EXPECT_THROW(readDerivationFile(sd, tmp.path() + "/missing.drv"), SysError);
  writeFile(tmp.path() + "/x.txt", kSimple);
  EXPECT_THROW(readDerivationFile(sd, tmp.path() + "/x.txt"), FormatError);
  writeFile(tmp.path() + "/bad.drv", kSimple + "x");
  try {
    readDerivationFile(sd, tmp.path() + "/bad.drv");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(
        std::string(e.what()).find(tmp.path() + "/bad.drv: trailing garbage"),
        std::string::npos)
        << e.what();
  }
}

// Robustness: every proper prefix is rejected, and every single-byte
// mutation is either rejected with a FormatError or parses into something
// that prints back to exactly the mutated bytes (only canonical text is
// accepted).
TEST(DerivationParse, PrefixesAndMutationsNeverCrashOrDrift) {
  StoreDir sd;
  std::string text =
      readFile(drvVector("store/37i1xg7ms9v8hjqm027jsiaqj36v6dsd-chain-c.drv"));
  for (size_t n = 0; n < text.size(); ++n)
    EXPECT_THROW(parseDerivation(sd, text.substr(0, n), "c"), FormatError) << n;
  size_t accepted = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : std::string("\"\\,()[]xa0\n\x01", 12)) {
      std::string m = text;
      if (m[i] == c) continue;
      m[i] = c;
      try {
        Derivation d = parseDerivation(sd, m, "c");
        EXPECT_EQ(printDerivation(sd, d), m) << i;
        ++accepted;
      } catch (const FormatError&) {
      }
    }
  }
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace kiln::store

// Fixed-output content checks and CA fields against vectors made by real
// Nix 2.8 (tests/data/fod/gen.sh: `nix-store --add-fixed`, `nix path-info
// --json`, `nix-store --query --hash` on a chroot store), NAR scanning, and
// the store checking CA fields when it registers a path.
#include "kiln/store/content_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "local_store_fixture.h"
#include "test_support.h"

namespace kiln::store {
namespace {

std::string fodDir() {
  return test::sourceDir() + "/tests/data/fod";
}

struct FodRow {
  std::string name, mode, algo, b16, nix32, b64, sri, path, ca, narHash;
};

std::vector<FodRow> fodRows() {
  std::ifstream in(fodDir() + "/fod.tsv");
  std::string line;
  std::getline(in, line);  // header
  std::vector<FodRow> rows;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    FodRow r;
    for (auto* s : {&r.name, &r.mode, &r.algo, &r.b16, &r.nix32, &r.b64, &r.sri,
                    &r.path, &r.ca, &r.narHash})
      std::getline(f, *s, '\t');
    rows.push_back(r);
  }
  return rows;
}

std::string prefix(const FodRow& r) {
  return r.mode == "recursive" ? "r:" : "";
}

// Every row: each encoding of the declared hash, as a .drv or an
// `outputHash` attribute may hold it, gives Nix's path and CA field.
TEST(ContentCheck, FixedOutputsMatchNix) {
  auto rows = fodRows();
  ASSERT_EQ(rows.size(), 20u);
  StoreDir sd;
  for (auto& r : rows) {
    SCOPED_TRACE(r.name + " " + r.mode + " " + r.algo);
    std::string nar = readFile(fodDir() + "/" + r.name + ".nar");
    EXPECT_EQ(hashString(HashAlgo::kSha256, nar).toNix32(), r.narHash);
    for (auto& h : {r.b16, r.nix32, r.b64, r.sri}) {
      DerivationOutput out{std::nullopt, prefix(r) + r.algo, h};
      StringSource src(nar);
      EXPECT_EQ(checkFixedOutputNar(src, out, "output"), r.ca);
    }
    DerivationOutput hex{std::nullopt, prefix(r) + r.algo, r.b16};
    EXPECT_EQ(sd.printPath(fixedOutputPath(sd, r.name, hex)), r.path);
    // As makeFixedOutput writes it into a .drv (base16).
    auto drvOut = makeFixedOutput(r.sri, "", r.mode);
    EXPECT_EQ(drvOut.hash, r.b16);
    StringSource src(nar);
    EXPECT_EQ(checkFixedOutputNar(src, drvOut, "output"), r.ca);
    EXPECT_EQ(ContentAddress::parse(r.ca).render(), r.ca);
  }
}

TEST(ContentCheck, MismatchesGiveBothHashes) {
  for (auto& r : fodRows()) {
    if (r.algo != "sha256") continue;
    SCOPED_TRACE(r.name + " " + r.mode);
    std::string nar = readFile(fodDir() + "/tool.sh.nar");
    if (r.name == "tool.sh") nar = readFile(fodDir() + "/hello.txt.nar");
    DerivationOutput out{std::nullopt, prefix(r) + r.algo, r.b16};
    StringSource src(nar);
    try {
      checkFixedOutputNar(src, out, "output 'x'");
      ADD_FAILURE();
    } catch (const ContentMismatchError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("wanted " + r.sri + ", got sha256-"), std::string::npos)
          << m;
    }
  }
  // A flat hash of a tree, a malformed hash, an unknown algorithm.
  std::string tree = readFile(fodDir() + "/tree.nar");
  StringSource src(tree);
  EXPECT_THROW(checkFixedOutputNar(
                   src, {std::nullopt, "sha256", std::string(64, '0')}, "x"),
               FormatError);
  EXPECT_THROW(fixedOutputCa({std::nullopt, "sha256", "abc"}), FormatError);
  EXPECT_THROW(fixedOutputCa({std::nullopt, "r:sha3", std::string(64, '0')}),
               FormatError);
  EXPECT_THROW(fixedOutputCa({std::nullopt, "sha256", ""}), FormatError);
}

TEST(ContentCheck, PathsOnDisk) {
  TempDir tmp;
  restorePath(tmp.path() + "/tree", *std::make_unique<StringSource>(
                                        readFile(fodDir() + "/tree.nar")));
  for (auto& r : fodRows()) {
    if (r.name != "tree") continue;
    DerivationOutput out{std::nullopt, "r:" + r.algo, r.b16};
    EXPECT_EQ(checkFixedOutputPath(tmp.path() + "/tree", out, "x"), r.ca);
  }
}

// The scanner over NAR bytes arriving in chunks of every size agrees with
// the whole-NAR scan and with the hashes.
TEST(ContentCheck, NarScanSinkAcrossChunks) {
  StoreDir sd;
  StorePath dep(std::string(32, '1') + "-dep");
  StorePath other(std::string(32, '2') + "-other");
  StringSink nar;
  dumpString("uses " + sd.printPath(dep) + " and not " + std::string(31, '2'),
             nar);
  StorePathSet cands{dep, other};
  for (size_t chunk : {1, 3, 7, 32, 33, 4096}) {
    NarScanSink s(cands, HashAlgo::kSha1);
    for (size_t i = 0; i < nar.s.size(); i += chunk)
      s.write(std::string_view(nar.s).substr(i, chunk));
    auto r = s.finish();
    EXPECT_EQ(r.references, StorePathSet{dep});
    EXPECT_EQ(r.narSize, nar.s.size());
    EXPECT_EQ(r.narHash, hashString(HashAlgo::kSha256, nar.s));
    EXPECT_EQ(*r.recursiveHash, hashString(HashAlgo::kSha1, nar.s));
  }
  std::string trailing = nar.s + "trailing";
  StringSource src(trailing);
  auto r = scanNar(src, cands);
  EXPECT_EQ(r.references, StorePathSet{dep});
  EXPECT_EQ(r.narSize, nar.s.size());
  StringSource bad(nar.s.substr(0, 50));
  EXPECT_THROW(scanNar(bad, cands), FormatError);
}

class ContentStoreTest : public testing::LocalStoreTest {};

// Registering a path with a CA field checks it on the bytes written:
// Nix's rows register with their CA; the wrong content is refused.
TEST_F(ContentStoreTest, TheStoreChecksCaFields) {
  LocalStore store(state_);
  for (auto& r : fodRows()) {
    SCOPED_TRACE(r.name + " " + r.mode + " " + r.algo);
    std::string nar = readFile(fodDir() + "/" + r.name + ".nar");
    ValidPathInfo info = infoFor(store.parsePath(r.path), nar);
    info.ca = r.ca;
    StringSource src(nar);
    store.addFromNar(info, src);
    EXPECT_EQ(store.requirePathInfo(info.path).ca, r.ca);
  }
  // hello.txt's CA for tool.sh's bytes; a CA giving another path.
  auto rows = fodRows();
  std::string nar = readFile(fodDir() + "/tool.sh.nar");
  ValidPathInfo info = infoFor(store.parsePath(rows[0].path), nar);
  info.ca = rows[0].ca;
  info.path = StorePath(std::string(32, 'x') + "-hello.txt");
  StringSource src(nar);
  EXPECT_THROW(store.addFromNar(info, src), FormatError);
  LocalStore fresh(state_ + "2");
  info.path = store.parsePath(rows[0].path);
  StringSource src2(nar);
  EXPECT_THROW(fresh.addFromNar(info, src2), ContentMismatchError);
  EXPECT_FALSE(fresh.isValid(info.path));
}

}  // namespace
}  // namespace kiln::store

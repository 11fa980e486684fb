#include "kiln/store/refs.h"

#include <gtest/gtest.h>

#include <sstream>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::store {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

StorePathSet parsePaths(const std::string& field) {
  StoreDir sd;
  StorePathSet out;
  for (auto& p : split(field)) out.insert(sd.parsePath(p));
  return out;
}

/// Scans `data` written in pieces of `chunk` bytes.
std::set<std::string> scanChunked(const std::set<std::string>& cands, std::string_view data,
                                  size_t chunk) {
  RefScanSink sink(cands);
  for (size_t i = 0; i < data.size(); i += chunk) sink.write(data.substr(i, chunk));
  return sink.found();
}

// Every row of refs/index.tsv: the candidates and the output's NAR give
// exactly the registered references, however the NAR is chunked; the same
// holds when the NAR is restored and hashed + scanned from disk.
TEST(RefsVectors, EveryRow) {
  auto rows = test::readTsv(test::vectorPath("refs/index.tsv"));
  ASSERT_EQ(rows.size(), 6u);
  StoreDir sd;
  for (size_t i = 1; i < rows.size(); ++i) {
    auto& r = rows[i];
    r.resize(4);
    StorePath out = sd.parsePath(r[1]);
    std::string nar = readFile(test::vectorPath("refs/nars/" + out.baseName() + ".nar"));
    StorePathSet cands = parsePaths(r[2]), expected = parsePaths(r[3]);
    std::set<std::string> parts;
    for (auto& c : cands) parts.insert(std::string(c.hashPart()));
    for (size_t chunk : {size_t{1}, size_t{5}, size_t{31}, size_t{32}, size_t{33},
                         size_t{4096}, nar.size()}) {
      EXPECT_EQ(selectReferences(cands, scanChunked(parts, nar, chunk)), expected)
          << r[1] << " chunk " << chunk;
    }
    TempDir tmp("refs-test");
    StringSource src(nar);
    restorePath(tmp.path() + "/o", src);
    auto res = hashAndScanPath(tmp.path() + "/o", cands);
    EXPECT_EQ(res.references, expected) << r[1];
    EXPECT_EQ(res.narHash, hashString(HashAlgo::kSha256, nar));
    EXPECT_EQ(res.narSize, nar.size());
  }
}

const std::string kA = "r4zq3683nfggrd8h6qiyddxw5v63hc3v";
const std::string kB = "ckrdyfyx6vjdwgz3rncr0zv5h74mn99y";

TEST(RefScan, FindsHashPartsAnywhereAcrossEveryBoundary) {
  std::string data = "\x01\x02/nix/store/" + kA + "-x\n" + "zzz" + kB + "zzzz";
  for (size_t chunk = 1; chunk <= data.size(); ++chunk)
    EXPECT_EQ(scanChunked({kA, kB}, data, chunk), (std::set<std::string>{kA, kB}))
        << "chunk " << chunk;
}

TEST(RefScan, NoFalsePositives) {
  std::string almost = kA.substr(0, 31) + "-" + kA.substr(1);  // split by a non-nix32 byte
  std::string broken = kA;
  broken[10] = 'e';  // 'e' is not in the alphabet
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{100}})
    EXPECT_TRUE(scanChunked({kA}, almost + broken + kB, chunk).empty());
}

TEST(RefScan, LongRunsAndManyCandidates) {
  std::set<std::string> cands;
  for (int i = 0; i < 5000; ++i) {
    std::string h = hashString(HashAlgo::kSha256, std::to_string(i)).to(HashFormat::kNix32, false);
    cands.insert(h.substr(0, 32));
  }
  std::string pick = *std::next(cands.begin(), 1234);
  cands.insert(kA);
  std::string data(10000, 'a');
  data += pick + std::string(100, '0') + kA.substr(0, 20);
  for (size_t chunk : {size_t{3}, size_t{4096}})
    EXPECT_EQ(scanChunked(cands, data, chunk), std::set<std::string>{pick});
}

TEST(RefScan, RejectsBadCandidates) {
  EXPECT_THROW(RefScanSink(std::set<std::string>{"short"}), FormatError);
  EXPECT_THROW(RefScanSink(std::set<std::string>{std::string(32, 'e')}), FormatError);
}

}  // namespace
}  // namespace kiln::store

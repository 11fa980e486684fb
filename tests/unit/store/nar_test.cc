#include "kiln/store/nar.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::store {
namespace {

std::string narVector(const std::string& name) {
  return readFile(test::vectorPath("nar/" + name + ".nar"));
}

/// Recreates the vector trees with the spec's own script.
class NarTrees : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = test::run({"sh", test::vectorPath("nar/make-trees.sh"), trees_});
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  TempDir tmp_{"nar-test"};
  std::string trees_ = tmp_.path() + "/trees";
};

std::string dump(const std::string& path) {
  StringSink s;
  dumpPath(path, s);
  return s.s;
}

TEST_F(NarTrees, EveryVectorByteForByte) {
  auto rows = test::readTsv(test::vectorPath("nar/index.tsv"));
  ASSERT_EQ(rows.size(), 7u);
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& name = rows[i][0];
    std::string nar = dump(trees_ + "/" + name);
    EXPECT_EQ(nar, narVector(name)) << name;
    EXPECT_EQ(std::to_string(nar.size()), rows[i][1]) << name;
    EXPECT_EQ(hashString(HashAlgo::kSha256, nar).toHex(), rows[i][2]) << name;
    EXPECT_EQ(hashString(HashAlgo::kSha256, nar).to(HashFormat::kSri), rows[i][4]);
  }
}

TEST(Nar, DumpStringIsAFlatFile) {
  StringSink s;
  dumpString("hello", s);
  EXPECT_EQ(s.s, narVector("t1-file"));
  StringSink e;
  dumpString("", e);
  EXPECT_EQ(e.s, narVector("t3-empty"));
}

TEST_F(NarTrees, FilterLeavesOutEntries) {
  StringSink s;
  dumpPath(trees_ + "/t5-tree", s, [](const std::string& p) {
    return p.find("/sub") == std::string::npos && baseNameOf(p) != "run.sh";
  });
  std::string nar = s.s;
  EXPECT_EQ(nar.find("deeper"), std::string::npos);
  EXPECT_EQ(nar.find("run.sh"), std::string::npos);
  EXPECT_NE(nar.find("odd.txt"), std::string::npos);
}

TEST_F(NarTrees, UnsupportedFileTypeNamesThePath) {
  std::string fifo = tmp_.path() + "/dir/pipe";
  createDirs(tmp_.path() + "/dir");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    dump(tmp_.path() + "/dir");
    FAIL() << "FIFO accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fifo), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
  }
}

TEST_F(NarTrees, ExecutableIffOwnerExecuteBit) {
  std::string f = tmp_.path() + "/x";
  writeFile(f, "#!/bin/sh\necho hi\n");
  ::chmod(f.c_str(), 0644 | S_IXGRP | S_IXOTH);
  EXPECT_EQ(dump(f).find("executable"), std::string::npos);
  ::chmod(f.c_str(), 0744);
  EXPECT_EQ(dump(f), narVector("t2-exec"));
}

// The POSIX reader insists on the size it was given (what lstat said): a
// file that changed size in between is an error naming it, never a NAR whose
// length fields disagree with its contents.
TEST_F(NarTrees, FileThatChangedSizeIsAnError) {
  std::string f = trees_ + "/t5-tree/odd.txt";
  for (uint64_t size : {uint64_t{16}, uint64_t{18}, uint64_t{0}}) {
    StringSink s;
    try {
      realNarFs().readFile(f, size, s);
      FAIL() << "size " << size << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(size < 17 ? "grew" : "shrank"), std::string::npos)
          << e.what();
    }
  }
  StringSink ok;
  realNarFs().readFile(f, 17, ok);
  EXPECT_EQ(ok.s, "seventeen bytes!\n");
}

/// An in-memory tree behind NarFs: proves dumpPath uses only the interface.
class FakeFs : public NarFs {
 public:
  struct Node {
    NarType type;
    std::string data;  // contents or target
    bool exec = false;
  };
  std::map<std::string, Node> nodes;

  Stat stat(const std::string& p) override {
    auto& n = at(p);
    return {n.type, n.exec, n.data.size()};
  }
  std::vector<std::string> readDirectory(const std::string& p) override {
    std::vector<std::string> out;
    for (auto& [k, v] : nodes)  // reverse order to prove dumpPath sorts
      if (k.size() > p.size() + 1 && k.compare(0, p.size() + 1, p + "/") == 0 &&
          k.find('/', p.size() + 1) == std::string::npos)
        out.insert(out.begin(), k.substr(p.size() + 1));
    return out;
  }
  std::string readLink(const std::string& p) override { return at(p).data; }
  void readFile(const std::string& p, uint64_t size, Sink& sink) override {
    auto& d = at(p).data;
    EXPECT_EQ(size, d.size());
    for (size_t i = 0; i < d.size(); i += 3) sink.write(std::string_view(d).substr(i, 3));
  }

 private:
  Node& at(const std::string& p) {
    auto it = nodes.find(p);
    if (it == nodes.end()) throw Error("no such fake path " + p);
    return it->second;
  }
};

TEST(Nar, FakeTreeMatchesT5Vector) {
  FakeFs fs;
  using T = NarType;
  fs.nodes = {{"t", {T::kDirectory, ""}},
              {"t/sub", {T::kDirectory, ""}},
              {"t/sub/deeper", {T::kDirectory, ""}},
              {"t/emptydir", {T::kDirectory, ""}},
              {"t/eight.txt", {T::kRegular, "eight!!\n"}},
              {"t/odd.txt", {T::kRegular, "seventeen bytes!\n"}},
              {"t/empty", {T::kRegular, ""}},
              {"t/run.sh", {T::kRegular, "#!/bin/sh\nexit 0\n", true}},
              {"t/link-to-odd", {T::kSymlink, "odd.txt"}},
              {"t/abs-link", {T::kSymlink, "/nix/store/does-not-exist"}},
              {"t/sub/deeper/n.txt", {T::kRegular, "nested\n"}},
              {"t/sub/B", {T::kRegular, "B"}},
              {"t/sub/a", {T::kRegular, "a"}},
              {"t/sub/a-b", {T::kRegular, "dash"}},
              {"t/sub/a.b", {T::kRegular, "dot"}}};
  StringSink s;
  dumpPath("t", s, {}, fs);
  EXPECT_EQ(s.s, narVector("t5-tree"));
}

/// Records visitor calls as text.
class Recorder : public NarVisitor {
 public:
  std::string log;
  void createDirectory(const std::string& p) override { log += "dir " + p + "\n"; }
  void closeDirectory() override { log += "end\n"; }
  void createRegularFile(const std::string& p, bool x, uint64_t n) override {
    log += "file " + p + (x ? " x " : " ") + std::to_string(n) + "\n";
  }
  void receiveContents(std::string_view d) override { log += "data " + std::string(d) + "\n"; }
  void closeRegularFile() override { log += "close\n"; }
  void createSymlink(const std::string& p, const std::string& t) override {
    log += "link " + p + " " + t + "\n";
  }
};

TEST(Nar, ParserReportsStructureInOrder) {
  std::string nar = narVector("t5-tree");
  StringSource src(nar);
  Recorder r;
  EXPECT_EQ(parseNar(src, r), nar.size());
  EXPECT_EQ(r.log,
            "dir \nlink abs-link /nix/store/does-not-exist\nfile eight.txt 8\ndata eight!!\n\n"
            "close\nfile empty 0\nclose\ndir emptydir\nend\nlink link-to-odd odd.txt\n"
            "file odd.txt 17\ndata seventeen bytes!\n\nclose\n"
            "file run.sh x 17\ndata #!/bin/sh\nexit 0\n\nclose\ndir sub\nfile sub/B 1\n"
            "data B\nclose\nfile sub/a 1\ndata a\nclose\nfile sub/a-b 4\ndata dash\nclose\n"
            "file sub/a.b 3\ndata dot\nclose\ndir sub/deeper\nfile sub/deeper/n.txt 7\n"
            "data nested\n\nclose\nend\nend\nend\n");
}

TEST(Nar, ParserStopsAtTheEndOfTheArchive) {
  std::string nar = narVector("t1-file") + "trailing";
  StringSource src(nar);
  Recorder r;
  EXPECT_EQ(parseNar(src, r), 120u);
  EXPECT_EQ(src.remaining(), 8u);
}

TEST_F(NarTrees, RestoreThenDumpRoundTrips) {
  for (const char* name :
       {"t1-file", "t2-exec", "t3-empty", "t4-symlink", "t5-tree", "t6-emptydir"}) {
    std::string nar = narVector(name);
    StringSource src(nar);
    std::string out = tmp_.path() + "/restored-" + name;
    EXPECT_EQ(restorePath(out, src), nar.size());
    EXPECT_EQ(dump(out), nar) << name;
  }
  struct stat st;
  ASSERT_EQ(::stat((tmp_.path() + "/restored-t5-tree/run.sh").c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR);
  ASSERT_EQ(::stat((tmp_.path() + "/restored-t5-tree/odd.txt").c_str(), &st), 0);
  EXPECT_FALSE(st.st_mode & S_IXUSR);
  ASSERT_EQ(::lstat((tmp_.path() + "/restored-t4-symlink").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST(Nar, CopyNarCopiesExactlyAndValidates) {
  std::string nar = narVector("t5-tree");
  std::string input = nar + "after";
  StringSource src(input);
  StringSink out;
  EXPECT_EQ(copyNar(src, out), nar.size());
  EXPECT_EQ(out.s, nar);
  std::string bad = nar.substr(0, nar.size() - 1);
  StringSource badSrc(bad);
  StringSink badOut;
  EXPECT_THROW(copyNar(badSrc, badOut), FormatError);
}

TEST_F(NarTrees, RestoreRefusesAnExistingTarget) {
  std::string nar = narVector("t1-file");
  StringSource src(nar);
  std::string out = tmp_.path() + "/exists";
  writeFile(out, "keep me");
  EXPECT_THROW(restorePath(out, src), Error);
  EXPECT_EQ(readFile(out), "keep me");
}

}  // namespace
}  // namespace kiln::store

#include "kiln/store/nar_walker.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>

#include "kiln/common/background_sink.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/hash.h"
#include "kiln/store/nar.h"
#include "test_support.h"

namespace kiln::store {
namespace {

using Kind = NarWalkItem::Kind;
using namespace std::chrono_literals;

/// Open descriptors of this process.
size_t openFds() {
  size_t n = 0;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir("/proc/self/fd"), ::closedir);
  while (::readdir(d.get())) ++n;
  return n;
}

std::string dumpSequential(const std::string& path) {
  StringSink s;
  dumpPath(path, s);
  return s.s;
}

std::string dumpAhead(const std::string& path, size_t capacity) {
  StringSink s;
  dumpPathAhead(path, s, capacity);
  return s.s;
}

/// "kind name" of every item, in order ("D", "R", "L", "E").
std::vector<std::string> walkAll(const std::string& root,
                                 size_t capacity = 64) {
  NarTreeWalker w(root, capacity);
  std::vector<std::string> out;
  NarWalkItem item;
  while (w.next(item)) {
    const char* k = item.kind == Kind::kDirectory ? "D"
                    : item.kind == Kind::kRegular ? "R"
                    : item.kind == Kind::kSymlink ? "L"
                                                  : "E";
    out.push_back(k + (" " + item.name));
    if (item.kind == Kind::kRegular) {
      EXPECT_TRUE(item.fd) << item.name;
    }
  }
  return out;
}

class NarWalker : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = test::run({"sh", test::vectorPath("nar/make-trees.sh"), trees_});
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  /// A directory `dir` holding regular files a, b, c, d.
  std::string fourFiles() {
    std::string dir = tmp_.path() + "/four";
    createDirs(dir);
    for (const char* n : {"a", "b", "c", "d"}) writeFile(dir + "/" + n, n);
    return dir;
  }
  TempDir tmp_{"nar-walker-test"};
  std::string trees_ = tmp_.path() + "/trees";
};

TEST_F(NarWalker, EveryVectorByteForByteAtEveryCapacity) {
  auto rows = test::readTsv(test::vectorPath("nar/index.tsv"));
  ASSERT_EQ(rows.size(), 7u);
  for (size_t capacity : {1, 2, 5, 64}) {
    for (size_t i = 1; i < rows.size(); ++i) {
      std::string nar = dumpAhead(trees_ + "/" + rows[i][0], capacity);
      EXPECT_EQ(hashString(HashAlgo::kSha256, nar).toHex(), rows[i][2])
          << rows[i][0] << " capacity " << capacity;
    }
  }
}

TEST_F(NarWalker, ItemsComeInNarOrder) {
  EXPECT_EQ(
      walkAll(trees_ + "/t5-tree"),
      (std::vector<std::string>{
          "D ", "L abs-link", "R eight.txt", "R empty", "D emptydir", "E ",
          "L link-to-odd", "R odd.txt", "R run.sh", "D sub", "R B", "R a",
          "R a-b", "R a.b", "D deeper", "R n.txt", "E ", "E ", "E "}));
  EXPECT_EQ(walkAll(trees_ + "/t1-file"), std::vector<std::string>{"R "});
  EXPECT_EQ(walkAll(trees_ + "/t4-symlink"), std::vector<std::string>{"L "});
}

// A tree with what the vectors lack: many entries, bytes >= 0x80 in names,
// a long symlink target, files larger than a read chunk and the ring, and
// directories deeper than the walker keeps open.
TEST_F(NarWalker, LargeAndDeepTreeMatchesTheSequentialWriter) {
  std::string root = tmp_.path() + "/big";
  std::string deep = root + "/deep";
  for (int i = 0; i < 40; ++i) deep += "/d" + std::to_string(i);
  createDirs(deep);
  writeFile(deep + "/leaf", "bottom");
  for (int i = 0; i < 300; ++i)
    writeFile(root + "/f" + std::to_string(i), std::to_string(i));
  writeFile(root + "/\xc3\xa9t\xc3\xa9", "utf-8 name");
  writeFile(root + "/Zed", "upper");
  writeFile(root + "/large", std::string(3 << 20, 'x') + "end");
  ASSERT_EQ(
      ::symlink(std::string(1000, 'y').c_str(), (root + "/long-link").c_str()),
      0);
  ASSERT_EQ(::chmod((root + "/f7").c_str(), 0755), 0);
  std::string expected = dumpSequential(root);
  for (size_t capacity : {1, 3, 64})
    EXPECT_EQ(dumpAhead(root, capacity), expected);
  // Through a lending sink (reads land in the ring), as `kiln store hash`.
  HashingSink hashed(HashAlgo::kSha256);
  {
    BackgroundSink bg(hashed, 64 << 10, 4);
    dumpPathAhead(root, bg, 8);
    bg.finish();
  }
  EXPECT_EQ(hashed.finish().first, hashString(HashAlgo::kSha256, expected));
}

TEST_F(NarWalker, OpenFilesStayBoundedWhileTheConsumerWaits) {
  std::string dir = tmp_.path() + "/many";
  createDirs(dir);
  for (int i = 0; i < 200; ++i) writeFile(dir + "/f" + std::to_string(i), "x");
  size_t before = openFds();
  constexpr size_t kCapacity = 8;
  NarTreeWalker w(dir, kCapacity);
  ASSERT_TRUE(test::pollUntil([&] { return w.pending() == kCapacity; }, 10s));
  // The walker is blocked: its queue is full and nothing more arrives.
  EXPECT_EQ(w.pending(), kCapacity);
  // The queue, the walker's batch and the item it holds, and the directory.
  EXPECT_LE(openFds(), before + kCapacity + kCapacity / 4 + 1 + 1);
  NarWalkItem item;
  size_t files = 0;
  while (w.next(item)) files += item.kind == Kind::kRegular;
  EXPECT_EQ(files, 200u);
}

TEST_F(NarWalker, DestructorStopsABlockedWalkAndClosesItsFiles) {
  std::string dir = fourFiles();
  size_t before = openFds();
  {
    NarTreeWalker w(dir, 1);
    ASSERT_TRUE(test::pollUntil([&] { return w.pending() == 1; }, 10s));
  }
  EXPECT_EQ(openFds(), before);
}

TEST_F(NarWalker, UnsupportedTypeArrivesInPlaceNamingThePath) {
  std::string dir = fourFiles();
  ASSERT_EQ(::unlink((dir + "/c").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/c").c_str(), 0600), 0);
  NarTreeWalker w(dir, 1);
  NarWalkItem item;
  std::vector<std::string> seen;
  try {
    while (w.next(item)) seen.push_back(item.name);
    FAIL() << "FIFO accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/c"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"", "a", "b"}));
  EXPECT_THROW(w.next(item), Error);  // and again
}

// With capacity 1 the walker has listed the directory and opened "a" but
// cannot go on before the consumer takes the root: what happens to "c" now
// is what the walker finds when it gets there.
class NarWalkerRace : public NarWalker {
 protected:
  std::string walkAfter(
      const std::function<void(const std::string& c)>& change) {
    std::string dir = fourFiles();
    NarTreeWalker w(dir, 1);
    EXPECT_TRUE(test::pollUntil([&] { return w.pending() == 1; }, 10s));
    change(dir + "/c");
    NarWalkItem item;
    std::string kinds;
    while (w.next(item))
      kinds += item.kind == Kind::kRegular     ? 'R'
               : item.kind == Kind::kSymlink   ? 'L'
               : item.kind == Kind::kDirectory ? 'D'
                                               : 'E';
    return kinds;
  }
};

TEST_F(NarWalkerRace, VanishedFileIsAnErrorNamingIt) {
  try {
    walkAfter([](const std::string& c) { ASSERT_EQ(::unlink(c.c_str()), 0); });
    FAIL() << "vanished file not reported";
  } catch (const SysError& e) {
    EXPECT_NE(std::string(e.what()).find("/four/c'"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.errNo(), ENOENT) << e.what();
  }
}

TEST_F(NarWalkerRace, FileReplacedBySymlinkOrDirectoryIsArchivedAsItIsNow) {
  EXPECT_EQ(walkAfter([](const std::string& c) {
              ASSERT_EQ(::unlink(c.c_str()), 0);
              ASSERT_EQ(::symlink("a", c.c_str()), 0);
            }),
            "DRRLRE");
  EXPECT_EQ(walkAfter([](const std::string& c) {
              ASSERT_EQ(::unlink(c.c_str()), 0);
              ASSERT_EQ(::mkdir(c.c_str(), 0755), 0);
            }),
            "DRRDERE");
}

TEST_F(NarWalker, UnreadableDirectoryIsAnErrorNamingIt) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every directory";
  std::string dir = fourFiles() + "/locked";
  createDirs(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0), 0);
  try {
    dumpAhead(tmp_.path() + "/four", 4);
    FAIL() << "unreadable directory accepted";
  } catch (const SysError& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
    EXPECT_EQ(e.errNo(), EACCES);
  }
  ::chmod(dir.c_str(), 0700);
}

TEST_F(NarWalker, MissingRootIsAnErrorNamingIt) {
  try {
    dumpAhead(tmp_.path() + "/nothing", 4);
    FAIL() << "missing root accepted";
  } catch (const SysError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp_.path() + "/nothing"),
              std::string::npos);
  }
}

/// Fails after `limit` bytes, as a full disk or a closed pipe would.
class FailingSink : public Sink {
 public:
  explicit FailingSink(size_t limit) : limit_(limit) {}
  void write(std::string_view data) override {
    if (data.size() > limit_) throw std::runtime_error("sink full");
    limit_ -= data.size();
  }

 private:
  size_t limit_;
};

TEST_F(NarWalker, FailingSinkStopsTheWalkAndClosesEverything) {
  std::string dir = tmp_.path() + "/many";
  createDirs(dir);
  for (int i = 0; i < 100; ++i) writeFile(dir + "/f" + std::to_string(i), "x");
  size_t before = openFds();
  FailingSink sink(1000);
  EXPECT_THROW(dumpPathAhead(dir, sink, 4), std::runtime_error);
  EXPECT_EQ(openFds(), before);
}

}  // namespace
}  // namespace kiln::store

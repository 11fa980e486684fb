// Hostile and malformed NARs: each must fail with a precise FormatError,
// before the visitor sees the bad item, and restore must leave nothing behind.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <random>
#include <utility>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/nar.h"
#include "test_support.h"

namespace kiln::store {
namespace {

std::string u64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

std::string tok(std::string_view s) {
  return u64(s.size()) + std::string(s) + std::string((8 - s.size() % 8) % 8, '\0');
}

std::string file(std::string_view contents, bool exec = false) {
  return tok("(") + tok("type") + tok("regular") +
         (exec ? tok("executable") + tok("") : "") + tok("contents") + tok(contents) +
         tok(")");
}

std::string link(std::string_view target) {
  return tok("(") + tok("type") + tok("symlink") + tok("target") + tok(target) + tok(")");
}

std::string dir(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string s = tok("(") + tok("type") + tok("directory");
  for (auto& [name, node] : entries)
    s += tok("entry") + tok("(") + tok("name") + tok(name) + tok("node") + node + tok(")");
  return s + tok(")");
}

std::string nar(const std::string& node) { return tok("nix-archive-1") + node; }

/// Parses `data`; returns the FormatError message ("" if it parsed).
std::string parseError(const std::string& data, const NarLimits& lim = {},
                       std::string* log = nullptr) {
  struct Log : NarVisitor {
    std::string s;
    void createDirectory(const std::string& p) override { s += "d:" + p + ";"; }
    void createRegularFile(const std::string& p, bool, uint64_t) override {
      s += "f:" + p + ";";
    }
    void receiveContents(std::string_view) override {}
    void createSymlink(const std::string& p, const std::string&) override {
      s += "l:" + p + ";";
    }
  } v;
  StringSource src(data);
  std::string msg;
  try {
    parseNar(src, v, lim);
  } catch (const FormatError& e) {
    msg = e.what();
  }
  if (log) *log = v.s;
  return msg;
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(NarMalformed, WellFormedBuilderOutputParses) {
  EXPECT_EQ(parseError(nar(dir({{"a", file("x", true)}, {"b", link("a")}}))), "");
  EXPECT_EQ(nar(file("hello")), readFile(test::vectorPath("nar/t1-file.nar")));
}

TEST(NarMalformed, BadMagic) {
  EXPECT_CONTAINS(parseError(tok("nix-archive-2") + file("x")),
                  "NAR byte 0: expected 'nix-archive-1' (archive magic), got 'nix-archive-2'");
  EXPECT_CONTAINS(parseError(""), "NAR byte 0: archive is truncated");
}

TEST(NarMalformed, EveryTruncationIsReported) {
  std::string full = readFile(test::vectorPath("nar/t5-tree.nar"));
  for (size_t len = 0; len < full.size(); ++len) {
    std::string msg = parseError(full.substr(0, len));
    EXPECT_CONTAINS(msg, "archive is truncated");
    EXPECT_CONTAINS(msg, "NAR byte " + std::to_string(len) + ":");
  }
}

TEST(NarMalformed, NonZeroPadding) {
  std::string n = nar(file("hello"));
  std::string a = n;
  a[21] = 1;  // padding after "nix-archive-1"
  EXPECT_CONTAINS(parseError(a), "NAR byte 21: non-zero padding after token");
  std::string b = n;
  b[102] = 'x';  // padding after the contents "hello" (bytes 96..100)
  EXPECT_CONTAINS(parseError(b), "NAR byte 102: non-zero padding after file contents");
}

TEST(NarMalformed, UnknownTokensAndTypes) {
  EXPECT_CONTAINS(parseError(tok("nix-archive-1") + tok("(") + tok("tipe")),
                  "NAR byte 40: expected 'type', got 'tipe'");
  EXPECT_CONTAINS(parseError(nar(tok("(") + tok("type") + tok("fifo") + tok(")"))),
                  "NAR byte 56: unknown node type 'fifo'");
  EXPECT_CONTAINS(
      parseError(nar(tok("(") + tok("type") + tok("regular") + tok("executable") +
                     tok("yes") + tok("contents") + tok("") + tok(")"))),
      "expected '' after 'executable', got 'yes'");
  EXPECT_CONTAINS(parseError(nar(tok("(") + tok("type") + tok("regular") + tok("size"))),
                  "expected 'executable' or 'contents', got 'size'");
  EXPECT_CONTAINS(parseError(nar(tok("(") + tok("type") + tok("directory") + tok("extra"))),
                  "expected 'entry' or ')', got 'extra'");
  EXPECT_CONTAINS(parseError(nar(tok("(") + tok("type") + tok("symlink") + tok("target") +
                                 tok("t") + tok("more"))),
                  "expected ')' (node end), got 'more'");
  // A long token where a keyword belongs is rejected without reading it.
  EXPECT_CONTAINS(parseError(tok("nix-archive-1") + u64(uint64_t{1} << 62)),
                  "NAR byte 24: expected '(' (node start), got a token of 4611686018427387904 bytes");
  EXPECT_CONTAINS(parseError(tok("x\x01y")), "got 'x\\x01y'");
}

TEST(NarMalformed, UnsortedAndDuplicateEntries) {
  std::string log;
  EXPECT_CONTAINS(parseError(nar(dir({{"b", file("")}, {"a", file("")}})), {}, &log),
                  "entry 'a' is not sorted after 'b'");
  EXPECT_EQ(log, "d:;f:b;");  // the bad entry never reached the visitor
  EXPECT_CONTAINS(parseError(nar(dir({{"a", file("")}, {"a", file("")}})), {}, &log),
                  "duplicate entry 'a'");
  EXPECT_EQ(log, "d:;f:a;");
  EXPECT_CONTAINS(parseError(nar(dir({{"a", file("")}, {"B", file("")}}))),
                  "entry 'B' is not sorted after 'a'");
}

TEST(NarMalformed, BadNames) {
  for (auto [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "empty entry name"},
           {".", "entry name '.' is not allowed"},
           {"..", "entry name '..' is not allowed"},
           {"a/b", "entry name 'a/b' contains '/'"},
           {"/", "entry name '/' contains '/'"},
           {std::string("a\0b", 3), "entry name 'a\\x00b' contains a NUL byte"}}) {
    std::string log;
    std::string msg = parseError(nar(dir({{name, file("x")}})), {}, &log);
    EXPECT_CONTAINS(msg, "NAR byte 128: " + why);
    EXPECT_EQ(log, "d:;");
  }
  EXPECT_CONTAINS(parseError(nar(link(""))), "has an empty target");
  EXPECT_CONTAINS(parseError(nar(link(std::string("a\0b", 3)))), "contains a NUL byte");
}

TEST(NarMalformed, Limits) {
  NarLimits lim;
  lim.maxNameLength = 4;
  EXPECT_CONTAINS(parseError(nar(dir({{"abcde", file("")}})), lim),
                  "NAR byte 128: entry name is 5 bytes long, more than the limit of 4");
  EXPECT_EQ(parseError(nar(dir({{"abcd", file("")}})), lim), "");
  lim = {};
  lim.maxTargetLength = 3;
  EXPECT_CONTAINS(parseError(nar(link("abcd")), lim), "symlink target is 4 bytes long");
  lim = {};
  lim.maxFileSize = 4;
  EXPECT_CONTAINS(parseError(nar(file("hello")), lim),
                  "NAR byte 88: file '' is 5 bytes, more than the limit of 4");
  lim = {};
  lim.maxDepth = 2;
  std::string deep = dir({{"a", dir({{"b", dir({{"c", file("")}})}})}});
  EXPECT_CONTAINS(parseError(nar(deep), lim), "nested deeper than the limit of 2");
  lim.maxDepth = 3;
  EXPECT_EQ(parseError(nar(deep), lim), "");
  lim = {};
  lim.maxTotalSize = 1000;
  EXPECT_CONTAINS(parseError(readFile(test::vectorPath("nar/t5-tree.nar")), lim),
                  "larger than the limit of 1000 bytes");
  // Absurd sizes with default limits fail at once, without allocating.
  EXPECT_CONTAINS(parseError(nar(tok("(") + tok("type") + tok("regular") + tok("contents") +
                                 u64(uint64_t{1} << 62))),
                  "is 4611686018427387904 bytes, more than the limit");
  NarLimits open;
  open.maxFileSize = ~uint64_t{0};
  open.maxTotalSize = ~uint64_t{0};
  EXPECT_CONTAINS(parseError(nar(tok("(") + tok("type") + tok("regular") + tok("contents") +
                                 u64(~uint64_t{0} - 3)),
                             open),
                  "length 18446744073709551612 is absurd");
  EXPECT_CONTAINS(parseError(nar(tok("(") + tok("type") + tok("directory") + tok("entry") +
                                 tok("(") + tok("name") + u64(~uint64_t{0}))),
                  "entry name is 18446744073709551615 bytes long");
}

// Random damage to a real archive: parsing either succeeds or throws
// FormatError, never anything else (deterministic seed).
TEST(NarMalformed, RandomMutationsFailCleanly) {
  std::string base = readFile(test::vectorPath("nar/t5-tree.nar"));
  std::mt19937 rng(12345);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = base;
    size_t at = rng() % m.size();
    switch (i % 3) {
      case 0: m[at] = static_cast<char>(rng() & 0xff); break;
      case 1: m.erase(at, 1 + rng() % 16); break;
      default: m.insert(at, std::string(1 + rng() % 8, static_cast<char>(rng() & 0xff)));
    }
    StringSource src(m);
    struct : NarVisitor {
      void createDirectory(const std::string&) override {}
      void createRegularFile(const std::string&, bool, uint64_t) override {}
      void receiveContents(std::string_view) override {}
      void createSymlink(const std::string&, const std::string&) override {}
    } v;
    try {
      parseNar(src, v);
    } catch (const FormatError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 2500);
}

class NarRestoreHostile : public ::testing::Test {
 protected:
  std::string restoreError(const std::string& data) {
    StringSource src(data);
    try {
      restorePath(target_, src);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  TempDir tmp_{"nar-hostile"};
  std::string outside_ = tmp_.path() + "/outside";
  std::string target_ = tmp_.path() + "/target";
  void SetUp() override { createDirs(outside_); }
};

TEST_F(NarRestoreHostile, SymlinkThenDirectoryOfTheSameNameCannotEscape) {
  std::string hostile =
      nar(dir({{"a", link(outside_)}, {"a", dir({{"x", file("pwned")}})}}));
  EXPECT_CONTAINS(restoreError(hostile), "duplicate entry 'a'");
  EXPECT_FALSE(pathExists(outside_ + "/x"));
  EXPECT_FALSE(pathExists(target_));
}

TEST_F(NarRestoreHostile, SymlinkThenFileOfTheSameNameCannotEscape) {
  std::string hostile = nar(dir({{"a", link(outside_ + "/f")}, {"a", file("pwned")}}));
  EXPECT_CONTAINS(restoreError(hostile), "duplicate entry 'a'");
  EXPECT_FALSE(pathExists(outside_ + "/f"));
  EXPECT_FALSE(pathExists(target_));
}

TEST_F(NarRestoreHostile, PathNamesCannotEscape) {
  for (std::string name : {"..", "../outside", "a/../../outside/x", "/tmp"}) {
    EXPECT_NE(restoreError(nar(dir({{name, file("pwned")}}))), "") << name;
    EXPECT_FALSE(pathExists(target_)) << name;
  }
  EXPECT_FALSE(pathExists(outside_ + "/x"));
  EXPECT_FALSE(pathExists(tmp_.path() + "/tmp"));
}

TEST_F(NarRestoreHostile, FailureHalfWayRemovesThePartialTarget) {
  std::string good = nar(dir({{"a", file("aaaa")}, {"b", dir({{"c", file("cc", true)}})}}));
  std::string cut = good.substr(0, good.size() - 20);
  EXPECT_CONTAINS(restoreError(cut), "archive is truncated");
  EXPECT_FALSE(pathExists(target_));
  std::string bad = nar(dir({{"a", file("aaaa")}, {"b", dir({{"c", file("")}})}, {"a", file("")}}));
  EXPECT_CONTAINS(restoreError(bad), "is not sorted after 'b'");
  EXPECT_FALSE(pathExists(target_));
  EXPECT_EQ(restoreError(good), "");
  EXPECT_EQ(readFile(target_ + "/b/c"), "cc");
}

// Restoring damaged archives: each attempt either yields a tree that dumps
// back to a valid NAR or leaves no target; nothing appears outside.
TEST_F(NarRestoreHostile, RandomMutationsNeverLeaveDebris) {
  std::string base = readFile(test::vectorPath("nar/t5-tree.nar"));
  std::mt19937 rng(777);
  for (int i = 0; i < 300; ++i) {
    std::string m = base;
    m[rng() % m.size()] = static_cast<char>(rng() & 0xff);
    if (restoreError(m).empty()) {
      StringSink again;
      dumpPath(target_, again);
      StringSource src(again.s);
      StringSink copy;
      EXPECT_EQ(copyNar(src, copy), again.s.size());
      deletePath(target_);
    }
    EXPECT_FALSE(pathExists(target_)) << i;
  }
  EXPECT_TRUE(std::filesystem::is_empty(outside_));
}

TEST_F(NarRestoreHostile, RootSymlinkIsCreatedNotFollowed) {
  EXPECT_EQ(restoreError(nar(link(outside_))), "");
  struct stat st;
  ASSERT_EQ(::lstat(target_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  // Restoring again over the symlink must not write through it.
  EXPECT_CONTAINS(restoreError(nar(dir({{"x", file("pwned")}}))), "already exists");
  EXPECT_FALSE(pathExists(outside_ + "/x"));
}

}  // namespace
}  // namespace kiln::store

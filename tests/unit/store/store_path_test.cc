#include "kiln/store/store_path.h"

#include <gtest/gtest.h>

#include "kiln/common/error.h"
#include "kiln/store/derivation.h"
#include "test_support.h"

namespace kiln::store {
namespace {

// Every row of store-paths.tsv: split the fingerprint into type, inner hash
// and name and recompute the path through makeStorePath.
TEST(StorePathVectors, EveryFingerprint) {
  auto rows = test::readTsv(test::vectorPath("store-paths/store-paths.tsv"));
  ASSERT_GT(rows.size(), 15u);
  StoreDir sd;
  for (size_t i = 1; i < rows.size(); ++i) {
    auto& r = rows[i];
    const std::string& fp = r[3];
    auto at = fp.find(":sha256:");
    ASSERT_NE(at, std::string::npos) << fp;
    std::string type = fp.substr(0, at);
    Hash inner = Hash::parse(fp.substr(at + 8, 64), HashAlgo::kSha256);
    EXPECT_EQ(fp.substr(at + 8 + 64), ":/nix/store:" + r[2]);
    EXPECT_EQ(sd.printPath(sd.makeStorePath(type, inner, r[2])), r[6]) << fp;
  }
}

TEST(StorePath, KnownConstructors) {
  StoreDir sd;
  auto hello = hashString(HashAlgo::kSha256, "hello");
  EXPECT_EQ(sd.printPath(sd.makeTextPath("greeting", hello, {})),
            "/nix/store/5akl8zsmda0yrr63v4khwgskih2g2hsh-greeting");
  EXPECT_EQ(sd.printPath(sd.makeFixedOutputPath("hello.txt", false, hello)),
            "/nix/store/iixxin28s82lrxs8v4lcf7nha2dkwprm-hello.txt");
  auto nar = Hash::parse("sha256:0a430879c266f8b57f4092a0f935cf3facd48bbccde5760d4748ca405171e969");
  EXPECT_EQ(sd.printPath(sd.makeFixedOutputPath("hello.txt", true, nar)),
            "/nix/store/xfp2hphvk98rkk9ywlqpp587rjdcgnc2-hello.txt");
  EXPECT_EQ(makeFixedCa(true, nar),
            "fixed:r:sha256:0sg9f58l1jj88w6pdrfdpj5x9b1zrwszk84j81zvby36q9whhhqa");
  auto masked = Hash::parse("sha256:cbd84a88dac33c14a874f676ab17db2518d565dc03e891ccf9d4be35138ea813");
  EXPECT_EQ(sd.printPath(sd.makeOutputPath("out", masked, "simple")),
            "/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple");
}

// makeStorePath's paths skip StorePath's re-check: the name is still
// refused, and what it builds parses back to itself.
TEST(StorePath, MadePathsAreCheckedOnceAndParseBack) {
  StoreDir sd;
  auto hello = hashString(HashAlgo::kSha256, "hello");
  for (const char* bad : {"", "..", "a b", "a/b"}) {
    EXPECT_THROW(sd.makeTextPath(bad, hello, {}), FormatError) << bad;
    EXPECT_THROW(sd.makeOutputPath("out", hello, bad), FormatError) << bad;
  }
  EXPECT_THROW(sd.makeOutputPath("o~", hello, "x"), FormatError);
  for (const char* name : {"x", "hello-1.0.drv", ".hidden", "a+b=c?d_e"}) {
    StorePath p = sd.makeTextPath(name, hello, {});
    EXPECT_EQ(sd.parsePath(sd.printPath(p)), p) << name;
    EXPECT_EQ(p.name(), name);
  }
}

TEST(StorePath, RejectsBadNamesAndPaths) {
  for (const char* bad : {"", ".", "..", ".-x", "..-x", "a b", "a/b", "a~", "\xc3\xa9"})
    EXPECT_THROW(checkStorePathName(bad), FormatError) << bad;
  EXPECT_THROW(checkStorePathName(std::string(212, 'a')), FormatError);
  EXPECT_NO_THROW(checkStorePathName(std::string(211, 'a')));
  EXPECT_NO_THROW(checkStorePathName(".hidden"));
  StoreDir sd;
  EXPECT_THROW(sd.parsePath("/nix/store/short-x"), FormatError);
  EXPECT_THROW(sd.parsePath("/other/5akl8zsmda0yrr63v4khwgskih2g2hsh-greeting"), FormatError);
  EXPECT_THROW(sd.parsePath("/nix/store/5akl8zsmda0yrr63v4khwgskih2g2hsh-greeting/bin"), FormatError);
  EXPECT_THROW(sd.parsePath("/nix/store/eakl8zsmda0yrr63v4khwgskih2g2hsh-greeting"), FormatError);
  // Every character outside nix32's alphabet is refused in the hash part.
  for (char c : std::string("eotuA_-.\0", 10))
    EXPECT_THROW(StorePath(std::string(31, '0') + c + "-x"), FormatError) << int(c);
  EXPECT_NO_THROW(StorePath("0123456789abcdfghijklmnpqrsvwxyz-x"));
  EXPECT_EQ(sd.toStorePath("/nix/store/5akl8zsmda0yrr63v4khwgskih2g2hsh-greeting/bin/sh").name(),
            "greeting");
}

// Each byte value, at the start, middle and end of a name and of a hash
// part, is accepted exactly when its class allows it; a refused name
// character is named in the message.
TEST(StorePath, EveryByteIsCheckedWhereverItStands) {
  const std::string nameChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-._?=";
  const std::string nix32 = "0123456789abcdfghijklmnpqrsvwxyz";
  for (int i = 0; i < 256; ++i) {
    char c = static_cast<char>(i);
    bool nameOk = nameChars.find(c) != std::string::npos;
    for (size_t at : {0, 5, 9}) {
      std::string name = "abcdefghij";
      name[at] = c;
      if (at == 0 && c == '.') continue;  // ".bcdef..." is a name of its own rules
      if (nameOk) {
        EXPECT_NO_THROW(checkStorePathName(name)) << i;
      } else {
        try {
          checkStorePathName(name);
          ADD_FAILURE() << i;
        } catch (const FormatError& e) {
          if (c) {  // what() is a C string: a NUL ends it
            EXPECT_NE(std::string(e.what()).find("illegal character '" + std::string(1, c) + "'"),
                      std::string::npos) << i;
          }
        }
      }
      std::string hash(32, '0');
      hash[at * 3] = c;
      if (nix32.find(c) != std::string::npos)
        EXPECT_NO_THROW(StorePath(hash + "-x")) << i;
      else
        EXPECT_THROW(StorePath(hash + "-x"), FormatError) << i;
    }
  }
}

TEST(StorePath, DerivationNamesLeaveRoomForDotDrv) {
  EXPECT_NO_THROW(checkDerivationName(std::string(207, 'a')));
  try {
    checkDerivationName(std::string(208, 'a'));
    ADD_FAILURE() << "a 208-byte derivation name was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(std::string(208, 'a') + ".drv' is longer than 211"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(checkDerivationName("x.drv"), FormatError);
  EXPECT_THROW(checkDerivationName("a b"), FormatError);
}

TEST(StorePath, StoreDirEntersTheHash) {
  auto hello = hashString(HashAlgo::kSha256, "hello");
  StoreDir a, b("/tmp/store");
  EXPECT_NE(a.makeTextPath("x", hello, {}).hashPart(),
            b.makeTextPath("x", hello, {}).hashPart());
}

}  // namespace
}  // namespace kiln::store

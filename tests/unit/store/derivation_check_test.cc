// Re-deriving `.drv` output paths (checkDerivationFile) and the store
// refusing a `.drv` that claims outputs its contents do not imply.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/derivation.h"
#include "kiln/store/local_store.h"
#include "local_store_fixture.h"
#include "test_support.h"

namespace kiln::store {
namespace {

std::string drvDir() { return test::vectorPath("drv/store"); }

StorePathSet referencesOf(const Derivation& d) {
  StorePathSet refs = d.inputSrcs;
  for (auto& [p, _] : d.inputDrvs) refs.insert(p);
  return refs;
}

Derivation vectorDrv(const std::string& base) {
  return readDerivationFile(StoreDir(), drvDir() + "/" + base);
}

void expectError(const std::function<void()>& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted '" << what << "'";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// Every `.drv` nix-instantiate wrote passes, inputs loaded once each.
TEST(DerivationCheck, EveryVectorDrvPasses) {
  StoreDir sd;
  DrvHashCache cache(sd, fileDrvLoader(sd, drvDir()));
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(drvDir())) {
    StorePath p(e.path().filename().string());
    auto text = readFile(e.path().string());
    auto d = checkDerivationFile(cache, p, text,
                                 referencesOf(vectorDrv(p.baseName())));
    EXPECT_TRUE(cache.outputsChecked(p.baseName()));
    EXPECT_EQ(printDerivation(sd, d), text);
    ++n;
  }
  EXPECT_EQ(n, 16u);
}

// A `.drv` claiming the output of another derivation (the attack of issue
// 11: write a .drv with toFile whose output is a popular package's path).
TEST(DerivationCheck, ClaimedOutputsAreRefusedNamingTheOutput) {
  StoreDir sd;
  DrvHashCache cache(sd, fileDrvLoader(sd, drvDir()));
  const std::string simple = "3ghsl9sd83mc26i81adpa2fzf3yw4f68-simple.drv";
  Derivation d = vectorDrv(simple);
  // Same outputs, different builder: the outputs are no longer implied.
  d.args = {"-c", "echo evil > $out"};
  std::string evil = printDerivation(sd, d);
  StorePath evilPath = derivationPath(sd, d);
  expectError(
      [&] { checkDerivationFile(cache, evilPath, evil, {}); },
      "has incorrect output 'out' "
      "'/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple', should be");
  // The output path right but env `out` wrong.
  Derivation e = vectorDrv(simple);
  e.env["out"] = "/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-other";
  expectError(
      [&] {
        checkDerivationFile(cache, derivationPath(sd, e),
                            printDerivation(sd, e), {});
      },
      "incorrect environment variable 'out'");
  // A multi-output derivation with one output swapped.
  const std::string multi = "cidn4fqvdpp71fd3gd0y748cdzn2mi23-multi-1.0.drv";
  Derivation m = vectorDrv(multi);
  m.outputs["dev"].path = m.outputs["lib"].path;
  m.env["dev"] = m.env["lib"];
  expectError(
      [&] {
        checkDerivationFile(cache, derivationPath(sd, m),
                            printDerivation(sd, m), {});
      },
      "has incorrect output 'dev'");
  EXPECT_FALSE(cache.outputsChecked(evilPath.baseName()));
}

TEST(DerivationCheck, FixedOutputPathsComeFromTheirHash) {
  StoreDir sd;
  DrvHashCache cache(sd, fileDrvLoader(sd, drvDir()));
  Derivation f = vectorDrv("grfrh0hza8hc3qlj728l7gx1sxya908r-fixed-flat.drv");
  ASSERT_TRUE(isFixedOutput(f));
  checkDerivationFile(cache, derivationPath(sd, f), printDerivation(sd, f), {});
  // Claim another hash but keep the path.
  f.outputs["out"].hash = std::string(64, 'a');
  expectError(
      [&] {
        checkDerivationFile(cache, derivationPath(sd, f),
                            printDerivation(sd, f), {});
      },
      "has incorrect output 'out'");
}

TEST(DerivationCheck, InputsChangeTheOutputs) {
  StoreDir sd;
  DrvHashCache cache(sd, fileDrvLoader(sd, drvDir()));
  const std::string b = "l587icv9rf48nkls67d34g1p68hkwbwc-chain-b.drv";
  Derivation d = vectorDrv(b);
  checkDerivationFile(cache, StorePath(b), readFile(drvDir() + "/" + b),
                      referencesOf(d));
  // Point it at another input derivation, keeping its outputs.
  d.inputDrvs.clear();
  d.inputDrvs[StorePath("3ghsl9sd83mc26i81adpa2fzf3yw4f68-simple.drv")] = {
      "out"};
  expectError(
      [&] {
        checkDerivationFile(cache, derivationPath(sd, d),
                            printDerivation(sd, d), referencesOf(d));
      },
      "has incorrect output");
}

TEST(DerivationCheck, ReferencesMustBeTheInputs) {
  StoreDir sd;
  DrvHashCache cache(sd, fileDrvLoader(sd, drvDir()));
  const std::string b = "l587icv9rf48nkls67d34g1p68hkwbwc-chain-b.drv";
  auto text = readFile(drvDir() + "/" + b);
  // The path of the bytes with these references, so only the references
  // are wrong.
  auto pathWith = [&](const StorePathSet& refs) {
    return sd.makeTextPath("chain-b.drv", hashString(HashAlgo::kSha256, text),
                           refs);
  };
  expectError([&] { checkDerivationFile(cache, pathWith({}), text, {}); },
              "but does not refer to it");
  auto refs = referencesOf(vectorDrv(b));
  refs.insert(StorePath(std::string(32, 'a') + "-extra"));
  expectError([&] { checkDerivationFile(cache, pathWith(refs), text, refs); },
              "which is not one of its inputs");
  // A path that is not the text path of the bytes (e.g. a `.drv` added as
  // a source path, or claimed under another name).
  expectError(
      [&] {
        checkDerivationFile(cache, StorePath(std::string(32, 'a') + "-chain-b.drv"),
                            text, referencesOf(vectorDrv(b)));
      },
      "is not the text path of its contents");
  expectError([&] { checkDerivationFile(cache, StorePath(b), "Derive(", {}); },
              "");
}

class DerivationStoreTest : public testing::LocalStoreTest {};

// The store checks every `.drv` it registers: single adds, batches (an
// input queued earlier in the same batch) and NAR imports.
TEST_F(DerivationStoreTest, TheStoreRefusesWrongOutputs) {
  LocalStore store(state_);
  StoreDir sd = store.storeDir();
  auto a = store.addText("a.drv", drvText(sd, "a"), {});
  {
    LocalStore::Batch batch(store);
    auto b = batch.addText(
        "b.drv", drvText(sd, "b", {}, {a}, store.physicalRoot()), {a});
    // c depends on b, queued but not valid: read from the batch.
    Derivation c = readDerivationFile(sd, store.physicalPath(a));
    c.name = "c";
    c.env["name"] = "c";
    c.inputDrvs[b] = {"out"};
    c.outputs["out"].path.reset();
    c.env["out"] = "";
    DrvHashCache hashes(sd, [&](const StorePath& p) {
      if (p == b)
        return parseDerivation(
            sd, drvText(sd, "b", {}, {a}, store.physicalRoot()), "b");
      return readDerivationFile(sd, store.physicalPath(p));
    });
    fillOutputPaths(c, hashes);
    auto cPath = batch.addText("c.drv", printDerivation(sd, c), {b});
    // A `.drv` claiming c's output with another builder.
    c.builder = "/bin/evil";
    EXPECT_THROW(batch.addText("d.drv", printDerivation(sd, c), {b}),
                 FormatError);
    batch.commit();
    EXPECT_TRUE(store.isValid(cPath));
  }
  Derivation evil = parseDerivation(sd, drvText(sd, "x"), "x");
  evil.builder = "/bin/evil";
  auto text = printDerivation(sd, evil);
  EXPECT_THROW(store.addText("x.drv", text, {}), FormatError);
  // Through a NAR (a cache import or an upload), with and without a CA.
  StorePath evilPath = derivationPath(sd, evil);
  std::string nar = narOf(text);
  auto info = infoFor(evilPath, nar);
  for (bool withCa : {false, true}) {
    if (withCa) info.ca = makeTextCa(hashString(HashAlgo::kSha256, text));
    StringSource src(nar);
    expectError([&] { store.addFromNar(info, src); },
                "has incorrect output 'out'");
  }
  EXPECT_FALSE(store.isValid(evilPath));
  for (auto& e : entries(state_ + "/store"))
    EXPECT_FALSE(e.starts_with(kStoreTempPrefix)) << e;
  // Not a derivation at all, or not a single file.
  auto junk = narOf("junk");
  auto junkInfo = infoFor(StorePath(std::string(32, 'j') + "-junk.drv"), junk);
  StringSource junkSrc(junk);
  EXPECT_THROW(store.addFromNar(junkInfo, junkSrc), FormatError);
}

// An evaluator passes its own hash cache: `.drv`s it made are not parsed
// again, yet a `.drv` it did not make is still checked.
TEST_F(DerivationStoreTest, TrustedHashesSkipTheCheck) {
  LocalStore store(state_);
  StoreDir sd = store.storeDir();
  DrvHashCache mine(sd, fileDrvLoader(sd, store.physicalRoot()));
  Derivation d = parseDerivation(sd, drvText(sd, "made"), "made");
  for (auto& [o, out] : d.outputs) out.path.reset();
  d.env["out"] = "";
  std::string aterm;
  StorePath path = mine.addDerivation(d, aterm);
  EXPECT_TRUE(mine.outputsChecked(path.baseName()));
  LocalStore::Batch batch(store);
  batch.trustHashes(&mine);
  EXPECT_EQ(batch.addText("made.drv", aterm, {}), path);
  Derivation evil = parseDerivation(sd, drvText(sd, "x"), "x");
  evil.builder = "/bin/evil";
  EXPECT_THROW(batch.addText("x.drv", printDerivation(sd, evil), {}),
               FormatError);
  batch.commit();
  EXPECT_TRUE(store.isValid(path));
}

}  // namespace
}  // namespace kiln::store

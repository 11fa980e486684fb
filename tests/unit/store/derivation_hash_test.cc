// hashDerivationModulo over synthetic graphs (memoisation, deep chains,
// cycles), fixed outputs in every notation, and filling in output paths the
// way the evaluator will call it.
#include <gtest/gtest.h>

#include <set>

#include "kiln/common/error.h"
#include "kiln/common/spin_mutex.h"
#include "kiln/store/derivation.h"
#include "test_support.h"

namespace kiln::store {
namespace {

/// An in-memory "store" of derivations with a counting loader.
struct FakeDrvStore {
  std::map<StorePath, Derivation> drvs;
  size_t calls = 0;

  DrvLoader loader() {
    return [this](const StorePath& p) {
      ++calls;
      auto it = drvs.find(p);
      if (it == drvs.end()) throw Error("no such derivation " + p.baseName());
      return it->second;
    };
  }
};

/// What the evaluator produces: outputs without paths, no output env vars.
Derivation newDrv(const std::string& name,
                  const std::vector<std::string>& outputs = {"out"}) {
  Derivation d;
  d.name = name;
  d.platform = "x86_64-linux";
  d.builder = "/bin/sh";
  d.args = {"-c", "echo " + name + " > $out"};
  d.env = {{"builder", "/bin/sh"}, {"name", name}, {"system", "x86_64-linux"}};
  for (auto& o : outputs) d.outputs[o] = {};
  return d;
}

/// Fills `d`, stores it and returns its .drv path.
StorePath add(FakeDrvStore& store, DrvHashCache& cache, Derivation d) {
  fillOutputPaths(d, cache);
  StorePath p = derivationPath(cache.storeDir(), d);
  store.drvs.emplace(p, std::move(d));
  return p;
}

TEST(DrvHash, MatchesTheSimpleVector) {
  FakeDrvStore store;
  DrvHashCache cache(StoreDir(), store.loader());
  Derivation d = newDrv("simple");
  d.args = {"-c", "echo hello > $out"};
  fillOutputPaths(d, cache);
  EXPECT_EQ(StoreDir().printPath(*d.outputs.at("out").path),
            "/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple");
  EXPECT_EQ(d.env.at("out"),
            "/nix/store/94f9f6i31zwzwbf0kclq1naqxxi4c7v9-simple");
  EXPECT_EQ(StoreDir().printPath(derivationPath(StoreDir(), d)),
            "/nix/store/3ghsl9sd83mc26i81adpa2fzf3yw4f68-simple.drv");
  EXPECT_EQ(store.calls, 0u);
}

TEST(DrvHash, GraphIsLoadedOncePerDerivation) {
  // 10,000 derivations: a chain (each depends on its predecessor, so the
  // walk is 10,000 deep) plus edges to derivations up to 50 back.
  constexpr size_t kN = 10000;
  FakeDrvStore store;
  DrvHashCache builder(StoreDir(), store.loader());
  std::vector<StorePath> paths;
  for (size_t i = 0; i < kN; ++i) {
    Derivation d = newDrv("p" + std::to_string(i),
                          i % 3 ? std::vector<std::string>{"out"}
                                : std::vector<std::string>{"dev", "out"});
    if (i > 0) d.inputDrvs[paths[i - 1]].insert("out");
    if (i > 50) d.inputDrvs[paths[i - 50 + i % 7]].insert("out");
    paths.push_back(add(store, builder, std::move(d)));
  }
  // A fresh cache hashes the whole graph from the top: one load each.
  store.calls = 0;
  DrvHashCache cache(StoreDir(), store.loader());
  Hash top = cache.hashOf(paths.back());
  EXPECT_EQ(store.calls, kN);
  EXPECT_EQ(cache.loadCount(), kN);
  EXPECT_EQ(cache.size(), kN);
  EXPECT_EQ(cache.hashOf(paths.back()), top);
  EXPECT_EQ(cache.hashOf(paths.front()), builder.hashOf(paths.front()));
  EXPECT_EQ(store.calls, kN);
  // And it agrees with the hashes seen while building.
  EXPECT_EQ(top, builder.hashOf(paths.back()));
}

TEST(DrvHash, DependencyCycleIsAnError) {
  // Forged .drv paths (content addressing makes real cycles impossible).
  StorePath a("00000000000000000000000000000000-a.drv");
  StorePath b("11111111111111111111111111111111-b.drv");
  FakeDrvStore store;
  Derivation da = newDrv("a"), db = newDrv("b");
  da.outputs["out"].path = StorePath("22222222222222222222222222222222-a");
  db.outputs["out"].path = StorePath("33333333333333333333333333333333-b");
  da.inputDrvs[b] = {"out"};
  db.inputDrvs[a] = {"out"};
  store.drvs = {{a, da}, {b, db}};
  DrvHashCache cache(StoreDir(), store.loader());
  try {
    cache.hashOf(a);
    FAIL() << "cycle not detected";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("depends on itself"),
              std::string::npos)
        << e.what();
  }
}

TEST(DrvHash, MissingInputReportsTheLoaderError) {
  FakeDrvStore store;
  DrvHashCache cache(StoreDir(), store.loader());
  Derivation d = newDrv("x");
  d.inputDrvs[StorePath("00000000000000000000000000000000-gone.drv")] = {"out"};
  EXPECT_THROW(fillOutputPaths(d, cache), Error);
}

TEST(DrvHash, FloatingInputsMakeDependantsDeferred) {
  FakeDrvStore store;
  DrvHashCache cache(StoreDir(), store.loader());
  Derivation ca = newDrv("ca");
  ca.outputs["out"].hashAlgo = "r:sha256";
  StorePath caPath = add(store, cache, ca);
  Derivation plain = newDrv("plain");
  StorePath plainPath = add(store, cache, plain);
  Derivation dep = newDrv("dep");
  dep.inputDrvs[caPath] = {"out"};
  dep.inputDrvs[plainPath] = {"out"};
  StorePath depPath = add(store, cache, dep);
  const Derivation& filled = store.drvs.at(depPath);
  EXPECT_FALSE(filled.outputs.at("out").path);
  EXPECT_EQ(filled.env.at("out"), "");
  EXPECT_EQ(derivationType(filled), DerivationType::kDeferred);
  // Deferral propagates to dependants of dependants.
  Derivation top = newDrv("top");
  top.inputDrvs[depPath] = {"out"};
  StorePath topPath = add(store, cache, top);
  EXPECT_TRUE(cache.isDeferred(caPath));
  EXPECT_TRUE(cache.isDeferred(depPath));
  EXPECT_TRUE(cache.isDeferred(topPath));
  EXPECT_FALSE(cache.isDeferred(plainPath));
  EXPECT_TRUE(store.drvs.at(plainPath).outputs.at("out").path);
}

TEST(FixedOutput, EveryNotationGivesTheSameTuple) {
  auto hex = makeFixedOutput(
      "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
      "sha256");
  EXPECT_EQ(hex.hashAlgo, "sha256");
  EXPECT_EQ(hex.hash,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  EXPECT_EQ(
      makeFixedOutput("094qif9n4cq4fdg459qzbhg1c6wywawwaaivx0k0x8xhbyx4vwic",
                      "sha256"),
      hex);
  EXPECT_EQ(makeFixedOutput(
                "sha256-LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=", ""),
            hex);
  EXPECT_EQ(
      makeFixedOutput("sha256-LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=",
                      "sha256"),
      hex);
  EXPECT_EQ(
      makeFixedOutput(
          "sha256:094qif9n4cq4fdg459qzbhg1c6wywawwaaivx0k0x8xhbyx4vwic", ""),
      hex);
  auto rec = makeFixedOutput(
      "sha256-CkMIecJm+LV/QJKg+TXPP6zUi7zN5XYNR0jKQFFx6Wk=", "", "recursive");
  EXPECT_EQ(rec.hashAlgo, "r:sha256");
  EXPECT_EQ(rec.hash,
            "0a430879c266f8b57f4092a0f935cf3facd48bbccde5760d4748ca405171e969");
}

TEST(FixedOutput, PathsForEveryAlgorithm) {
  // Rows of store-paths.tsv (made by Nix) for flat md5/sha1/sha256/sha512,
  // recursive sha1 (`output:out`) and recursive sha256 (a source path).
  StoreDir sd;
  auto path = [&](const std::string& name, const DerivationOutput& o) {
    return sd.printPath(fixedOutputPath(sd, name, o));
  };
  EXPECT_EQ(path("script.sh",
                 makeFixedOutput("46bbbe8aa98cc0714426e948474eaaf4", "md5")),
            "/nix/store/xynwfi3ilkh72v8wmnkb4hsvz70q8zcz-script.sh");
  EXPECT_EQ(
      path("hello.txt",
           makeFixedOutput("aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d", "sha1")),
      "/nix/store/bl4cpnz7cwz57jcydmc1ylp7y584axbs-hello.txt");
  EXPECT_EQ(
      path("d", makeFixedOutput("712b1fd220d57960fd4488a7f64c8d5d4e607e4a",
                                "sha1", "recursive")),
      "/nix/store/b0bfdx95lqjsm0y50ndaa13dhxmg6ihv-d");
  EXPECT_EQ(
      path("hello.txt",
           makeFixedOutput(
               "sha256-LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=", "")),
      "/nix/store/iixxin28s82lrxs8v4lcf7nha2dkwprm-hello.txt");
  EXPECT_EQ(path("hello.txt",
                 makeFixedOutput(
                     "sha256-CkMIecJm+LV/QJKg+TXPP6zUi7zN5XYNR0jKQFFx6Wk=", "",
                     "recursive")),
            "/nix/store/xfp2hphvk98rkk9ywlqpp587rjdcgnc2-hello.txt");
  auto rows = test::readTsv(test::vectorPath("store-paths/store-paths.tsv"));
  size_t sha512 = 0;
  for (auto& r : rows) {
    if (r[0] != "fixed(flat:sha512)") continue;
    std::string inner = r[1];  // fixed:out:sha512:<hex>:
    std::string hex = inner.substr(17, 128);
    EXPECT_EQ(path(r[2], makeFixedOutput(hex, "sha512")), r[6]);
    ++sha512;
  }
  EXPECT_EQ(sha512, 1u);
}

TEST(FixedOutput, BadAttributesAreRejected) {
  EXPECT_THROW(makeFixedOutput("abc", "sha256"), FormatError);
  EXPECT_THROW(
      makeFixedOutput(
          "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
          ""),
      FormatError);
  EXPECT_THROW(
      makeFixedOutput("sha256-LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=",
                      "sha1"),
      FormatError);
  EXPECT_THROW(makeFixedOutput("46bbbe8aa98cc0714426e948474eaaf4", "SHA256"),
               FormatError);
  try {
    makeFixedOutput("46bbbe8aa98cc0714426e948474eaaf4", "md5", "nar");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'outputHashMode'"),
              std::string::npos);
  }
}

TEST(FillOutputPaths, FixedOutputFromAttributes) {
  // d5-fixed.nix `rec256`, built the way the evaluator will.
  FakeDrvStore store;
  DrvHashCache cache(StoreDir(), store.loader());
  Derivation d = newDrv("fixed-rec");
  d.args = {"-c", "printf hello > $out"};
  d.outputs["out"] = makeFixedOutput(
      "sha256-CkMIecJm+LV/QJKg+TXPP6zUi7zN5XYNR0jKQFFx6Wk=", "", "recursive");
  d.env["outputHash"] = "sha256-CkMIecJm+LV/QJKg+TXPP6zUi7zN5XYNR0jKQFFx6Wk=";
  d.env["outputHashMode"] = "recursive";
  fillOutputPaths(d, cache);
  EXPECT_EQ(d.env.at("out"),
            "/nix/store/8i0haw62nw2cz1a4q5agpi6v284pm38v-fixed-rec");
  EXPECT_EQ(StoreDir().printPath(derivationPath(StoreDir(), d)),
            "/nix/store/z6fnm8yyki7gl7p3rx8knxmj2gi9ajhm-fixed-rec.drv");
  EXPECT_TRUE(isFixedOutput(d));
}

TEST(FillOutputPaths, FloatingOutputsGetPlaceholders) {
  FakeDrvStore store;
  DrvHashCache cache(StoreDir(), store.loader());
  Derivation d = newDrv("ca");
  d.outputs["out"].hashAlgo = "r:sha256";
  fillOutputPaths(d, cache);
  EXPECT_EQ(d.env.at("out"),
            "/1rz4g4znpzjwh1xymhjpm42vipw92pr73vdgl6xs1hycac8kf2n9");
  EXPECT_FALSE(d.outputs.at("out").path);
  EXPECT_EQ(derivationType(d), DerivationType::kFloatingCA);
}

TEST(FillOutputPaths, InvalidDerivationsAreRejected) {
  FakeDrvStore store;
  DrvHashCache cache(StoreDir(), store.loader());
  Derivation noOutputs = newDrv("x", {});
  EXPECT_THROW(fillOutputPaths(noOutputs, cache), FormatError);
  Derivation badName = newDrv("x.drv");
  EXPECT_THROW(fillOutputPaths(badName, cache), FormatError);
  Derivation longName = newDrv(std::string(208, 'a'));
  EXPECT_THROW(fillOutputPaths(longName, cache), FormatError);
  Derivation twoFixed = newDrv("x", {"out", "dev"});
  twoFixed.outputs["out"] =
      makeFixedOutput("46bbbe8aa98cc0714426e948474eaaf4", "md5");
  EXPECT_THROW(fillOutputPaths(twoFixed, cache), FormatError);
  Derivation fixedNotOut = newDrv("x", {"bin"});
  fixedNotOut.outputs["bin"] =
      makeFixedOutput("46bbbe8aa98cc0714426e948474eaaf4", "md5");
  EXPECT_THROW(fillOutputPaths(fixedNotOut, cache), FormatError);
  Derivation ok = newDrv(std::string(207, 'a'));
  EXPECT_NO_THROW(fillOutputPaths(ok, cache));
}

// addDerivation (what the evaluator calls) is fillOutputPaths +
// derivationPath + remember in one pass: same outputs, same path, the
// ATerm that derivationPath hashed, and H memoised for dependants.
TEST(DrvHash, AddDerivationAgreesWithTheStepwiseFunctions) {
  FakeDrvStore store;
  DrvHashCache stepwise(StoreDir(), store.loader());
  DrvHashCache single(StoreDir(), store.loader());
  std::vector<StorePath> paths;
  for (int i = 0; i < 20; ++i) {
    Derivation d = newDrv("p" + std::to_string(i),
                          i % 2 ? std::vector<std::string>{"out"}
                                : std::vector<std::string>{"dev", "out"});
    if (i == 5) d.outputs = {{"out", makeFixedOutput(std::string(64, 'a'), "sha256")}};
    // A floating content-addressed one makes those after it (each needs
    // the one before) deferred: their ATerms keep empty output paths.
    if (i == 15)
      for (auto& [_, o] : d.outputs) o.hashAlgo = "r:sha256";
    if (i > 0) d.inputDrvs[paths[i - 1]].insert("out");
    if (i > 3) d.inputDrvs[paths[i / 2]].insert(i % 2 ? "dev" : "out");
    if (i > 1) d.inputSrcs.insert(StorePath(paths[i - 2].baseName().substr(0, 32) + "-src"));
    // Escapes in the text around the inputs list (the hash for dependants
    // is taken from the .drv text with that list replaced).
    if (i % 3 == 0) d.env["script"] = "echo \"(a,b)\" [\n\t\\] " + std::to_string(i);
    Derivation byAdd = d;
    std::string aterm = "left over from the last one";
    SpinMutex memoMutex;
    StorePath p = single.addDerivation(byAdd, aterm, nullptr, nullptr,
                                       i % 2 ? &memoMutex : nullptr);
    StorePath q = add(store, stepwise, d);
    stepwise.remember(q, store.drvs.at(q));
    EXPECT_EQ(p, q) << i;
    EXPECT_EQ(byAdd, store.drvs.at(q)) << i;
    EXPECT_EQ(aterm, printDerivation(StoreDir(), byAdd)) << i;
    EXPECT_EQ(single.hashOf(p), stepwise.hashOf(q)) << i;
    paths.push_back(p);
  }
  EXPECT_EQ(single.loadCount(), 0u);
  EXPECT_EQ(single.size(), 20u);
  EXPECT_FALSE(single.isDeferred(paths[14]));
  EXPECT_TRUE(single.isDeferred(paths[19]));
}

// With a key keeper, every memo key (derivations added, inputs loaded) is
// the keeper's copy: keptKey returns it, and the hashes are the same.
TEST(DrvHash, MemoKeysAreTheKeepersCopies) {
  FakeDrvStore store;
  DrvHashCache plain(StoreDir(), store.loader());
  StorePath loaded = add(store, plain, newDrv("loaded"));
  DrvHashCache kept(StoreDir(), store.loader());
  std::vector<std::unique_ptr<std::string>> copies;
  kept.keepKeysWith([&](std::string_view base) {
    copies.push_back(std::make_unique<std::string>("=" + std::string(base)));
    return std::string_view(*copies.back()).substr(1);
  });
  Derivation d = newDrv("made");
  d.inputDrvs[loaded].insert("out");
  Derivation same = d;
  Derivation again = d;
  std::string aterm;
  uint32_t* tag = nullptr;
  std::string_view key;
  StorePath p = kept.addDerivation(d, aterm, &tag, nullptr, nullptr, &key);
  EXPECT_EQ(p, plain.addDerivation(same, aterm));
  ASSERT_EQ(copies.size(), 2u);  // the input, loaded first, then p
  // The entry added under p's text is keyed by the copy (p may go), and
  // adding the same derivation again finds it: no second copy.
  EXPECT_EQ(key.data(), copies[1]->data() + 1);
  *tag = 7;
  uint32_t* tagAgain = nullptr;
  std::string_view keyAgain;
  EXPECT_EQ(kept.addDerivation(again, aterm, &tagAgain, nullptr, nullptr, &keyAgain), p);
  EXPECT_EQ(copies.size(), 2u);
  EXPECT_EQ(keyAgain.data(), key.data());
  EXPECT_EQ(*tagAgain, 7u);
  EXPECT_EQ(kept.keptKey(loaded.baseName()).data(), copies[0]->data() + 1);
  EXPECT_EQ(kept.keptKey(p.baseName()).data(), copies[1]->data() + 1);
  EXPECT_EQ(kept.keptKey(p.baseName()), p.baseName());
  EXPECT_TRUE(kept.keptKey("00000000000000000000000000000000-none.drv").empty());
  EXPECT_EQ(kept.hashOf(p), plain.hashOf(p));
}

// The memo finds each entry by its whole name though thousands share
// their first 8 bytes (which place them in its table), across its growth.
TEST(DrvHash, MemoFindsNamesSharingTheirFirstBytes) {
  FakeDrvStore store;
  DrvHashCache cache(StoreDir(), store.loader());
  const std::string kChars = "0123456789abcdfghijklmnpqrsvwxyz";
  auto pathOf = [&](size_t i) {
    std::string hash = "aaaaaaaa";  // the same first 8 bytes for all
    for (size_t n = i, k = 0; k < 24; ++k, n /= 32) hash += kChars[n % 32];
    return StoreDir().parsePath("/nix/store/" + hash + "-p" + std::to_string(i) + ".drv");
  };
  const Derivation d = newDrv("memo");
  constexpr size_t kCount = 3000;
  for (size_t i = 0; i < kCount; ++i) cache.remember(pathOf(i), d);
  EXPECT_EQ(cache.size(), kCount);
  std::set<uint32_t*> tags;
  for (size_t i = 0; i < kCount; ++i) {
    StorePath p = pathOf(i);
    uint32_t* tag = cache.tagOf(p.baseName());
    ASSERT_NE(tag, nullptr) << p.baseName();
    tags.insert(tag);
    EXPECT_EQ(cache.keptKey(p.baseName()), p.baseName());
  }
  EXPECT_EQ(tags.size(), kCount);  // one entry each
  EXPECT_EQ(cache.tagOf(pathOf(kCount).baseName()), nullptr);  // same first bytes, absent
  EXPECT_EQ(cache.tagOf("aaaa.drv"), nullptr);  // shorter than 8 bytes
  EXPECT_EQ(store.calls, 0u);  // nothing loaded
}

}  // namespace
}  // namespace kiln::store

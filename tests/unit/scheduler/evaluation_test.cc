// Job lines of `kiln eval --json` and folder fingerprints.
#include "kiln/scheduler/evaluation.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"

namespace kiln::scheduler {
namespace {

TEST(JobLine, ParsesAJobAndAnError) {
  auto j = parseJobLine(
      R"({"attr":"hello","name":"hello-2.12","system":"x86_64-linux",)"
      R"("drvPath":"/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-hello-2.12.drv",)"
      R"("outputs":{"out":"/nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-hello-2.12"},)"
      R"("meta":{"schedulingPriority":50}})");
  EXPECT_EQ(j.attr, "hello");
  EXPECT_EQ(j.name, "hello-2.12");
  EXPECT_EQ(j.outputs.at("out"),
            "/nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-hello-2.12");
  EXPECT_EQ(j.schedulingPriority, 50);
  auto e = parseJobLine(R"({"attr":"broken","error":"undefined variable"})");
  EXPECT_EQ(e.error, "undefined variable");
  EXPECT_TRUE(e.drvPath.empty());
}

TEST(JobLine, RejectsMalformedLinesByName) {
  auto msg = [](const std::string& l) {
    try {
      parseJobLine(l);
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("{").find("not JSON"), std::string::npos);
  EXPECT_NE(msg("[1]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(msg(R"({"name":"x"})").find("missing 'attr'"), std::string::npos);
  EXPECT_NE(msg(R"({"attr":"x","system":"s"})").find("drvPath"),
            std::string::npos);
  EXPECT_NE(msg(R"({"attr":1})").find("'attr' is not a string"),
            std::string::npos);
}

TEST(InputFetcher, FolderHashChangesWithContentsNotWithGit) {
  TempDir d("kiln-fetch");
  createDirs(d.path() + "/c/.git");
  writeFile(d.path() + "/c/default.nix", "{}");
  JobsetSpec js;
  js.name = "j";
  js.location = d.path() + "/c";
  auto f = makeInputFetcher();
  auto h1 = f->fetch(js, d.path() + "/w").inputsHash;
  writeFile(d.path() + "/c/.git/HEAD", "ref");
  EXPECT_EQ(f->fetch(js, d.path() + "/w").inputsHash, h1);
  writeFile(d.path() + "/c/default.nix", "{ }");
  EXPECT_NE(f->fetch(js, d.path() + "/w").inputsHash, h1);
  EXPECT_EQ(h1.rfind("sha256:", 0), 0u);
  js.location = d.path() + "/missing";
  EXPECT_THROW(f->fetch(js, d.path() + "/w"), Error);
}

// Batches: one call for many attributes; a broken attribute is found by
// halving, and every other attribute still gets its path.
TEST(InstantiateInBatches, SplitsFailedBatchesDownToTheBrokenJobs) {
  std::vector<std::string> attrs;
  for (int i = 0; i < 10; i++) attrs.push_back("a" + std::to_string(i));
  std::vector<size_t> calls;
  auto batch = [&](const std::vector<std::string>& part) {
    calls.push_back(part.size());
    BatchOutcome o;
    o.ok = true;
    for (auto& a : part) {
      if (a == "a3" || a == "a7") {
        o.ok = false;
        o.error = "error: " + a + " is broken";
        o.drvPaths.clear();
        return o;
      }
      o.drvPaths.push_back("/nix/store/x-" + a + ".drv");
    }
    return o;
  };
  auto jobs = instantiateInBatches(attrs, batch, 4);
  ASSERT_EQ(jobs.size(), 10u);
  for (size_t i = 0; i < jobs.size(); i++) {
    EXPECT_EQ(jobs[i].attr, attrs[i]);
    if (i == 3 || i == 7) {
      EXPECT_EQ(jobs[i].drvPath, "");
      EXPECT_EQ(jobs[i].error, "error: " + attrs[i] + " is broken");
    } else {
      EXPECT_EQ(jobs[i].drvPath, "/nix/store/x-" + attrs[i] + ".drv");
      EXPECT_EQ(jobs[i].error, "");
    }
  }
  // Batches of at most 4 (4 + 4 + 2), the two failed ones halved twice.
  EXPECT_EQ(calls, (std::vector<size_t>{4, 2, 2, 1, 1, 4, 2, 2, 1, 1, 2}));
}

TEST(InstantiateInBatches, AWrongNumberOfPathsCountsAsFailure) {
  int n = 0;
  auto jobs = instantiateInBatches(
      {"x", "y"}, [&](const std::vector<std::string>& part) {
        n++;
        BatchOutcome o;
        o.ok = true;
        if (part.size() == 1) o.drvPaths.push_back("/nix/store/p-" + part[0]);
        return o;  // the pair prints nothing: split
      });
  EXPECT_EQ(n, 3);
  EXPECT_EQ(jobs[0].drvPath, "/nix/store/p-x");
  EXPECT_EQ(jobs[1].drvPath, "/nix/store/p-y");
  EXPECT_TRUE(instantiateInBatches({}, [](auto&) { return BatchOutcome{}; })
                  .empty());
}

}  // namespace
}  // namespace kiln::scheduler

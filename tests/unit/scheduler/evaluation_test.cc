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

}  // namespace
}  // namespace kiln::scheduler

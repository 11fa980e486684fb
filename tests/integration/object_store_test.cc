// scripts/start-object-store.sh (issue 32's real object store): a one-node
// Ceph cluster and its S3 gateway start under a folder, take a signed PUT
// and GET (curl's SigV4, as kiln's S3 storage will sign), refuse anonymous
// and wrongly signed requests, and stop leaving no daemon behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

const std::string kScript = "/scripts/start-object-store.sh";

// The variables the script's `export NAME=VALUE` lines set.
std::map<std::string, std::string> exportsOf(const std::string& out) {
  std::map<std::string, std::string> vars;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("export ", 0) != 0) continue;
    auto eq = line.find('=');
    vars[line.substr(7, eq - 7)] = line.substr(eq + 1);
  }
  return vars;
}

// Daemons whose command line names `dir`.
int daemonsIn(const std::string& dir) {
  auto r = test::run({"pgrep", "-f", "-c", dir + "/ceph.conf"});
  return r.exitCode == 0 ? std::stoi(r.out) : 0;
}

TEST(ObjectStore, StartsTakesSignedRequestsAndStopsCleanly) {
  for (const char* tool : {"radosgw", "ceph-mon", "ceph-osd", "curl"})
    if (!test::haveProgram(tool))
      GTEST_SKIP() << tool << " is missing (scripts/install-deps.sh)";
  TempDir dir("kiln-s3");
  std::string store = dir.path() + "/store";
  std::string port = std::to_string(test::freeLoopbackPort());
  std::string script = test::sourceDir() + kScript;
  auto started = test::run({script, store, port});
  ASSERT_EQ(started.exitCode, 0) << started.out << started.err;
  auto vars = exportsOf(started.out);
  std::string endpoint = vars["KILN_S3_ENDPOINT"];
  EXPECT_EQ(endpoint, "http://127.0.0.1:" + port);
  ASSERT_FALSE(vars["AWS_ACCESS_KEY_ID"].empty()) << started.out;
  ASSERT_FALSE(vars["AWS_SECRET_ACCESS_KEY"].empty()) << started.out;

  auto s3 = [&](std::vector<std::string> args, const std::string& secret) {
    std::vector<std::string> cmd = {
        "curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--aws-sigv4",
        "aws:amz:us-east-1:s3", "--user",
        vars["AWS_ACCESS_KEY_ID"] + ":" + secret, "-H",
        "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    return test::run(cmd);
  };
  std::string key = vars["AWS_SECRET_ACCESS_KEY"];
  auto bucket = s3({"-X", "PUT", endpoint + "/cache"}, key);
  EXPECT_THAT(bucket.out, ::testing::EndsWith("\n200")) << bucket.out;
  std::string file = dir.path() + "/nix-cache-info";
  writeFile(file, "StoreDir: /nix/store\n");
  auto put = s3({"-T", file, endpoint + "/cache/nix-cache-info"}, key);
  EXPECT_THAT(put.out, ::testing::EndsWith("\n200")) << put.out;
  auto get = s3({endpoint + "/cache/nix-cache-info"}, key);
  EXPECT_EQ(get.out, "StoreDir: /nix/store\n\n200");
  // Anonymous, and signed with a wrong secret: refused.
  auto anon = test::run({"curl", "-s", "-o", "/dev/null", "-w",
                         "%{http_code}", endpoint + "/cache/nix-cache-info"});
  EXPECT_EQ(anon.out, "403");
  auto wrong = s3({endpoint + "/cache/nix-cache-info"}, "not-the-secret");
  EXPECT_THAT(wrong.out, ::testing::EndsWith("\n403")) << wrong.out;

  // A second start on the same folder is refused; stop leaves nothing.
  auto again = test::run({script, store, port});
  EXPECT_NE(again.exitCode, 0);
  EXPECT_THAT(again.err, HasSubstr("already runs a store"));
  EXPECT_GT(daemonsIn(store), 0);
  auto stopped = test::run({script, "stop", store});
  EXPECT_EQ(stopped.exitCode, 0) << stopped.err;
  EXPECT_EQ(daemonsIn(store), 0);
}

}  // namespace
}  // namespace kiln

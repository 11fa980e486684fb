// scripts/start-object-store.sh (issue 32's real object store): a one-node
// Ceph cluster and its S3 gateway start under a folder, take a signed PUT
// and GET (curl's SigV4, as kiln's S3 storage will sign), refuse anonymous
// and wrongly signed requests, and stop leaving no daemon behind.
#include "object_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "farm.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/stream.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/compression.h"
#include "kiln/store/content_address.h"
#include "kiln/store/content_check.h"
#include "kiln/store/nar.h"
#include "kiln/store/s3_presign.h"
#include "kiln/store/staged_upload.h"
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
        "curl",        "-sS",
        "-o",          "-",
        "-w",          "\n%{http_code}",
        "--aws-sigv4", "aws:amz:us-east-1:s3",
        "--user",      vars["AWS_ACCESS_KEY_ID"] + ":" + secret,
        "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
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
  auto anon = test::run({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                         endpoint + "/cache/nix-cache-info"});
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

// kiln's S3 cache storage against the real gateway: small files, streamed
// uploads and reads, missing keys, and `kiln store copy-to-cache` /
// `copy-from-cache` through s3://, with refusals naming what to check.
TEST(ObjectStore, KilnCachesInABucket) {
  for (const char* tool : {"radosgw", "ceph-mon", "ceph-osd", "curl"})
    if (!test::haveProgram(tool))
      GTEST_SKIP() << tool << " is missing (scripts/install-deps.sh)";
  TempDir dir("kiln-s3");
  std::string script = test::sourceDir() + kScript, store = dir.path() + "/s";
  auto started =
      test::run({script, store, std::to_string(test::freeLoopbackPort())});
  ASSERT_EQ(started.exitCode, 0) << started.out << started.err;
  auto vars = exportsOf(started.out);
  std::vector<std::string> env = {
      "AWS_ACCESS_KEY_ID=" + vars["AWS_ACCESS_KEY_ID"],
      "AWS_SECRET_ACCESS_KEY=" + vars["AWS_SECRET_ACCESS_KEY"]};
  auto mk = test::run(
      {"curl", "-sS", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
       vars["AWS_ACCESS_KEY_ID"] + ":" + vars["AWS_SECRET_ACCESS_KEY"], "-H",
       "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", "PUT",
       vars["KILN_S3_ENDPOINT"] + "/cache"});
  ASSERT_EQ(mk.exitCode, 0) << mk.err;
  std::string uri = "s3://cache?endpoint=" + vars["KILN_S3_ENDPOINT"];

  // The storage itself (credentials from the environment).
  for (auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
  store::S3CacheStorage s3(uri);
  EXPECT_FALSE(s3.exists("nix-cache-info"));
  EXPECT_FALSE(s3.get("nix-cache-info"));
  EXPECT_EQ(s3.open("nar/missing.nar"), nullptr);
  s3.put("nix-cache-info", "StoreDir: /nix/store\n");
  EXPECT_TRUE(s3.exists("nix-cache-info"));
  EXPECT_EQ(s3.get("nix-cache-info"), "StoreDir: /nix/store\n");
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = char('a' + i % 26);
  auto up = s3.upload();
  for (size_t i = 0; i < big.size(); i += 65536)
    up->write(std::string_view(big).substr(i, 65536));
  up->commit("nar/big+name.nar");
  StringSink back;
  s3.open("nar/big+name.nar")->drainInto(back);
  EXPECT_TRUE(back.s == big);
  // Past the threshold: a multipart upload (5 MiB parts, three of them).
  store::HttpCacheLimits small;
  small.multipartThreshold = 6 << 20;
  small.partBytes = 5 << 20;
  store::S3CacheStorage parts(uri, small);
  std::string huge(12 << 20, 'y');
  for (size_t i = 0; i < huge.size(); i += 1000) huge[i] = char('A' + i % 26);
  auto up2 = parts.upload();
  up2->write(huge);
  up2->commit("nar/huge.nar");
  StringSink back2;
  parts.open("nar/huge.nar")->drainInto(back2);
  EXPECT_EQ(back2.s.size(), huge.size());
  EXPECT_TRUE(back2.s == huge);
  EXPECT_THROW(s3.get("../escape"), FormatError);
  EXPECT_THROW(store::S3CacheStorage("s3://cache"), FormatError);
  EXPECT_THROW(store::S3CacheStorage(uri + "&secret=x"), FormatError);
  try {
    store::S3CacheStorage("s3://nosuchbucket?endpoint=" +
                          vars["KILN_S3_ENDPOINT"])
        .get("nix-cache-info");
    ADD_FAILURE() << "a missing bucket was not refused";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("the bucket 'nosuchbucket' does not exist"));
  }

  // The CLI: publish a path's closure in the bucket, fetch it elsewhere.
  std::string file = dir.path() + "/hello.txt", a = dir.path() + "/a",
              b = dir.path() + "/b";
  writeFile(file, "hello from a bucket\n");
  auto kiln = [&](std::vector<std::string> args,
                  std::vector<std::string> extraEnv) {
    args.insert(args.begin(), test::kilnBinary());
    return test::run(args, "", extraEnv);
  };
  auto added = kiln({"store", "add", "--state-dir", a, file}, {});
  ASSERT_EQ(added.exitCode, 0) << added.err;
  std::string path = added.out.substr(0, added.out.find('\n'));
  ASSERT_EQ(kiln({"store", "generate-key", "t-1", dir.path() + "/k.sec",
                  dir.path() + "/k.pub"},
                 {})
                .exitCode,
            0);
  auto to = kiln({"store", "copy-to-cache", "--state-dir", a, "--to", uri,
                  "--compression", "zstd", "--secret-key-file",
                  dir.path() + "/k.sec", "--public-read", path},
                 env);
  ASSERT_EQ(to.exitCode, 0) << to.err;
  auto from = kiln({"store", "copy-from-cache", "--state-dir", b, "--from", uri,
                    "--trusted-public-key-file", dir.path() + "/k.pub", path},
                   env);
  ASSERT_EQ(from.exitCode, 0) << from.err;
  EXPECT_EQ(kiln({"store", "verify", "--state-dir", b}, {}).exitCode, 0);
  auto denied = kiln(
      {"store", "copy-from-cache", "--state-dir", dir.path() + "/c", "--from",
       uri, "--trusted-public-key-file", dir.path() + "/k.pub", path},
      {env[0], "AWS_SECRET_ACCESS_KEY=wrong"});
  EXPECT_NE(denied.exitCode, 0);
  EXPECT_THAT(denied.err,
              HasSubstr("access denied (403): check the credentials"));
  // Credentials from a shared credentials file instead of the environment.
  writeFile(
      dir.path() + "/credentials",
      "[other]\naws_access_key_id = nobody\n[kiln]\naws_access_key_id = " +
          vars["AWS_ACCESS_KEY_ID"] +
          "\naws_secret_access_key = " + vars["AWS_SECRET_ACCESS_KEY"] + "\n");
  auto fromFile = test::run(
      {"env", "-u", "AWS_ACCESS_KEY_ID", "-u", "AWS_SECRET_ACCESS_KEY",
       "AWS_SHARED_CREDENTIALS_FILE=" + dir.path() + "/credentials",
       "AWS_PROFILE=kiln", test::kilnBinary(), "store", "copy-from-cache",
       "--state-dir", dir.path() + "/d", "--from", uri,
       "--trusted-public-key-file", dir.path() + "/k.pub", path});
  EXPECT_EQ(fromFile.exitCode, 0) << fromFile.err;
  auto none = test::run(
      {"env", "-u", "AWS_ACCESS_KEY_ID", "-u", "AWS_SECRET_ACCESS_KEY",
       "AWS_SHARED_CREDENTIALS_FILE=/nonexistent", test::kilnBinary(), "store",
       "copy-from-cache", "--state-dir", dir.path() + "/e", "--from", uri,
       path});
  EXPECT_NE(none.exitCode, 0);
  EXPECT_THAT(none.err, HasSubstr("no S3 credentials for " + uri));
  // Public-read: the real nix substitutes the closure over plain HTTP with
  // unsigned requests; nobody may write.
  std::string http = vars["KILN_S3_ENDPOINT"] + "/cache";
  if (test::haveProgram("nix")) {
    auto copied = test::run(
        {"nix", "copy", "--from", http, "--to",
         "local?root=" + dir.path() + "/nixroot", "--option",
         "trusted-public-keys", readFile(dir.path() + "/k.pub"), path},
        "",
        {"NIX_CONFIG=build-users-group =\nexperimental-features = "
         "nix-command\nsubstituters =\nrequire-sigs = true\n",
         "XDG_CACHE_HOME=" + dir.path() + "/xdg"});
    EXPECT_EQ(copied.exitCode, 0) << copied.err;
    EXPECT_EQ(readFile(dir.path() + "/nixroot" + path),
              "hello from a bucket\n");
  }
  auto anonPut =
      test::run({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X",
                 "PUT", "--data", "x", http + "/evil"});
  EXPECT_EQ(anonPut.out, "403");
  auto notS3 = kiln({"store", "copy-to-cache", "--state-dir", a, "--to",
                     "file://" + dir.path() + "/fc", "--public-read", path},
                    {});
  EXPECT_NE(notS3.exitCode, 0);
  EXPECT_THAT(notS3.err, HasSubstr("--public-read is for s3:// caches"));
  EXPECT_EQ(test::run({script, "stop", store}).exitCode, 0);
}

// A running gateway with an empty private bucket "farm" and its
// credentials in this process's environment.
class FarmBucket : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::ObjectStoreServer::canRun(&why)) GTEST_SKIP() << why;
    s3_.start();
    s3_.createBucket("farm", false);
    ::setenv("AWS_ACCESS_KEY_ID", s3_.accessKey().c_str(), 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", s3_.secretKey().c_str(), 1);
  }
  TempDir dir_{"kiln-s3"};
  test::ObjectStoreServer s3_{dir_.path() + "/s3"};
};

// A presigned PUT (store/s3_presign.h, stage 2 of issue 32) against the
// real gateway: anyone holding the URL may upload that one key, with no
// credentials, until it expires; another key, another method or an
// expired URL is refused.
TEST_F(FarmBucket, PresignedPutsNeedNoCredentials) {
  store::PresignRequest r;
  r.method = "PUT";
  r.endpoint = s3_.endpoint();
  r.path = "/farm/staging/step-1/out.nar.zst";
  r.accessKey = s3_.accessKey();
  r.secretKey = s3_.secretKey();
  r.amzDate = store::amzDate(::time(nullptr));
  r.expiresSec = 300;
  std::string url = store::presignUrl(r);
  std::string file = dir_.path() + "/body";
  writeFile(file, "a staged NAR\n");
  auto put = [&](const std::string& u, const std::string& method) {
    std::vector<std::string> cmd = {"curl",      "-sS",  "-o",
                                    "/dev/null", "-w",   "%{http_code}",
                                    "-X",        method, u};
    if (method == "PUT") cmd.insert(cmd.end(), {"-T", file});
    return test::run(cmd).out;
  };
  EXPECT_EQ(put(url, "PUT"), "200");
  store::S3CacheStorage bucket(s3_.uri("farm"));
  EXPECT_EQ(bucket.get("staging/step-1/out.nar.zst"), "a staged NAR\n");
  // The signature covers the key and the method.
  std::string other = url;
  other.replace(other.find("out.nar.zst"), 3, "xxx");
  EXPECT_EQ(put(other, "PUT"), "403");
  EXPECT_EQ(put(url, "DELETE"), "403");
  // Signed an hour ago for a minute: expired.
  r.amzDate = store::amzDate(::time(nullptr) - 3600);
  r.expiresSec = 60;
  EXPECT_EQ(put(store::presignUrl(r), "PUT"), "403");

  // The storage presigns with its own credentials; a staged object moves
  // to its final key on the store's side and the staged one goes.
  std::string staged = "staging/step-2/out.nar.zst";
  EXPECT_EQ(
      put(bucket.presignPut(staged, std::chrono::seconds(60), ::time(nullptr)),
          "PUT"),
      "200");
  bucket.copy(staged, "nar/final.nar.zst");
  bucket.remove(staged);
  EXPECT_FALSE(bucket.exists(staged));
  EXPECT_EQ(bucket.get("nar/final.nar.zst"), "a staged NAR\n");
  bucket.remove(staged);  // already gone: not an error
  EXPECT_THROW(bucket.copy(staged, "nar/other.nar.zst"), Error);
  // An abandoned step's staging objects go, and nothing else.
  for (auto k : {"staging/step-3/a.nar.zst", "staging/step-3/b&c.nar.zst",
                 "staging/step-30/x.nar.zst"})
    bucket.put(k, "x");
  EXPECT_EQ(bucket.list("staging/step-3/"),
            (std::vector<std::string>{"staging/step-3/a.nar.zst",
                                      "staging/step-3/b&c.nar.zst"}));
  EXPECT_EQ(bucket.removePrefix("staging/step-3/"), 2u);
  EXPECT_TRUE(bucket.list("staging/step-3/").empty());
  EXPECT_TRUE(bucket.exists("staging/step-30/x.nar.zst"));
  EXPECT_TRUE(bucket.exists("nar/final.nar.zst"));
  s3_.stop();
}

// What a worker stages (store/staged_upload.h) is read once and checked
// before anything is published: a good NAR moves to its final key on the
// gateway's side with a signed narinfo; a corrupt object, a wrong NarHash
// or a fixed output whose content is not its declared hash is refused.
TEST_F(FarmBucket, StagedUploadsAreVerifiedBeforeTheyArePublished) {
  store::S3CacheStorage bucket(s3_.uri("farm"));
  store::StoreDir sd;
  // An output whose file names a candidate reference.
  store::StorePath dep(std::string(32, 'a') + "-dep");
  auto narOf = [](const std::string& contents) {
    StringSink nar;
    store::dumpString(contents, nar);
    HashingSink h(HashAlgo::kSha256);
    h.write(nar.s);
    auto [hash, size] = h.finish();
    return std::tuple(nar.s, hash, size);
  };
  auto [nar, narHash, narSize] = narOf("uses " + sd.printPath(dep) + "\n");
  // The worker's part: compress, PUT to the presigned staging URL.
  auto stage = [&](const std::string& key, const std::string& bytes) {
    StringSink zst;
    auto c = store::makeCompressionSink("zstd", zst);
    c->write(bytes);
    c->finish();
    std::string file = dir_.path() + "/upload";
    writeFile(file, zst.s);
    auto url =
        bucket.presignPut(key, std::chrono::seconds(60), ::time(nullptr));
    return test::run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                      "-T", file, url})
        .out;
  };
  store::StagedOutput st;
  st.key = "staging/step-7/out.nar.zst";
  st.claimed =
      store::ValidPathInfo(store::StorePath(std::string(32, 'b') + "-out"));
  st.claimed.narHash = narHash;
  st.claimed.narSize = narSize;
  st.candidates = {dep};
  ASSERT_EQ(stage(st.key, nar), "200");
  auto verdict = store::verifyStaged(bucket, sd, st);
  EXPECT_EQ(verdict.references, store::StorePathSet{dep});
  auto key = store::SecretKey::generate("farm-1");
  auto ni = store::publishStaged(bucket, sd, st, verdict, &key);
  EXPECT_FALSE(bucket.exists(st.key));
  store::BinaryCacheReader reader(bucket, sd);
  auto back = reader.queryNarInfo(st.claimed.path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->url, ni.url);
  store::PublicKeys keys;
  keys.add(key.toPublicKey());
  EXPECT_TRUE(reader.hasValidSignature(*back, keys));
  StringSink served;
  reader.narSource(*back)->drainInto(served);
  EXPECT_TRUE(served.s == nar);

  // Refused: garbage, a wrong NarHash.
  auto bad = st;
  bad.key = "staging/step-8/out.nar.zst";
  ASSERT_EQ(stage(bad.key, "not a NAR at all"), "200");
  EXPECT_THROW(store::verifyStaged(bucket, sd, bad), FormatError);
  ASSERT_EQ(stage(bad.key, nar), "200");
  bad.claimed.narSize = narSize + 1;
  EXPECT_THROW(store::verifyStaged(bucket, sd, bad),
               store::ContentMismatchError);
  // A fixed output (flat sha256): its content must be its declared hash.
  auto [fod, fodHash, fodSize] = narOf("fetched bytes\n");
  auto caOf = [](const std::string& contents) {
    HashingSink h(HashAlgo::kSha256);
    h.write(contents);
    return store::ContentAddress{store::CaMethod::kFlat, h.finish().first};
  };
  for (auto declared : {"fetched bytes\n", "something else"}) {
    auto ca = caOf(declared);
    bad.claimed = store::ValidPathInfo(ca.makePath(sd, "f.txt", {}, false));
    bad.claimed.narHash = fodHash;
    bad.claimed.narSize = fodSize;
    bad.claimed.ca = ca.render();
    ASSERT_EQ(stage(bad.key, fod), "200");
    if (std::string(declared) == "fetched bytes\n")
      EXPECT_TRUE(store::verifyStaged(bucket, sd, bad).references.empty());
    else
      EXPECT_THROW(store::verifyStaged(bucket, sd, bad),
                   store::ContentMismatchError);
  }
  bucket.remove(bad.key);
  bad.key = "staging/missing";
  EXPECT_THROW(store::verifyStaged(bucket, sd, bad), Error);
  s3_.stop();
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A multipart upload through presigned part URLs (what a worker does with
// a StageGrant, store::putPresigned) against the real gateway: the parts
// need no credentials, the farm completes the upload from their ETags and
// the object is the parts in order; a part URL does not serve another
// part number, and an abandoned upload is listed and aborted.
TEST_F(FarmBucket, PresignedPartsMakeAMultipartUpload) {
  store::S3CacheStorage bucket(s3_.uri("farm"));
  std::string key = "staging/7/1/out.nar.zst";
  std::string body(11 << 20, 'a');
  for (size_t i = 0; i < body.size(); i += 4096) body[i] = char('a' + i % 26);
  std::string file = dir_.path() + "/parts";
  writeFile(file, body);
  AutoCloseFD fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  std::string id = bucket.startMultipart(key);
  int64_t part = 5 << 20, now = ::time(nullptr);
  std::vector<std::string> etags;
  for (int i = 0; i * part < int64_t(body.size()); ++i) {
    auto url =
        bucket.presignPart(key, id, i + 1, std::chrono::seconds(60), now);
    EXPECT_EQ(url.find(s3_.secretKey()), std::string::npos);
    etags.push_back(store::putPresigned(
        url, fd.get(), i * part,
        std::min<int64_t>(part, int64_t(body.size()) - i * part)));
    EXPECT_FALSE(etags.back().empty());
  }
  ASSERT_EQ(etags.size(), 3u);
  // The signature covers the part number.
  auto url2 = bucket.presignPart(key, id, 2, std::chrono::seconds(60), now);
  std::string forged = url2;
  forged.replace(forged.find("partNumber=2"), 12, "partNumber=9");
  EXPECT_THROW(store::putPresigned(forged, fd.get(), 0, 10), Error);
  EXPECT_EQ(bucket.listMultipartUploads("staging/").size(), 1u);
  bucket.completeMultipart(key, id, etags);
  EXPECT_EQ(bucket.get(key), body);
  EXPECT_TRUE(bucket.listMultipartUploads("staging/").empty());

  // An upload nobody completes is found and aborted.
  std::string other = "staging/8/1/out.nar.zst";
  std::string id2 = bucket.startMultipart(other);
  store::putPresigned(
      bucket.presignPart(other, id2, 1, std::chrono::seconds(60), now),
      fd.get(), 0, part);
  auto open = bucket.listMultipartUploads("staging/8/");
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0], std::make_pair(other, id2));
  bucket.abortMultipart(other, id2);
  EXPECT_TRUE(bucket.listMultipartUploads("staging/").empty());
  EXPECT_FALSE(bucket.exists(other));
  s3_.stop();
}

}  // namespace
}  // namespace kiln

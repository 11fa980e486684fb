#include "object_store.h"

#include <cstdlib>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/signature.h"
#include "test_support.h"

namespace kiln::test {
namespace {

const char* kScript = "/scripts/start-object-store.sh";

}  // namespace

bool ObjectStoreServer::canRun(std::string* why) {
  for (const char* tool : {"radosgw", "ceph-mon", "ceph-osd", "curl"})
    if (!haveProgram(tool)) {
      if (why)
        *why = std::string(tool) + " is missing (scripts/install-deps.sh)";
      return false;
    }
  return true;
}

ObjectStoreServer::ObjectStoreServer(std::string dir, int port)
    : dir_(std::move(dir)),
      port_(port ? port : freeLoopbackPort()),
      // radosgw's own key shapes: 20 upper-case characters, 40 of base64.
      accessKey_("KILNTESTACCESSKEY001"),
      secretKey_("kilnTestSecretKey0000000000000000000001") {}

ObjectStoreServer::~ObjectStoreServer() {
  try {
    stop();
  } catch (const std::exception&) {  // a destructor must not throw
  }
}

void ObjectStoreServer::start() {
  if (running_) throw Error("the object store already runs");
  current_ = dir_ + "/gateway-" + std::to_string(++starts_);
  auto r = run(
      {sourceDir() + kScript, current_, std::to_string(port_)}, "",
      {"KILN_S3_ACCESS_KEY=" + accessKey_, "KILN_S3_SECRET_KEY=" + secretKey_});
  if (r.exitCode != 0)
    throw Error("start-object-store.sh failed: " + r.out + r.err);
  running_ = true;
}

void ObjectStoreServer::stop() {
  if (!running_) return;
  running_ = false;
  auto r = run({sourceDir() + kScript, "stop", current_});
  if (r.exitCode != 0)
    throw Error("start-object-store.sh stop failed: " + r.out + r.err);
}

std::string ObjectStoreServer::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::vector<std::string> ObjectStoreServer::env() const {
  return {"AWS_ACCESS_KEY_ID=" + accessKey_,
          "AWS_SECRET_ACCESS_KEY=" + secretKey_};
}

std::map<std::string, std::string> ObjectStoreServer::credentials() const {
  return {{"AWS_ACCESS_KEY_ID", accessKey_},
          {"AWS_SECRET_ACCESS_KEY", secretKey_}};
}

std::vector<std::string> ObjectStoreServer::farmCacheArgs(
    const std::string& bucket, const std::string& keyFile) const {
  return {"--cache", uri(bucket), "--cache-secret-key-file", keyFile};
}

void ObjectStoreServer::exportCredentials() const {
  ::setenv("AWS_ACCESS_KEY_ID", accessKey_.c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", secretKey_.c_str(), 1);
}

std::string ObjectStoreServer::uri(const std::string& bucket) const {
  return "s3://" + bucket + "?endpoint=" + endpoint();
}

void ObjectStoreServer::createBucket(const std::string& bucket,
                                     bool publicRead) const {
  auto r = run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                accessKey_ + ":" + secretKey_, "-H",
                "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", "PUT",
                endpoint() + "/" + bucket});
  if (r.exitCode != 0 || r.out != "200")
    throw Error("creating bucket " + bucket + ": " + r.out + r.err);
  if (!publicRead) return;
  exportCredentials();
  store::S3CacheStorage(uri(bucket)).makePublicRead();
}

RunResult ObjectStoreServer::nixCopy(const std::string& bucket,
                                     const std::string& publicKey,
                                     const std::string& root,
                                     const std::string& path,
                                     const std::string& xdgDir) const {
  return run({"nix", "copy", "--from", endpoint() + "/" + bucket, "--to",
              "local?root=" + root, "--option", "trusted-public-keys",
              publicKey, path},
             "",
             {"NIX_CONFIG=build-users-group =\nexperimental-features = "
              "nix-command\nsubstituters =\nrequire-sigs = true\n",
              "XDG_CACHE_HOME=" + xdgDir});
}

S3FarmKit::S3FarmKit(const std::string& dir)
    : s3(std::make_unique<ObjectStoreServer>(dir + "/s3")),
      secretKeyFile(dir + "/k.sec"),
      publicKeyFile(dir + "/k.pub") {
  s3->exportCredentials();
  auto k = run({kilnBinary(), "store", "generate-key", "farm-1", secretKeyFile,
                publicKeyFile});
  if (k.exitCode != 0) throw Error("kiln store generate-key: " + k.err);
}

std::optional<store::NarInfo> S3FarmKit::signedNarInfo(
    const std::string& bucket, const std::string& path) const {
  store::S3CacheStorage storage(s3->uri(bucket));
  store::StoreDir dir;
  store::BinaryCacheReader reader(storage, dir);
  std::optional<store::NarInfo> ni;
  try {
    ni = reader.queryNarInfo(dir.parsePath(path));
  } catch (const Error&) {
    return std::nullopt;  // no bucket yet
  }
  if (!ni || !storage.exists(ni->url)) return std::nullopt;
  store::PublicKeys keys;
  keys.add(store::readPublicKeyFile(publicKeyFile));
  if (!reader.hasValidSignature(*ni, keys))
    throw Error("the narinfo of " + path + " is not signed by " +
                publicKeyFile);
  return ni;
}

}  // namespace kiln::test

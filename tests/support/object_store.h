#pragma once
/// The real S3 gateway of scripts/start-object-store.sh (Ceph's radosgw on
/// loopback) for integration tests: started under a folder, with fixed
/// credentials so that a gateway started again (its objects are gone, it
/// keeps nothing) still accepts the clients that were given them.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/store/narinfo.h"
#include "test_support.h"

namespace kiln::test {

/// One gateway. Not thread-safe. The destructor stops it.
class ObjectStoreServer {
 public:
  /// Whether radosgw, ceph-mon, ceph-osd and curl are installed; `why`
  /// says what is missing otherwise (for GTEST_SKIP()).
  static bool canRun(std::string* why = nullptr);
  /// A gateway whose state folders go under `dir`, to listen on `port`
  /// (0: a free loopback port, kept across restarts). Starts nothing.
  explicit ObjectStoreServer(std::string dir, int port = 0);
  ~ObjectStoreServer();
  ObjectStoreServer(const ObjectStoreServer&) = delete;
  ObjectStoreServer& operator=(const ObjectStoreServer&) = delete;

  /// Starts a fresh, empty store (a new folder under `dir`) on the port;
  /// throws Error with the script's output if it does not come up.
  void start();
  /// Stops it (nothing when it does not run).
  void stop();
  bool running() const { return running_; }

  /// `http://127.0.0.1:PORT`.
  std::string endpoint() const;
  int port() const { return port_; }
  const std::string& accessKey() const { return accessKey_; }
  const std::string& secretKey() const { return secretKey_; }
  /// `AWS_ACCESS_KEY_ID=…` and `AWS_SECRET_ACCESS_KEY=…`, for a process's
  /// environment.
  std::vector<std::string> env() const;
  /// Sets those two variables in this process's environment (for the
  /// test's own clients and the commands it runs).
  void exportCredentials() const;
  /// The same two variables as a map (FarmOptions::schedulerEnv).
  std::map<std::string, std::string> credentials() const;
  /// `--cache s3://BUCKET?… --cache-secret-key-file KEYFILE`: the
  /// scheduler arguments of a farm publishing to `bucket`, signing with
  /// the secret key file `keyFile`.
  std::vector<std::string> farmCacheArgs(const std::string& bucket,
                                         const std::string& keyFile) const;
  /// `s3://BUCKET?endpoint=http://127.0.0.1:PORT`.
  std::string uri(const std::string& bucket) const;
  /// Creates `bucket` (a signed PUT); with `publicRead`, lets anyone read
  /// and list it. Throws Error if refused.
  void createBucket(const std::string& bucket, bool publicRead) const;
  /// Runs the real `nix copy --from http://…/BUCKET` of `path` into the
  /// chroot store `root`, requiring signatures by `publicKey` (a key
  /// file's text), with Nix's cache under `xdgDir`: a client substituting
  /// from the public-read bucket over plain HTTP.
  RunResult nixCopy(const std::string& bucket, const std::string& publicKey,
                    const std::string& root, const std::string& path,
                    const std::string& xdgDir) const;

 private:
  std::string dir_;
  int port_;
  int starts_ = 0;
  bool running_ = false;
  std::string accessKey_, secretKey_;
  std::string current_;  ///< the running store's folder
};

/// What the S3 farm tests share: a gateway under `<dir>/s3` (not started;
/// its credentials exported to this process) and the farm's signing key
/// pair `<dir>/k.sec`, `<dir>/k.pub` (named farm-1). Check
/// ObjectStoreServer::canRun first. Throws Error if the key is not made.
struct S3FarmKit {
  explicit S3FarmKit(const std::string& dir);

  /// The narinfo of `path` (a full store path) in `bucket` when both it
  /// and its NAR are there; nullopt while not (or no bucket yet). Throws
  /// Error if the narinfo is not signed by the kit's key.
  std::optional<store::NarInfo> signedNarInfo(const std::string& bucket,
                                              const std::string& path) const;

  std::unique_ptr<ObjectStoreServer> s3;
  std::string secretKeyFile, publicKeyFile;
};

}  // namespace kiln::test

#include "cache_options.h"

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/signature.h"

namespace kiln::cli {

namespace po = boost::program_options;

void CacheOptions::add(po::options_description& opts) {
  opts.add_options()(
      "cache", po::value(&uri),
      "where the farm's binary cache lives: "
      "s3://BUCKET?endpoint=http(s)://HOST[:PORT][&region=R] (the scheduler "
      "publishes every built output there, signed, and the web serves it; "
      "credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
      "AWS_SHARED_CREDENTIALS_FILE), or a directory / file:///DIR (NARs "
      "compressed on first request; default "
      "<state-dir>/binary-cache/<compression>)")(
      "cache-secret-key-file", po::value(&secretKeyFile),
      "sign the binary cache's narinfos with this key (kiln store "
      "generate-key)")(
      "cache-compression", po::value(&compression),
      "compression of the binary cache's NARs: zstd (default), xz or none");
}

void CacheOptions::check() const {
  if (compression != "zstd" && compression != "xz" && compression != "none")
    throw po::error("--cache-compression must be zstd, xz or none");
  if (uri.empty() || objectStore()) {
    if (objectStore()) {
      try {
        store::S3CacheStorage::checkUri(uri);
      } catch (const FormatError& e) {
        throw po::error(std::string("--cache: ") + e.what());
      }
    }
    return;
  }
  if (uri.find("://") != std::string::npos && !uri.starts_with("file:///"))
    throw po::error(
        "--cache must be s3://BUCKET?endpoint=…, file:///DIR or "
        "a directory, not '" +
        uri + "'");
}

std::string CacheOptions::directory() const {
  if (uri.starts_with("file://")) return uri.substr(7);
  return objectStore() || uri.empty() ? "" : absPath(uri);
}

std::shared_ptr<web::BinaryCache> makeBinaryCache(const std::string& stateDir,
                                                  const std::string& storeDir,
                                                  const CacheOptions& o,
                                                  bool prune) {
  web::BinaryCacheConfig bc;
  bc.stateDir = stateDir;
  bc.storeDir = storeDir;
  bc.compression = o.compression;
  if (o.objectStore()) {
    // The scheduler publishes signed narinfos; the web passes them on.
    bc.remote = store::openCacheStorage(o.uri);
    return std::make_shared<web::BinaryCache>(std::move(bc));
  }
  bc.cacheDir = o.directory();
  if (!o.secretKeyFile.empty())
    bc.signingKey = store::readSecretKeyFile(o.secretKeyFile);
  if (prune) bc.pruneInterval = std::chrono::minutes(10);
  return std::make_shared<web::BinaryCache>(std::move(bc));
}

}  // namespace kiln::cli

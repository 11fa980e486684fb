#include "cache_options.h"

#include "kiln/store/signature.h"

namespace kiln::cli {

namespace po = boost::program_options;

void CacheOptions::add(po::options_description& opts) {
  opts.add_options()(
      "cache-secret-key-file", po::value(&secretKeyFile),
      "sign the binary cache's narinfos with this key (kiln store "
      "generate-key)")(
      "cache-compression", po::value(&compression),
      "compression of the binary cache's NARs: zstd (default), xz or none");
}

void CacheOptions::check() const {
  if (compression != "zstd" && compression != "xz" && compression != "none")
    throw po::error("--cache-compression must be zstd, xz or none");
}

std::shared_ptr<web::BinaryCache> makeBinaryCache(const std::string& stateDir,
                                                  const std::string& storeDir,
                                                  const CacheOptions& o,
                                                  bool prune) {
  web::BinaryCacheConfig bc;
  bc.stateDir = stateDir;
  bc.storeDir = storeDir;
  bc.compression = o.compression;
  if (!o.secretKeyFile.empty())
    bc.signingKey = store::readSecretKeyFile(o.secretKeyFile);
  if (prune) bc.pruneInterval = std::chrono::minutes(10);
  return std::make_shared<web::BinaryCache>(std::move(bc));
}

}  // namespace kiln::cli

#pragma once
/// The binary cache options `kiln scheduler` and `kiln web` share
/// (`--cache-secret-key-file`, `--cache-compression`) and the cache they
/// make of a state directory's central store.

#include <boost/program_options.hpp>
#include <memory>
#include <string>

#include "kiln/web/binary_cache.h"

namespace kiln::cli {

/// Parsed cache options.
struct CacheOptions {
  std::string compression = "zstd";
  std::string secretKeyFile;  ///< the farm's narinfo signing key, if any

  /// Adds --cache-secret-key-file and --cache-compression to `opts`.
  void add(boost::program_options::options_description& opts);
  /// Throws boost::program_options::error unless the compression is zstd,
  /// xz or none.
  void check() const;
};

/// The binary cache of the central store under `stateDir`. With `prune`,
/// it prunes every 10 minutes (the scheduler's does; front ends sharing
/// its folder leave that to it). Throws Error if the key cannot be read.
std::shared_ptr<web::BinaryCache> makeBinaryCache(const std::string& stateDir,
                                                  const std::string& storeDir,
                                                  const CacheOptions& o,
                                                  bool prune);

}  // namespace kiln::cli

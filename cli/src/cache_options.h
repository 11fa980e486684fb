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
  /// `--cache`: where the farm's cache lives. `s3://BUCKET?endpoint=…`: a
  /// bucket the scheduler publishes every built output to and the web
  /// serves from; a directory or `file:///DIR`: the web's compress-on-
  /// request folder (default `<state>/binary-cache/<compression>`).
  std::string uri;

  /// Adds --cache, --cache-secret-key-file and --cache-compression to
  /// `opts`.
  void add(boost::program_options::options_description& opts);
  /// Throws boost::program_options::error unless the compression is zstd,
  /// xz or none and the cache URI is one of the above (credentials are
  /// never part of it).
  void check() const;
  /// Whether the cache is on an object store (`s3://`).
  bool objectStore() const { return uri.starts_with("s3://"); }
  /// The compress-on-request folder `uri` names, or "" (the default one,
  /// or an object store).
  std::string directory() const;
};

/// The binary cache of the central store under `stateDir`. With `prune`,
/// it prunes every 10 minutes (the scheduler's does; front ends sharing
/// its folder leave that to it). Throws Error if the key cannot be read.
std::shared_ptr<web::BinaryCache> makeBinaryCache(const std::string& stateDir,
                                                  const std::string& storeDir,
                                                  const CacheOptions& o,
                                                  bool prune);

}  // namespace kiln::cli

#pragma once
// The options every local-store subcommand shares (`--state-dir`,
// `--store-dir`) and how a command-line PATH names a store path.

#include <boost/program_options.hpp>
#include <memory>
#include <string>

#include "kiln/store/local_store.h"

namespace kiln::cli {

/// Where the store lives, as given on the command line.
struct StoreLocation {
  std::string stateDir;  ///< empty: defaultStateDir()
  std::string storeDir = "/nix/store";

  /// Adds --state-dir and --store-dir to `opts`, bound to this object.
  void addOptions(boost::program_options::options_description& opts);
  /// Opens (creating) the local store.
  std::unique_ptr<store::LocalStore> open() const;
};

/// The default state directory: $KILN_STATE_DIR if set, else /var/lib/kiln
/// for root, else $XDG_STATE_HOME/kiln, else ~/.local/state/kiln.
std::string defaultStateDir();

/// Resolves a PATH argument: a logical store path (or a path inside one)
/// or the same object under the physical root. Throws FormatError.
store::StorePath resolveStorePath(const store::LocalStore& store, const std::string& arg);

}  // namespace kiln::cli

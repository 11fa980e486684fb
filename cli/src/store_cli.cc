#include "store_cli.h"

#include <unistd.h>

#include <cstdlib>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::cli {

namespace po = boost::program_options;

std::string defaultStateDir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (auto d = env("KILN_STATE_DIR"); !d.empty()) return d;
  if (::geteuid() == 0) return "/var/lib/kiln";
  if (auto d = env("XDG_STATE_HOME"); !d.empty()) return d + "/kiln";
  if (auto h = env("HOME"); !h.empty()) return h + "/.local/state/kiln";
  throw Error("cannot choose a state directory: set --state-dir or KILN_STATE_DIR");
}

void StoreLocation::addOptions(po::options_description& opts) {
  opts.add_options()("state-dir", po::value(&stateDir),
                     "kiln's state directory (default: $KILN_STATE_DIR, /var/lib/kiln "
                     "for root, else ~/.local/state/kiln)")(
      "store-dir", po::value(&storeDir)->default_value(storeDir),
      "logical store directory that enters every hash");
}

std::unique_ptr<store::LocalStore> StoreLocation::open() const {
  return std::make_unique<store::LocalStore>(stateDir.empty() ? defaultStateDir() : stateDir,
                                             store::StoreDir(storeDir));
}

store::StorePath resolveStorePath(const store::LocalStore& store, const std::string& arg) {
  std::string full = absPath(arg);
  auto phys = store.physicalRoot() + "/";
  if (full.starts_with(phys)) {
    auto base = full.substr(phys.size());
    return store::StorePath(base.substr(0, base.find('/')));
  }
  return store.parsePath(full);
}

}  // namespace kiln::cli

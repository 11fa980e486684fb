#include "version_info.h"

#include "kiln/plugin/abi.h"
#include "kiln/protocol/messages.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::cli {

std::string versionText() {
  std::string out = "kiln " KILN_VERSION "\n";
  out += "revision: " + std::string(kBuildRevision) + "\n";
  out += "protocol: " + std::to_string(protocol::kProtocolVersion) + "\n";
  out += "database schema: " +
         std::to_string(scheduler::StateDb::schemaVersion()) + "\n";
  out += "plugin ABI: " + std::to_string(KILN_PLUGIN_ABI_MAJOR) + "." +
         std::to_string(KILN_PLUGIN_ABI_MINOR_LATEST) + "\n";
  return out;
}

}  // namespace kiln::cli

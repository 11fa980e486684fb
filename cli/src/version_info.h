#pragma once
/// What `kiln --version` prints: the release, the source revision the
/// binary was built from and the versions of every interface that must
/// match between kiln processes, databases and plugins.

#include <string>

namespace kiln::cli {

/// The git revision of the source tree at build time (12 hex digits, with
/// "-dirty" when it had uncommitted changes), or "unknown" when it was not
/// built from a git checkout. Defined in the generated kiln_revision.cc.
extern const char* const kBuildRevision;

/// The multi-line `--version` text: "kiln X.Y.Z" first (what help2man
/// reads), then revision, protocol, database schema and plugin ABI.
std::string versionText();

}  // namespace kiln::cli

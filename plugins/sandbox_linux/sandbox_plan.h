#pragma once
// Builds the new root of one sandboxed build on the host (directories,
// mount points, /etc files) and the list of mounts the child makes: the
// logical store directory holding only the input closure (read-only), the
// build directory at /build, a minimal /dev and /proc, the configured extra
// paths (read-only) and, for fixed-output builds, the host's name service
// files. The layout follows Nix 2.8's sandbox (docs/worker.md).

#include <sys/types.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "kiln/plugin/abi.h"
#include "sandbox_child.h"
#include "sandbox_fs.h"

namespace kiln::sandbox_linux {

/// One extra path: `source` on the host appears at `target` inside.
struct ExtraPath {
  std::string target, source;
  bool optional = false;  ///< "path?": skipped when missing
};

/// Parses Nix's `sandbox-paths` syntax: space-separated `target=source`,
/// `path` (same inside and out) or `path?` (optional). Throws Failure.
std::vector<ExtraPath> parseExtraPaths(const std::string& text);

/// The mounts of one build; owns every string the ops point to.
class SandboxPlan {
 public:
  /// Prepares `root` for `spec`; the store directory is group-writable for
  /// `buildGid` (the build user's host gid). Throws Failure.
  SandboxPlan(const kiln_sandbox_spec& spec, RootDir& root,
              const std::vector<ExtraPath>& extra, gid_t buildGid);
  /// The mount operations, in Nix 2.8's order: the root and the store
  /// directory bound onto themselves, the bind mounts sorted by their path
  /// inside (a parent before its children), then /proc, /dev/shm, /dev/pts.
  const std::vector<MountOp>& mounts() const { return mounts_; }

 private:
  const char* keep(std::string s);
  void bind(const std::string& source, const std::string& target,
            bool readOnly);
  void addSelfBinds(const kiln_sandbox_spec& spec, gid_t buildGid);
  void addEtc(bool network);
  void addDev();
  void addInputs(const kiln_sandbox_spec& spec);
  void addExtra(const std::vector<ExtraPath>& extra);
  /// The host paths the host asked for in this build (ABI minor 2).
  std::vector<ExtraPath> specExtraPaths(const kiln_sandbox_spec& spec);

  RootDir& root_;
  std::deque<std::string> strings_;       // deque: c_str() pointers stay valid
  std::vector<MountOp> mounts_;           // the root and store self-binds first
  std::map<std::string, MountOp> binds_;  // by path inside (Nix's order)
  std::vector<MountOp> special_;          // proc, /dev/shm, /dev/pts: last
};

}  // namespace kiln::sandbox_linux

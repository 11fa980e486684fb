#pragma once
// Reading the host's control-group layout (/proc/self/mountinfo,
// /proc/self/cgroup) and the kernel's cgroup files, for cgroups.cc.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/worker/cgroups.h"

namespace kiln::worker {

/// One cgroup file system mount.
struct CgroupMount {
  bool v2 = false;
  std::string root;        ///< the mount's root within the hierarchy
  std::string mountPoint;  ///< where it is mounted
  std::vector<std::string> controllers;  ///< v1: from the super options
};

/// The cgroup mounts in `mountinfo` (/proc/self/mountinfo's format).
std::vector<CgroupMount> parseCgroupMounts(const std::string& mountinfo);

/// /proc/self/cgroup: controller → the process's group path; "" is v2's
/// line (0::/path). A line naming several controllers ("cpu,cpuacct")
/// gives each the path.
std::map<std::string, std::string> parseSelfCgroup(const std::string& text);

/// v2: the directory of the worker's own group and whether it is the
/// hierarchy's root; nullopt without a v2 mount or line.
std::optional<std::pair<std::string, bool>> v2Root(
    const std::vector<CgroupMount>& mounts,
    const std::map<std::string, std::string>& own);

/// The directories of one v1 build group.
struct V1Dirs {
  std::string memory, pids, cpu, cpuacct;  ///< cpu, cpuacct may be ""
  std::vector<std::string> all;            ///< distinct, in that order
};

/// The worker's own directories in the v1 hierarchies.
struct V1Bases {
  std::string memory, pids, cpu, cpuacct;  ///< cpu, cpuacct may be ""
  /// The directories of group `name`: memory and pids always; cpu when
  /// `wantCpu`; cpuacct when on a hierarchy of its own or `wantCpu`.
  V1Dirs dirsFor(const std::string& name, bool wantCpu) const;
};

/// The v1 bases, or nullopt with what is missing in `missing`.
std::optional<V1Bases> v1Bases(const std::vector<CgroupMount>& mounts,
                               const std::map<std::string, std::string>& own,
                               std::string& missing);

/// Whether every word of `words` is among the words of `text`.
bool hasWords(const std::string& text, const std::string& words);

/// The number after `key` in a flat-keyed file ("key N" lines); 0 when the
/// file or the key is missing.
uint64_t keyedValue(const std::optional<std::string>& text,
                    const std::string& key);

/// The number a file holds; 0 when missing or not a number ("max").
uint64_t readNumber(CgroupSystem& sys, const std::string& path);

}  // namespace kiln::worker

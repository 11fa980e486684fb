#pragma once
// Serving inputs to workers (docs/protocol.md, "Transfers"): the metadata
// of central-store paths for BuildStep, and their NARs for NeedPaths,
// streamed through the worker's transfer endpoint with credit. Service
// thread only.

#include <string>
#include <unordered_map>

#include "kiln/protocol/messages.h"
#include "kiln/scheduler/metrics.h"
#include "kiln/store/local_store.h"
#include "temp_files.h"
#include "worker_link.h"

namespace kiln::scheduler {

/// Sends central-store paths to workers. Borrows the store, the link and
/// the metrics, which must outlive it.
class InputServer {
 public:
  InputServer(store::LocalStore& store, WorkerLink& link,
              ServiceMetrics& metrics, const std::string& tmpDir);

  /// Metadata of a valid central-store path, read from the database once:
  /// valid paths never change, and the reference stays valid for the
  /// server's life. (A path collected by a `kiln store gc` from outside
  /// stays cached; serving it to a worker then fails.) Throws
  /// store::InvalidPathError for a path that is not valid.
  const protocol::PathInfo& pathInfo(const store::StorePath& path);
  /// Starts a transfer to `to` of each path of `m` (the caller checked
  /// that the step runs there); a path not in the central store is
  /// refused with an Ack.
  void serve(WorkerConn& to, const protocol::NeedPaths& m);

 private:
  store::LocalStore& store_;
  WorkerLink& link_;
  ServiceMetrics& metrics_;
  TempNames temps_;
  std::unordered_map<std::string, protocol::PathInfo> cache_;  // by base name
};

}  // namespace kiln::scheduler

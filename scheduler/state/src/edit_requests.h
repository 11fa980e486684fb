#pragma once
// The request that edits a project (`project-edit`), added to the offline
// table by offline_requests.cc; jobsets are edited by `jobset-update` there.

#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// Adds `project-edit` to `t`, working on `db` (borrowed for the table's
/// life). It answers the row as it is afterwards.
void addEditRequests(RequestTable& t, StateDb& db);

}  // namespace kiln::scheduler

#pragma once
// The requests that edit projects and jobsets (`project-edit`,
// `jobset-edit`), added to the offline table by operations.cc.

#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// Adds `project-edit` and `jobset-edit` to `t`, working on `db` (borrowed
/// for the table's life). Each answers the row as it is afterwards.
void addEditRequests(RequestTable& t, StateDb& db);

}  // namespace kiln::scheduler

#pragma once
// Text helpers of the PostgreSQL backend (sql_postgres.cc).

#include <string>
#include <string_view>

namespace kiln::scheduler::detail {

/// Whether SQLSTATE `state` names a failure worth running the transaction
/// again for: connection exceptions (08), serialization failure, deadlock,
/// too many connections, and a server shutting down or starting up.
bool transientState(const std::string& state);

/// `sql` with each `?` outside quotes, identifiers and comments as `$1`,
/// `$2`, …; `count` receives how many.
std::string numberPlaceholders(std::string_view sql, int& count);

}  // namespace kiln::scheduler::detail

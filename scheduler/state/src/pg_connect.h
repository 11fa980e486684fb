#pragma once
// Opening a libpq connection, shared by the PostgreSQL backend of sql.h
// (sql_postgres.cc) and the listener of sql_listener.h.
#include <libpq-fe.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::scheduler {

/// Closes a libpq connection (PQfinish).
struct PgConnFree {
  void operator()(PGconn* c) const { PQfinish(c); }
};
/// An open libpq connection, closed when dropped.
using PgConn = std::unique_ptr<PGconn, PgConnFree>;

/// Connects to `url` (checked by checkDatabaseUrl) with `password` when not
/// empty (else libpq's PGPASSFILE), a 10 s connect timeout, TCP
/// keepalives and a 10 s TCP user timeout (a silent server ends the
/// connection within ~11 s) and the libpq keywords in `extra`; notices are
/// dropped. Throws SqlError
/// (transient) naming the URL and libpq's reason.
PgConn connectPostgres(
    const std::string& url, const std::string& password,
    const std::vector<std::pair<const char*, const char*>>& extra = {});

/// The password in the first line of `passwordFile`, or "" when that is
/// "". Throws SqlError if the file is empty, Error if it cannot be read.
std::string readPostgresPassword(const std::string& passwordFile);

}  // namespace kiln::scheduler

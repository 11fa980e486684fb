// Opening a libpq connection (pg_connect.h).
#include "pg_connect.h"

#include "kiln/common/file.h"
#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {

PgConn connectPostgres(
    const std::string& url, const std::string& password,
    const std::vector<std::pair<const char*, const char*>>& extra) {
  // A server that stops answering (its host gone, the network cut) ends
  // the connection after ~10 s (TCP keepalives, unacknowledged data)
  // instead of the kernel's retransmission timeout of many minutes: a
  // statement waiting on it fails (transient) and the caller goes on.
  std::vector<const char*> keys = {"dbname",           "connect_timeout",
                                   "application_name", "keepalives",
                                   "keepalives_idle",  "keepalives_interval",
                                   "keepalives_count", "tcp_user_timeout"};
  std::vector<const char*> vals = {url.c_str(), "10", "kiln", "1",
                                   "5",         "2",  "3",    "10000"};
  if (!password.empty()) {
    keys.push_back("password");
    vals.push_back(password.c_str());
  }
  for (auto& [k, v] : extra) {
    keys.push_back(k);
    vals.push_back(v);
  }
  keys.push_back(nullptr);
  vals.push_back(nullptr);
  PgConn conn(PQconnectdbParams(keys.data(), vals.data(), 1));
  if (!conn) throw SqlError("PostgreSQL " + url + ": out of memory", true);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn.get());
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw SqlError("cannot connect to PostgreSQL " + url + ": " + msg, true);
  }
  PQsetNoticeProcessor(
      conn.get(), [](void*, const char*) {}, nullptr);
  return conn;
}

std::string readPostgresPassword(const std::string& passwordFile) {
  if (passwordFile.empty()) return "";
  std::string text = readFile(passwordFile);
  std::string password = text.substr(0, text.find('\n'));
  if (password.empty())
    throw SqlError("password file " + passwordFile + " is empty", false);
  return password;
}

}  // namespace kiln::scheduler

// SQL text for the PostgreSQL backend (postgres_text.h) and the check of
// a database URL (sql.h).
#include "postgres_text.h"

#include <libpq-fe.h>

#include "kiln/scheduler/sql.h"

namespace kiln::scheduler::detail {

bool transientState(const std::string& state) {
  return state.starts_with("08") || state == "40001" || state == "40P01" ||
         state == "53300" || state == "57P01" || state == "57P02" ||
         state == "57P03";
}

std::string numberPlaceholders(std::string_view sql, int& count) {
  std::string out;
  out.reserve(sql.size() + 16);
  count = 0;
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (quote) {
      out += c;
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      size_t end = sql.find('\n', i);
      if (end == std::string_view::npos) end = sql.size();
      out.append(sql.substr(i, end - i));
      i = end - 1;
    } else if (c == '?') {
      out += '$' + std::to_string(++count);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace kiln::scheduler::detail

namespace kiln::scheduler {

void checkDatabaseUrl(const std::string& url) {
  if (url.empty()) return;
  if (!url.starts_with("postgresql://") && !url.starts_with("postgres://"))
    throw SqlError("database URL '" + url +
                       "' is not a PostgreSQL URL (postgresql://user@host:"
                       "port/database)",
                   false);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (!opts) {
    std::string msg = err ? err : "cannot parse it";
    PQfreemem(err);
    throw SqlError("database URL: " + msg, false);
  }
  bool hasPassword = false;
  for (auto* o = opts; o->keyword; ++o)
    if (std::string_view(o->keyword) == "password" && o->val && *o->val)
      hasPassword = true;
  PQconninfoFree(opts);
  if (hasPassword)
    throw SqlError(
        "database URL holds a password: take it out of the URL and put it "
        "in a PGPASSFILE (host:port:database:user:password) or a password "
        "file option",
        false);
}

}  // namespace kiln::scheduler

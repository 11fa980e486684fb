// A PostgreSQL statement's parameters and result rows (sql_postgres_stmt.h).
#include "sql_postgres_stmt.h"

#include <cerrno>
#include <cstdlib>

#include "kiln/common/file.h"         // isUtf8
#include "kiln/scheduler/state_db.h"  // SchedulerStateError

namespace kiln::scheduler::detail {

void PostgresStmt::bindText(std::string_view v) {
  // PostgreSQL would refuse the statement (and with it the transaction):
  // say what is wrong with the caller's text instead.
  if (!isUtf8(v) || v.find('\0') != std::string_view::npos)
    throw SchedulerStateError(
        "text is not valid UTF-8 (or holds a NUL byte), which a "
        "PostgreSQL state database cannot store or compare");
  push(std::string(v));
}

void PostgresStmt::push(std::optional<std::string> v) {
  if (static_cast<int>(values_.size()) >= params_)
    throw SqlError("too many parameters bound to '" + sql_ + "'", false);
  values_.push_back({std::move(v), false});
}

void PostgresStmt::check(int col) const {
  if (!res_ || row_ < 0 || row_ >= PQntuples(res_.get()) || col < 0 ||
      col >= PQnfields(res_.get()))
    throw SqlError("no column " + std::to_string(col) + " in '" + sql_ + "'",
                   false);
}

void PostgresStmt::checkBound() const {
  if (static_cast<int>(values_.size()) != params_)
    throw SqlError("'" + sql_ + "' has " + std::to_string(params_) +
                       " parameters, " + std::to_string(values_.size()) +
                       " bound",
                   false);
}

bool PostgresStmt::step() {
  if (!res_) {
    checkBound();
    res_ = c_.run(sql_, values_);
    row_ = 0;
  } else {
    ++row_;
  }
  return row_ < PQntuples(res_.get());
}

void PostgresStmt::execute() {
  checkBound();
  c_.runWithoutRows(sql_, values_);
  reset();
}

double PostgresStmt::getDouble(int col) const {
  check(col);
  return std::strtod(PQgetvalue(res_.get(), row_, col), nullptr);
}

std::string PostgresStmt::getStr(int col) const {
  check(col);
  return std::string(PQgetvalue(res_.get(), row_, col),
                     PQgetlength(res_.get(), row_, col));
}

bool PostgresStmt::isNull(int col) const {
  check(col);
  return PQgetisnull(res_.get(), row_, col) != 0;
}

std::string PostgresStmt::getBlob(int col) const {
  check(col);
  if (PQgetisnull(res_.get(), row_, col)) return "";
  // BYTEA's text form (hex, or the old escape format): libpq decodes both.
  size_t n = 0;
  auto* text =
      reinterpret_cast<const unsigned char*>(PQgetvalue(res_.get(), row_, col));
  unsigned char* bytes = PQunescapeBytea(text, &n);
  if (!bytes)
    throw SqlError("column " + std::to_string(col) + " of '" + sql_ +
                       "' is not BYTEA (or memory ran out)",
                   false);
  std::string out(reinterpret_cast<const char*>(bytes), n);
  PQfreemem(bytes);
  return out;
}

int64_t PostgresStmt::getInt(int col) const {
  check(col);
  if (PQgetisnull(res_.get(), row_, col)) return 0;
  const char* v = PQgetvalue(res_.get(), row_, col);
  if (v[0] == 't' && v[1] == 0) return 1;
  if (v[0] == 'f' && v[1] == 0) return 0;
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || (*end != 0 && *end != '.'))
    throw SqlError("column " + std::to_string(col) + " of '" + sql_ +
                       "' is not an integer: '" + v + "'",
                   false);
  return n;
}

}  // namespace kiln::scheduler::detail

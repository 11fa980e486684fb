#pragma once
// A statement of the PostgreSQL backend (sql_postgres.cc): its bound
// parameters and the rows of its result (sql_postgres_stmt.cc), run
// through the connection that prepared it.

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/scheduler/sql.h"

namespace kiln::scheduler::detail {

struct PgResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
/// An owned libpq result.
using PgResult = std::unique_ptr<PGresult, PgResultFree>;

/// A bound parameter: its text (or bytes, when `binary`), or NULL.
struct PgParam {
  std::optional<std::string> value;
  bool binary = false;
};

/// How a statement reaches the server: its connection.
class PgRunner {
 public:
  virtual ~PgRunner() = default;
  /// Runs `sql` (prepared by the connection) with `values`; its result.
  virtual PgResult run(const std::string& sql,
                       const std::vector<PgParam>& values) = 0;
  /// Runs `sql` with `values` when nobody reads its rows (queued in the
  /// pipeline inside a transaction).
  virtual void runWithoutRows(const std::string& sql,
                              const std::vector<PgParam>& values) = 0;
};

/// A prepared statement: text parameters (binary for bindBlob), text
/// results (BYTEA's text form decoded by getBlob).
class PostgresStmt : public SqlStmtImpl {
 public:
  /// `sql` as prepared, with `params` placeholders, run through `c`.
  PostgresStmt(PgRunner& c, std::string sql, int params)
      : c_(c), sql_(std::move(sql)), params_(params) {}

  void bindInt(int64_t v) override { push(std::to_string(v)); }
  void bindText(std::string_view v) override;
  void bindNull() override { push(std::nullopt); }
  void bindBlob(std::string_view v) override {
    push(std::string(v));
    values_.back().binary = true;
  }
  bool step() override;
  void execute() override;
  void reset() override {
    values_.clear();
    res_.reset();
    row_ = -1;
  }
  int64_t getInt(int col) const override;
  double getDouble(int col) const override;
  std::string getStr(int col) const override;
  bool isNull(int col) const override;
  int columnCount() const override { return res_ ? PQnfields(res_.get()) : 0; }
  std::string getBlob(int col) const override;

 private:
  void push(std::optional<std::string> v);
  void check(int col) const;
  void checkBound() const;

  PgRunner& c_;
  std::string sql_;
  int params_;
  std::vector<PgParam> values_;
  PgResult res_;
  int row_ = -1;
};

}  // namespace kiln::scheduler::detail

// The backend-neutral half of sql.h: nested transactions and the retry of
// transient failures.
#include "kiln/scheduler/sql.h"

#include "kiln/common/retry.h"

namespace kiln::scheduler {

SqlConnection::Txn::Txn(SqlConnection& c) : c_(c) {
  if (c_.depth_ == 0) {
    c_.exec(c_.beginSql());
  } else {
    savepoint_ = "kiln_sp" + std::to_string(++c_.savepoints_);
    c_.exec("SAVEPOINT " + savepoint_);
  }
  ++c_.depth_;
}

SqlConnection::Txn::~Txn() {
  if (!active_) return;
  --c_.depth_;
  try {
    if (savepoint_.empty()) {
      c_.exec("ROLLBACK");
    } else {
      c_.exec("ROLLBACK TO SAVEPOINT " + savepoint_);
      c_.exec("RELEASE SAVEPOINT " + savepoint_);
    }
  } catch (...) {
    // The database may have ended the transaction itself (SQLite after
    // SQLITE_FULL, a lost PostgreSQL connection): nothing is left to undo.
  }
  if (c_.depth_ == 0) c_.transactionEnded();
}

void SqlConnection::Txn::commit() {
  // A failed COMMIT leaves active_ set: the destructor's ROLLBACK ends
  // what SQLite keeps open (PostgreSQL has ended it already).
  c_.exec(savepoint_.empty() ? std::string("COMMIT")
                             : "RELEASE SAVEPOINT " + savepoint_);
  active_ = false;
  if (--c_.depth_ == 0) c_.transactionEnded();
}

bool isUtf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80         ? 1
              : (c >> 5) == 6  ? 2
              : (c >> 4) == 14 ? 3
              : (c >> 3) == 30 ? 4
                               : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int k = 1; k < len; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

void retryTransient(const std::function<void()>& fn,
                    std::chrono::milliseconds timeout) {
  retryWithBackoff<SqlError>(
      fn, [](const SqlError& e) { return e.transient(); }, timeout,
      std::chrono::milliseconds(1000));
}

}  // namespace kiln::scheduler

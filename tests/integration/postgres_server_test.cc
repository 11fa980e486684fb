// tests/support/postgres_server.h and scripts/start-postgres.sh (issue 31's
// second state backend): a real PostgreSQL server answers over TCP with the
// password from its PGPASSFILE and refuses a wrong one, listens on
// 127.0.0.1 only, keeps its data across stop() and start(), makes fresh
// databases, and leaves no process behind.
#include "postgres_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// The local addresses (as /proc/net/tcp{,6} spell them, hex) of the TCP
// sockets listening on `port`, in this network namespace.
std::set<std::string> listeningAddresses(int port) {
  std::set<std::string> out;
  char want[8];
  std::snprintf(want, sizeof want, "%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      auto colon = local.find(':');
      if (state == "0A" && local.substr(colon + 1) == want)
        out.insert(local.substr(0, colon));
    }
  }
  return out;
}

// A process: its pid and start time (so that a reused pid is not it).
using ProcessId = std::pair<long, std::string>;

// The state letter and start time of process `pid`, from /proc/PID/stat;
// nullopt if it is gone.
std::optional<std::pair<char, std::string>> statOf(long pid, long* ppid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  // After "(comm)": state ppid ... starttime is the 20th field after comm.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field, start;
  char state = '?';
  rest >> state;
  long parent = 0;
  rest >> parent;
  if (ppid) *ppid = parent;
  for (int i = 3; i <= 20 && rest >> field; ++i) start = field;
  return std::make_pair(state, start);
}

// The postmaster of the cluster in `dataDir` and its children.
std::vector<ProcessId> serverProcesses(const std::string& dataDir) {
  std::istringstream pidFile(readFile(dataDir + "/postmaster.pid"));
  long postmaster = 0;
  pidFile >> postmaster;
  std::vector<ProcessId> out;
  auto self = statOf(postmaster, nullptr);
  if (!self) return out;
  out.emplace_back(postmaster, self->second);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    long pid = std::stol(name), ppid = 0;
    auto st = statOf(pid, &ppid);
    if (st && ppid == postmaster) out.emplace_back(pid, st->second);
  }
  return out;
}

// Whether process `p` still runs (a zombie waiting to be reaped does not).
bool alive(const ProcessId& p) {
  auto st = statOf(p.first, nullptr);
  return st && st->second == p.second && st->first != 'Z';
}

TEST(PostgresServer, AnswersWithThePassFilesPasswordOnly) {
  KILN_SKIP_UNLESS_POSTGRES();
  test::PostgresServer pg;
  EXPECT_EQ(pg.url(), "postgresql://kiln@127.0.0.1:" +
                          std::to_string(pg.port()) + "/kiln");
  struct stat st {};
  ASSERT_EQ(::stat(pg.passFile().c_str(), &st), 0) << pg.passFile();
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());

  auto one = pg.psql("SELECT 1");
  EXPECT_EQ(one.exitCode, 0) << one.err;
  EXPECT_EQ(one.out, "1\n");
  auto who = pg.psql("SELECT current_user, current_database()");
  EXPECT_EQ(who.out, "kiln|kiln\n") << who.err;

  // The same over TCP with another password, and with none: refused.
  TempDir scratch("kiln-pg-test");
  std::string wrong = scratch.path() + "/pgpass";
  writeFile(wrong, "127.0.0.1:" + std::to_string(pg.port()) +
                       ":*:kiln:not-the-password\n");
  ASSERT_EQ(::chmod(wrong.c_str(), 0600), 0);
  auto refused = test::run(
      {pg.binDir() + "/psql", "-w", "-X", "-d", pg.url(), "-c", "SELECT 1"}, "",
      {"PGPASSFILE=" + wrong});
  EXPECT_NE(refused.exitCode, 0);
  EXPECT_THAT(refused.err, HasSubstr("password authentication failed"));
  auto none = test::run(
      {pg.binDir() + "/psql", "-w", "-X", "-d", pg.url(), "-c", "SELECT 1"}, "",
      {"PGPASSFILE=" + scratch.path() + "/missing"});
  EXPECT_NE(none.exitCode, 0);
  EXPECT_THAT(none.err, HasSubstr("no password supplied"));
}

TEST(PostgresServer, ListensOn127001Only) {
  KILN_SKIP_UNLESS_POSTGRES();
  test::PostgresServer pg;
  // 127.0.0.1 in /proc/net/tcp's byte order; no 0.0.0.0, no IPv6.
  EXPECT_EQ(listeningAddresses(pg.port()), std::set<std::string>{"0100007F"});
}

TEST(PostgresServer, StopAndStartKeepTheRows) {
  KILN_SKIP_UNLESS_POSTGRES();
  test::PostgresServer pg;
  auto made =
      pg.psql("CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2), (3)");
  ASSERT_EQ(made.exitCode, 0) << made.err;
  std::string url = pg.url();
  int port = pg.port();

  pg.stop();
  EXPECT_FALSE(pg.running());
  EXPECT_TRUE(listeningAddresses(port).empty());
  auto down = pg.psql("SELECT 1");
  EXPECT_NE(down.exitCode, 0);
  EXPECT_THAT(down.err, HasSubstr("Connection refused"));
  pg.stop();  // a no-op

  pg.start();
  EXPECT_TRUE(pg.running());
  EXPECT_EQ(pg.port(), port);
  EXPECT_EQ(pg.url(), url);
  auto rows = pg.psql("SELECT sum(x) FROM t");
  EXPECT_EQ(rows.exitCode, 0) << rows.err;
  EXPECT_EQ(rows.out, "6\n");
}

TEST(PostgresServer, CreatesFreshDatabases) {
  KILN_SKIP_UNLESS_POSTGRES();
  test::PostgresServer pg;
  std::string second = pg.createDatabase("second_db");
  EXPECT_EQ(second, "postgresql://kiln@127.0.0.1:" + std::to_string(pg.port()) +
                        "/second_db");
  ASSERT_EQ(pg.psql("CREATE TABLE only_here (x int)", second).exitCode, 0);
  EXPECT_EQ(pg.psql("SELECT current_database()", second).out, "second_db\n");
  auto elsewhere = pg.psql("SELECT * FROM only_here");
  EXPECT_NE(elsewhere.exitCode, 0);
  EXPECT_THAT(elsewhere.err, HasSubstr("does not exist"));
  try {
    pg.createDatabase("second_db");
    ADD_FAILURE() << "a second createDatabase of one name succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("already exists"));
  }
  EXPECT_THROW(pg.createDatabase("Bad-Name"), Error);
  EXPECT_THROW(pg.createDatabase(""), Error);
}

TEST(PostgresServer, DestructorLeavesNoProcessAndNoFolder) {
  KILN_SKIP_UNLESS_POSTGRES();
  std::vector<ProcessId> procs;
  std::string dataDir;
  {
    test::PostgresServer pg;
    dataDir = pg.dataDir();
    procs = serverProcesses(dataDir);
    // The postmaster and its helpers (checkpointer, walwriter, ...).
    // Children come and go (a backend ending, an autovacuum worker), so only
    // the postmaster is required alive here; all must be gone afterwards.
    ASSERT_GE(procs.size(), 3u);
    EXPECT_TRUE(alive(procs.front())) << procs.front().first;
  }
  EXPECT_TRUE(test::pollUntil(
      [&] {
        for (const auto& p : procs)
          if (alive(p)) return false;
        return true;
      },
      10s));
  for (const auto& p : procs) EXPECT_FALSE(alive(p)) << p.first;
  EXPECT_FALSE(pathExists(dataDir));
}

}  // namespace
}  // namespace kiln

// Build logs on a farm whose state is in PostgreSQL (issue 31, "live logs
// reach every front end"): a `kiln web --database URL` with a state
// directory of its own, not the scheduler's, shows a running build's log
// live (server-sent events) and the finished log (download and the
// binary cache's `/log/<drv>`), and `kiln log --database URL` prints it,
// all from the database. A stored log that does not decompress is a clear
// error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln_process.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A GET whose answer is read as it streams: wait() reads until the
// received text holds what is asked for, or the deadline passes.
class StreamingGet {
 public:
  StreamingGet(int port, const std::string& path)
      : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throwSysError("connecting to port " + std::to_string(port));
    writeAll(fd_.get(), "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  }

  bool wait(const std::string& text, std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (got_.find(text) == std::string::npos && !closed_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      ssize_t n = read(fd_.get(), buf, sizeof buf);
      if (n <= 0)
        closed_ = true;
      else
        got_.append(buf, static_cast<size_t>(n));
    }
    return got_.find(text) != std::string::npos;
  }
  const std::string& got() const { return got_; }

 private:
  AutoCloseFD fd_;
  std::string got_;
  bool closed_ = false;
};

class PostgresLogs : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    pg_ = std::make_unique<test::PostgresServer>();
    setenv("PGPASSFILE", pg_->passFile().c_str(), 1);
    url_ = pg_->createDatabase("logs");
    coll_ = dir_.path() + "/coll";
    createDirs(coll_);
    // The builder says one line, waits for the test's word (a file), says
    // another and ends: its log is seen while it runs.
    writeFile(
        coll_ + "/default.nix",
        "{ talk = derivation { name = \"talk\"; system = "
        "\"x86_64-linux\"; builder = \"/bin/sh\"; args = [ \"-c\" "
        "\"echo first-live-line; while [ ! -e " +
            dir_.path() +
            "/go ]; do /bin/sleep 0.05; done; echo second-line; echo done > "
            "$out\" ]; }; }\n");
  }

  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--database", url_});
    return test::run(args);
  }

  // Build `id` as the front end on `port` shows it (null until it can).
  static nlohmann::json build(int port, int64_t id) {
    try {
      return nlohmann::json::parse(
          test::httpGet(port, "/api/build/" + std::to_string(id)));
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  TempDir dir_{"kiln-pglogs"};
  std::unique_ptr<test::PostgresServer> pg_;
  std::string url_, coll_;
};

TEST_F(PostgresLogs, AFrontEndOnAnotherStateDirShowsLiveAndFinishedLogs) {
  ASSERT_EQ(kiln({"project", "create", "demo"}).exitCode, 0);
  ASSERT_EQ(kiln({"jobset", "create", "--project", "demo", "main", "--location",
                  coll_, "--check-interval", "0"})
                .exitCode,
            0);
  test::KilnProcess sched(
      {"scheduler", "--state-dir", dir_.path() + "/s", "--database", url_,
       "--listen", "tcp://127.0.0.1:*", "--insecure-plaintext"},
      dir_.path() + "/s.log");
  ASSERT_TRUE(sched.waitForLog("listening tcp://", 30s)) << sched.log();
  std::string endpoint = sched.log();
  endpoint = endpoint.substr(endpoint.find("listening tcp://") + 10);
  endpoint = endpoint.substr(0, endpoint.find_first_of("\n "));
  test::KilnProcess worker(
      {"worker", "--connect", endpoint, "--insecure-plaintext", "--state-dir",
       dir_.path() + "/w", "--private-store", "--sandbox", "none"},
      dir_.path() + "/w.log");
  // The front end's state directory is its own: no log file is there.
  test::KilnProcess web({"web", "--database", url_, "--listen", "127.0.0.1:0",
                         "--state-dir", dir_.path() + "/web"},
                        dir_.path() + "/web.log");
  ASSERT_TRUE(web.waitForLog("web http://", 30s)) << web.log();
  std::string wl = web.log();
  int port = std::stoi(wl.substr(wl.find("web http://127.0.0.1:") + 21));
  ASSERT_EQ(kiln({"jobset", "eval", "--project", "demo", "main"}).exitCode, 0);

  // Live: the first line arrives while the builder waits.
  ASSERT_TRUE(test::pollUntil([&] { return build(port, 1).is_object(); }, 60s))
      << sched.log();
  StreamingGet live(port, "/build/1/log/live");
  ASSERT_TRUE(live.wait("data: first-live-line", 60s))
      << live.got() << sched.log() << worker.log();
  EXPECT_THAT(live.got(), ::testing::Not(HasSubstr("second-line")));
  std::string drv = build(port, 1)["build"].value("drvPath", "");
  ASSERT_FALSE(drv.empty());
  auto r = kiln({"log", drv});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("first-live-line\n"));

  writeFile(dir_.path() + "/go", "");
  ASSERT_TRUE(live.wait("event: end", 60s)) << live.got() << sched.log();
  EXPECT_THAT(live.got(), HasSubstr("data: second-line"));

  // Finished: stored whole in the database, its pieces gone.
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return pg_->psql("SELECT count(*) FROM step_logs", url_).out == "1\n";
      },
      30s))
      << sched.log();
  EXPECT_EQ(pg_->psql("SELECT count(*) FROM step_log_chunks", url_).out, "0\n");
  std::string log = test::httpGet(port, "/build/1/log");
  EXPECT_EQ(log, "first-live-line\nsecond-line\n");
  std::string base = drv.substr(drv.rfind('/') + 1);
  EXPECT_EQ(test::httpGet(port, "/log/" + base), log);
  r = kiln({"log", drv});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, log);
  r = kiln({"log", "--list", base});
  EXPECT_EQ(r.out, "1\tdatabase\n");
  // The scheduler's own file says the same.
  EXPECT_EQ(readFile(dir_.path() + "/s/logs/" + base + ".1.log"), log);

  // A row that does not decompress: a clear error, no crash.
  pg_->psql("UPDATE step_logs SET body = '\\x00112233'::bytea", url_);
  r = kiln({"log", drv});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("is corrupt"));
  EXPECT_THROW(test::httpGet(port, "/build/1/log"), Error);
  EXPECT_TRUE(web.running());
  EXPECT_THAT(test::httpGet(port, "/api/build/1"), HasSubstr("\"logs\""));

  EXPECT_EQ(web.stop(), 0) << web.log();
  EXPECT_EQ(worker.stop(), 0) << worker.log();
  EXPECT_EQ(sched.stop(), 0) << sched.log();
}

}  // namespace
}  // namespace kiln

// Notifications of a real farm to a webhook listener on loopback (issue
// 10): every event of an evaluation arrives, in order per build, signed,
// across a scheduler SIGKILL and restart in the middle and a listener that
// is down for a while, with the backlog on /metrics meanwhile; duplicates
// are allowed and share their id. The command notifier gets the same
// events on a command's stdin after the command failed for a while.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "farm.h"
#include "http_recorder.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// One received POST.
struct Received {
  std::string event, signature, body;
};

// A minimal HTTP/1.1 listener on 127.0.0.1: answers 200 to each POST and
// records it. down() closes the listening socket (connections are
// refused), up() listens again on the same port.
class Listener {
 public:
  Listener() {
    up();
    sockaddr_in a{};
    socklen_t n = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Listener() {
    stop_ = true;
    thread_.join();
    down();
  }
  int port() const { return port_; }
  void up() {
    std::lock_guard<std::mutex> l(mu_);
    AutoCloseFD fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) throwSysError("socket");
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(fd.get(), 16) != 0)
      throwSysError("listener on port " + std::to_string(port_));
    fd_ = fd.release();
  }
  void down() {
    std::lock_guard<std::mutex> l(mu_);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  std::vector<Received> received() {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }

 private:
  void serve() {
    while (!stop_) {
      int lfd;
      {
        std::lock_guard<std::mutex> l(mu_);
        lfd = fd_;
      }
      pollfd p{lfd, POLLIN, 0};
      // A negative fd (down) is ignored by poll: it just waits 20 ms.
      if (poll(&p, 1, 20) <= 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      if (fd_ != lfd) continue;
      int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) handle(AutoCloseFD(c));
    }
  }
  // Reads one request (headers, then Content-Length bytes) and answers.
  void handle(AutoCloseFD c) {
    std::string data;
    char buf[65536];
    size_t headEnd = std::string::npos, need = 0;
    while (headEnd == std::string::npos || data.size() < headEnd + 4 + need) {
      pollfd p{c.get(), POLLIN, 0};
      if (poll(&p, 1, 5000) <= 0) return;
      ssize_t n = read(c.get(), buf, sizeof buf);
      if (n <= 0) return;
      data.append(buf, static_cast<size_t>(n));
      if (headEnd == std::string::npos &&
          (headEnd = data.find("\r\n\r\n")) != std::string::npos)
        need = std::stoul(header(data.substr(0, headEnd), "content-length"));
    }
    std::string head = data.substr(0, headEnd);
    got_.push_back({header(head, "x-kiln-event"),
                    header(head, "x-kiln-signature-256"),
                    data.substr(headEnd + 4, need)});
    std::string ok =
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n";
    (void)!write(c.get(), ok.data(), ok.size());
  }
  static std::string header(const std::string& head, const std::string& name) {
    std::string lower;
    for (char ch : head) lower += static_cast<char>(std::tolower(ch));
    auto at = lower.find("\r\n" + name + ":");
    if (at == std::string::npos) return "0";
    at += name.size() + 3;
    auto end = head.find("\r\n", at);
    std::string v = head.substr(at, end - at);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    return v;
  }

  std::mutex mu_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<Received> got_;
  std::thread thread_;
};

// The events of one build, deduplicated by id, in arrival order.
std::map<int64_t, std::vector<std::string>> eventsPerBuild(
    const std::vector<Received>& got) {
  std::set<std::string> seen;
  std::map<int64_t, std::vector<std::string>> out;
  for (auto& r : got) {
    auto j = json::parse(r.body);
    if (!seen.insert(j["id"].get<std::string>()).second) continue;
    if (j.contains("build"))
      out[j["build"]["id"].get<int64_t>()].push_back(
          j["event"].get<std::string>());
  }
  return out;
}

TEST(NotifyWebhook, EveryEventArrivesInOrderAcrossAKillAndAnOutage) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  Listener listener;
  TempDir secrets("kiln-notify-secret");
  writeFile(secrets.path() + "/secret", "s3cret\n");
  test::FarmOptions o;
  o.heartbeat = 300ms;
  o.schedulerArgs = {
      "--retry-backoff-ms",
      "100",
      "--notify",
      "webhook:http://127.0.0.1:" + std::to_string(listener.port()) + "/hook",
      "--notify-secret-file",
      secrets.path() + "/secret"};
  test::Farm farm(o);
  std::string dir =
      farm.writeCollection("queue", test::partsCollection(8, true));
  farm.startScheduler();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s));
  farm.createJobset("p", "j", dir);
  int64_t eval = farm.evaluate("p", "j");
  auto finishedBuilds = [&] {
    size_t n = 0;
    for (auto& [id, ev] : eventsPerBuild(listener.received()))
      n += !ev.empty() && ev.back() == "build.finished";
    return n;
  };
  ASSERT_TRUE(test::pollUntil([&] { return finishedBuilds() >= 3; }, 120s))
      << farm.scheduler().log();
  // Killed in the middle, and the listener goes down while it restarts.
  farm.killScheduler();
  listener.down();
  farm.startScheduler();
  ASSERT_TRUE(farm.waitForBuilds(eval, 180s)) << farm.scheduler().log();
  // Meanwhile /metrics shows what waits and the failed attempts.
  const std::string hook = "{notifier=\"webhook\"}";
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return farm.metric("kiln_notification_failures_total" + hook)
                   .value_or(0) > 0;
      },
      60s))
      << farm.metricsText();
  EXPECT_GT(farm.metric("kiln_notifications_pending" + hook).value_or(0), 0);
  listener.up();
  auto builds = farm.builds(eval);
  ASSERT_EQ(builds.size(), 9u);
  auto complete = [&] {
    auto per = eventsPerBuild(listener.received());
    for (auto& b : builds)
      if (per[b.id].empty() || per[b.id].back() != "build.finished")
        return false;
    return true;
  };
  ASSERT_TRUE(test::pollUntil(complete, 180s)) << farm.scheduler().log();
  EXPECT_TRUE(test::pollUntil(
      [&] { return farm.metric("kiln_notifications_pending" + hook) == 0.0; },
      60s))
      << farm.metricsText();
  auto got = listener.received();
  std::map<std::string, std::string> bodyOfId;
  std::set<std::string> kinds;
  for (auto& r : got) {
    EXPECT_EQ(r.signature, "sha256=" + test::hmacSha256Hex("s3cret", r.body));
    auto j = json::parse(r.body);
    EXPECT_EQ(r.event, j["event"]);
    kinds.insert(j["event"].get<std::string>());
    auto [it, fresh] = bodyOfId.emplace(j["id"].get<std::string>(), r.body);
    if (!fresh) {
      EXPECT_EQ(it->second, r.body) << "a duplicate differs";
    }
  }
  for (auto k : {"eval.started", "eval.finished", "build.queued",
                 "build.started", "step.finished", "build.finished"})
    EXPECT_TRUE(kinds.count(k)) << k;
  auto per = eventsPerBuild(got);
  for (auto& b : builds) {
    auto& ev = per[b.id];
    ASSERT_GE(ev.size(), 3u) << b.id;
    EXPECT_EQ(ev.front(), "build.queued") << b.id;
    EXPECT_EQ(ev.back(), "build.finished") << b.id;
    for (size_t i = 1; i + 1 < ev.size(); i++)
      EXPECT_EQ(ev[i], "build.started") << b.id;  // again after the restart
  }
  auto last = json::parse(bodyOfId.rbegin()->second);
  EXPECT_TRUE(last.contains("timeMs"));
}

// The command notifier (Hydra's RunCommand): every event's JSON on the
// command's stdin; a command that fails (here, until a flag file exists)
// gets the same events again later, in order, none lost.
TEST(NotifyCommand, EveryEventReachesTheCommandAfterItFailedForAWhile) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  TempDir d("kiln-notify-cmd");
  std::string flag = d.path() + "/ready", out = d.path() + "/events";
  test::FarmOptions o;
  o.heartbeat = 300ms;
  // One JSON object per line (the payload has no newline of its own).
  o.schedulerArgs = {
      "--notify", "command:test -e " + flag + " && { cat; echo; } >> " + out};
  test::Farm farm(o);
  std::string dir =
      farm.writeCollection("queue", test::partsCollection(3, true));
  farm.startScheduler();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s));
  farm.createJobset("p", "j", dir);
  int64_t eval = farm.evaluate("p", "j");
  ASSERT_TRUE(farm.waitForBuilds(eval, 180s)) << farm.scheduler().log();
  EXPECT_FALSE(pathExists(out));  // every attempt failed so far
  writeFile(flag, "");
  auto builds = farm.builds(eval);
  ASSERT_EQ(builds.size(), 4u);
  std::vector<Received> got;
  auto complete = [&] {
    got.clear();
    if (!pathExists(out)) return false;
    std::istringstream lines(readFile(out));
    for (std::string line; std::getline(lines, line);)
      got.push_back({"", "", line});
    auto per = eventsPerBuild(got);
    for (auto& b : builds)
      if (per[b.id].empty() || per[b.id].back() != "build.finished")
        return false;
    return true;
  };
  ASSERT_TRUE(test::pollUntil(complete, 180s)) << farm.scheduler().log();
  // Events are ordered per build and per evaluation, not across them: the
  // evaluation's events may still wait for their next attempt.
  const std::string cmd = "{notifier=\"command\"}";
  ASSERT_TRUE(test::pollUntil(
      [&] { return farm.metric("kiln_notifications_pending" + cmd) == 0.0; },
      180s))
      << farm.metricsText();
  ASSERT_TRUE(complete());
  auto per = eventsPerBuild(got);
  for (auto& b : builds)
    EXPECT_EQ(per[b.id],
              (std::vector<std::string>{"build.queued", "build.started",
                                        "build.finished"}))
        << b.id;
  std::set<std::string> kinds;
  for (auto& r : got)
    kinds.insert(json::parse(r.body)["event"].get<std::string>());
  for (auto k : {"eval.started", "eval.finished", "step.finished"})
    EXPECT_TRUE(kinds.count(k)) << k;
}

}  // namespace
}  // namespace kiln

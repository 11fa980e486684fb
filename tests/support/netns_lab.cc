// Network namespaces for multi-host tests (netns_lab.h).
#include "netns_lab.h"

#include <unistd.h>

#include "kiln/common/error.h"
#include "kiln/common/logging.h"
#include "test_support.h"

namespace kiln::test {
namespace {

constexpr const char* kBridge = "kbr0";
constexpr const char* kWorkerLink = "eth0";

std::string prefix() { return "kiln-" + std::to_string(getpid()) + "-"; }

}  // namespace

void NetnsLab::ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run(argv);
  if (r.exitCode != 0) {
    std::string cmd;
    for (auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw Error(cmd + " failed (exit " + std::to_string(r.exitCode) +
                "): " + r.err);
  }
}

bool NetnsLab::canRun(std::string* why) {
  auto say = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (geteuid() != 0)
    return say("making network namespaces needs root (running as uid " +
               std::to_string(geteuid()) + ")");
  if (!haveProgram("ip")) return say("no `ip` (iproute2) on PATH");
  std::string probe = prefix() + "probe";
  auto r = run({"ip", "netns", "add", probe});
  if (r.exitCode != 0)
    return say("cannot make a network namespace here: " + r.err);
  run({"ip", "netns", "del", probe});
  return true;
}

NetnsLab::NetnsLab(size_t workers) {
  try {
    std::string s = prefix() + "sched";
    ip({"netns", "add", s});
    namespaces_.push_back(s);
    ip({"-n", s, "link", "set", "lo", "up"});
    ip({"-n", s, "link", "add", kBridge, "type", "bridge"});
    ip({"-n", s, "addr", "add", schedulerAddress() + "/24", "dev", kBridge});
    ip({"-n", s, "link", "set", kBridge, "up"});
    for (size_t i = 0; i < workers; i++) addWorkerNamespace(i);
  } catch (...) {
    deleteAll();
    throw;
  }
}

// The veth pair is made inside the scheduler's namespace (its bridge end
// "vw<i>") with the worker's end moved into the worker's namespace.
void NetnsLab::addWorkerNamespace(size_t i) {
  std::string w = prefix() + "w" + std::to_string(i);
  std::string bridgeEnd = "vw" + std::to_string(i);
  ip({"netns", "add", w});
  namespaces_.push_back(w);
  ip({"-n", w, "link", "set", "lo", "up"});
  ip({"-n", schedulerNetns(), "link", "add", bridgeEnd, "type", "veth", "peer",
      "name", kWorkerLink, "netns", w});
  ip({"-n", schedulerNetns(), "link", "set", bridgeEnd, "master", kBridge});
  ip({"-n", schedulerNetns(), "link", "set", bridgeEnd, "up"});
  ip({"-n", w, "addr", "add", workerAddress(i) + "/24", "dev", kWorkerLink});
  ip({"-n", w, "link", "set", kWorkerLink, "up"});
}

void NetnsLab::setWorkerLink(size_t i, bool up) {
  ip({"-n", workerNetns(i), "link", "set", kWorkerLink, up ? "up" : "down"});
}

NetnsLab::~NetnsLab() { deleteAll(); }

void NetnsLab::deleteAll() noexcept {
  // Deleting a namespace deletes its links (and the peers of its veths).
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    try {
      auto r = run({"ip", "netns", "del", *it});
      if (r.exitCode != 0)
        logWarn("netns lab: ip netns del " + *it + ": " + r.err);
    } catch (const std::exception& e) {
      logWarn("netns lab: ip netns del " + *it + ": " + e.what());
    }
  }
  namespaces_.clear();
}

}  // namespace kiln::test

// Network namespaces for multi-host tests (netns_lab.h).
#include "netns_lab.h"

#include <unistd.h>

#include <cctype>

#include "kiln/common/error.h"
#include "kiln/common/logging.h"
#include "test_support.h"

namespace kiln::test {
namespace {

constexpr const char* kBridge = "kbr0";
// A worker's or host's end of its veth pair.
constexpr const char* kHostLink = "eth0";

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

NetnsLab::NetnsLab(size_t workers) : NetnsLab(workers, {}) {}

NetnsLab::NetnsLab(size_t workers, const std::vector<std::string>& hosts)
    : workers_(workers), hosts_(hosts) {
  if (hosts.size() > 100) throw Error("netns lab: more than 100 hosts");
  for (size_t i = 0; i < hosts.size(); i++) {
    bool valid = !hosts[i].empty();
    for (char c : hosts[i])
      valid =
          valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '-');
    if (!valid || hostIndex(hosts[i]) != i)
      throw Error("netns lab: '" + hosts[i] +
                  "' is not a host name of its own");
  }
  try {
    std::string s = prefix() + "sched";
    ip({"netns", "add", s});
    namespaces_.push_back(s);
    ip({"-n", s, "link", "set", "lo", "up"});
    ip({"-n", s, "link", "add", kBridge, "type", "bridge"});
    ip({"-n", s, "addr", "add", schedulerAddress() + "/24", "dev", kBridge});
    ip({"-n", s, "link", "set", kBridge, "up"});
    for (size_t i = 0; i < workers; i++)
      addNamespace(prefix() + "w" + std::to_string(i), "vw" + std::to_string(i),
                   workerAddress(i));
    for (size_t i = 0; i < hosts.size(); i++)
      addNamespace(prefix() + "h-" + hosts[i], "vh" + std::to_string(i),
                   hostAddress(hosts[i]));
  } catch (...) {
    deleteAll();
    throw;
  }
}

// The veth pair is made inside the scheduler's namespace (its bridge end
// `bridgeEnd`) with the other end moved into the new namespace.
void NetnsLab::addNamespace(const std::string& name,
                            const std::string& bridgeEnd,
                            const std::string& address) {
  ip({"netns", "add", name});
  namespaces_.push_back(name);
  ip({"-n", name, "link", "set", "lo", "up"});
  ip({"-n", schedulerNetns(), "link", "add", bridgeEnd, "type", "veth", "peer",
      "name", kHostLink, "netns", name});
  ip({"-n", schedulerNetns(), "link", "set", bridgeEnd, "master", kBridge});
  ip({"-n", schedulerNetns(), "link", "set", bridgeEnd, "up"});
  ip({"-n", name, "addr", "add", address + "/24", "dev", kHostLink});
  ip({"-n", name, "link", "set", kHostLink, "up"});
}

size_t NetnsLab::hostIndex(const std::string& name) const {
  for (size_t i = 0; i < hosts_.size(); i++)
    if (hosts_[i] == name) return i;
  throw Error("netns lab: no host named '" + name + "'");
}

const std::string& NetnsLab::hostNetns(const std::string& name) const {
  return namespaces_.at(1 + workers_ + hostIndex(name));
}

std::string NetnsLab::hostAddress(const std::string& name) const {
  return "10.213.0." + std::to_string(100 + hostIndex(name));
}

void NetnsLab::setWorkerLink(size_t i, bool up) {
  ip({"-n", workerNetns(i), "link", "set", kHostLink, up ? "up" : "down"});
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

#pragma once
/// Network namespaces for a multi-host test (tests/integration/
/// farm_netns_test.cc, farm_netns_postgres_test.cc): one namespace for the
/// scheduler, holding a bridge with the scheduler's address, one per
/// worker and one per named host (a database host, a web front end...),
/// each joined to the bridge by a veth pair and given an address of its
/// own, so every process talks to the others over a link of its own
/// rather than one loopback. Made with `ip` (iproute2); needs root. Everything
/// it made is deleted by the destructor (namespaces, and with them their
/// links), even when the test failed.

#include <string>
#include <vector>

namespace kiln::test {

class NetnsLab {
 public:
  /// Whether namespaces can be made here (root, `ip` on PATH, a probe
  /// namespace created and deleted); otherwise false and `why` says so.
  static bool canRun(std::string* why);
  /// Makes the scheduler's namespace and `workers` worker namespaces, all
  /// links up. Namespace names carry this process's id, so concurrent
  /// tests do not collide. Throws Error (with ip's message) on failure,
  /// after deleting what it made.
  explicit NetnsLab(size_t workers);
  /// The same plus one namespace per name in `hosts` (distinct names of
  /// letters, digits and '-'), e.g. {"db", "sched-a", "web-a"}: host `i`
  /// of the list has the address 10.213.0.(100+i). Up to 100 hosts.
  NetnsLab(size_t workers, const std::vector<std::string>& hosts);
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  /// The scheduler's namespace and its address on the bridge.
  const std::string& schedulerNetns() const { return namespaces_.at(0); }
  std::string schedulerAddress() const { return "10.213.0.1"; }
  /// Worker `i`'s namespace and address.
  const std::string& workerNetns(size_t i) const {
    return namespaces_.at(i + 1);
  }
  std::string workerAddress(size_t i) const {
    return "10.213.0." + std::to_string(10 + i);
  }
  /// The namespace and address of the host named `name`; throws Error for
  /// a name not given to the constructor.
  const std::string& hostNetns(const std::string& name) const;
  std::string hostAddress(const std::string& name) const;
  /// Sets worker `i`'s end of its link down (`up` false) or up again:
  /// nothing passes between it and the scheduler meanwhile.
  void setWorkerLink(size_t i, bool up);

 private:
  /// Runs `ip ARGS...`; throws Error with its stderr unless it exits 0.
  static void ip(const std::vector<std::string>& args);
  /// Makes namespace `name` whose veth pair has the bridge end
  /// `bridgeEnd`, with `address` on its end.
  void addNamespace(const std::string& name, const std::string& bridgeEnd,
                    const std::string& address);
  /// The index of host `name` in hosts_; throws Error if there is none.
  size_t hostIndex(const std::string& name) const;
  /// Deletes every namespace made so far (warning about failures).
  void deleteAll() noexcept;

  std::vector<std::string> namespaces_;  ///< made so far, scheduler first
  size_t workers_ = 0;
  std::vector<std::string> hosts_;  ///< named hosts, after the workers
};

}  // namespace kiln::test

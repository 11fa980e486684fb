#include "cgroup_text.h"

#include <set>
#include <sstream>

namespace kiln::worker {
namespace {

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

/// `own` joined below the mount: the path is relative to the hierarchy's
/// root, the mount shows `root` of it.
std::string dirOf(const CgroupMount& m, const std::string& own) {
  std::string rel = own;
  if (m.root != "/" && rel.compare(0, m.root.size(), m.root) == 0)
    rel = rel.substr(m.root.size());
  if (rel == "/") rel.clear();
  return m.mountPoint + rel;
}

const CgroupMount* v1MountOf(const std::vector<CgroupMount>& mounts,
                             const std::string& controller) {
  for (auto& m : mounts)
    if (!m.v2)
      for (auto& c : m.controllers)
        if (c == controller) return &m;
  return nullptr;
}

}  // namespace

std::vector<CgroupMount> parseCgroupMounts(const std::string& mountinfo) {
  std::vector<CgroupMount> out;
  std::istringstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, superOpts;
    head >> id >> parent >> dev >> root >> point;
    tail >> fstype >> source >> superOpts;
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount m{fstype == "cgroup2", root, point, {}};
    if (!m.v2) m.controllers = splitOn(superOpts, ',');
    out.push_back(std::move(m));
  }
  return out;
}

std::map<std::string, std::string> parseSelfCgroup(const std::string& text) {
  std::map<std::string, std::string> own;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto a = line.find(':');
    auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string names = line.substr(a + 1, b - a - 1),
                path = line.substr(b + 1);
    if (names.empty()) {
      own[""] = path;
      continue;
    }
    for (auto& n : splitOn(names, ',')) own[n] = path;
  }
  return own;
}

std::optional<std::pair<std::string, bool>> v2Root(
    const std::vector<CgroupMount>& mounts,
    const std::map<std::string, std::string>& own) {
  auto line = own.find("");
  if (line == own.end()) return std::nullopt;
  for (auto& m : mounts)
    if (m.v2)
      return std::make_pair(dirOf(m, line->second), line->second == "/");
  return std::nullopt;
}

V1Dirs V1Bases::dirsFor(const std::string& name, bool wantCpu) const {
  V1Dirs d;
  auto join = [&](const std::string& base) {
    return base.empty() ? std::string() : base + "/" + name;
  };
  d.memory = join(memory);
  d.pids = join(pids);
  if (wantCpu) d.cpu = join(cpu);
  if (cpuacct != cpu || wantCpu) d.cpuacct = join(cpuacct);
  std::set<std::string> seen;
  for (auto* p : {&d.memory, &d.pids, &d.cpu, &d.cpuacct})
    if (!p->empty() && seen.insert(*p).second) d.all.push_back(*p);
  return d;
}

std::optional<V1Bases> v1Bases(const std::vector<CgroupMount>& mounts,
                               const std::map<std::string, std::string>& own,
                               std::string& missing) {
  V1Bases b;
  for (auto [controller, field] : {std::pair{"memory", &b.memory},
                                   {"pids", &b.pids},
                                   {"cpu", &b.cpu},
                                   {"cpuacct", &b.cpuacct}}) {
    auto* m = v1MountOf(mounts, controller);
    auto path = own.find(controller);
    if (m && path != own.end()) *field = dirOf(*m, path->second);
  }
  if (b.memory.empty() || b.pids.empty()) {
    missing = "no cgroup v1 memory and pids hierarchies";
    return std::nullopt;
  }
  return b;
}

bool hasWords(const std::string& text, const std::string& words) {
  std::set<std::string> have;
  std::istringstream in(text);
  for (std::string w; in >> w;) have.insert(w);
  std::istringstream want(words);
  for (std::string w; want >> w;)
    if (!have.count(w)) return false;
  return true;
}

uint64_t keyedValue(const std::optional<std::string>& text,
                    const std::string& key) {
  if (!text) return 0;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string k;
    uint64_t v = 0;
    if (words >> k && k == key && words >> v) return v;
  }
  return 0;
}

uint64_t readNumber(CgroupSystem& sys, const std::string& path) {
  auto text = sys.read(path);
  if (!text) return 0;
  std::istringstream in(*text);
  uint64_t v = 0;
  return in >> v ? v : 0;
}

}  // namespace kiln::worker

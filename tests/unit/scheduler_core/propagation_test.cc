// The incremental attribute propagation (priorities, owner, critical path)
// against a from-scratch recomputation, over random DAGs with random builds,
// bumps, cancels and finished steps.

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "harness.h"

namespace kiln::scheduler::test {
namespace {

struct Model {
  struct B {
    JobsetId jobset;
    int node;
    int global;
    int local;
  };
  std::vector<std::vector<int>> deps;
  std::vector<double> dur;
  std::map<BuildId, B> builds;
  std::set<int> done;

  // Steps still needed: reachable from a build through unfinished nodes.
  std::set<int> needed() const {
    std::set<int> seen;
    std::vector<int> stack;
    for (auto& [id, b] : builds) stack.push_back(b.node);
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      if (done.contains(n) || !seen.insert(n).second) continue;
      for (int d : deps[n]) stack.push_back(d);
    }
    return seen;
  }

  // Expected view of node n: fold over builds above it, from scratch.
  StepView expect(int n) const {
    StepView v;
    v.globalPriority = INT_MIN;
    v.localPriority = INT_MIN;
    v.ownerBuild = INT64_MAX;
    v.criticalPath = 0;
    // Longest path from n up to each top: dynamic programming over rdeps.
    std::map<int, double> up;  // memo: longest chain above node (excl.)
    std::function<double(int)> above = [&](int m) -> double {
      if (auto it = up.find(m); it != up.end()) return it->second;
      double best = -1;
      for (auto& [id, b] : builds)
        if (b.node == m) best = std::max(best, 0.0);
      for (size_t r = 0; r < deps.size(); ++r) {
        if (done.contains(static_cast<int>(r))) continue;
        for (int d : deps[r])
          if (d == m) {
            double a = above(static_cast<int>(r));
            if (a >= 0) best = std::max(best, a + dur[r]);
          }
      }
      return up[m] = best;
    };
    v.criticalPath = above(n) + dur[n];
    for (auto& [id, b] : builds) {
      if (!reaches(b.node, n)) continue;
      v.globalPriority = std::max(v.globalPriority, b.global);
      v.localPriority = std::max(v.localPriority, b.local);
      if (id < v.ownerBuild) {
        v.ownerBuild = id;
        v.jobset = b.jobset;
      }
    }
    return v;
  }

  bool reaches(int from, int to) const {
    std::vector<int> stack{from};
    std::set<int> seen;
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      if (n == to) return true;
      if (done.contains(n) || !seen.insert(n).second) continue;
      for (int d : deps[n]) stack.push_back(d);
    }
    return false;
  }
};

void check(Harness& h, const Model& m, const std::vector<StepId>& ids,
           const std::string& when) {
  std::set<int> needed = m.needed();
  for (size_t n = 0; n < ids.size(); ++n) {
    if (m.done.contains(static_cast<int>(n))) continue;
    bool present = h.core.findStep(drv("n" + std::to_string(n))).has_value();
    if (!needed.contains(static_cast<int>(n))) {
      // Never needed (dormant) or dropped: if still there, it is inert.
      if (present) {
        ASSERT_EQ(h.core.step(ids[n]).ownerBuild, 0) << when << " " << n;
        ASSERT_NE(h.core.step(ids[n]).state, StepView::State::kQueued)
            << when << " " << n;
      }
      continue;
    }
    ASSERT_TRUE(present) << when << " node " << n;
    StepView got = h.core.step(ids[n]);
    StepView want = m.expect(static_cast<int>(n));
    ASSERT_DOUBLE_EQ(got.criticalPath, want.criticalPath) << when << " " << n;
    ASSERT_EQ(got.globalPriority, want.globalPriority) << when << " " << n;
    ASSERT_EQ(got.localPriority, want.localPriority) << when << " " << n;
    ASSERT_EQ(got.ownerBuild, want.ownerBuild) << when << " " << n;
    ASSERT_EQ(got.jobset, want.jobset) << when << " " << n;
  }
}

TEST(Propagation, MatchesRecomputationOnRandomGraphs) {
  for (unsigned seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    Harness h;
    Model m;
    std::vector<StepId> ids;
    const int kNodes = 60;
    for (int n = 0; n < kNodes; ++n) {
      std::vector<int> deps;
      std::vector<StepId> depIds;
      for (int k = std::uniform_int_distribution<int>(0, 3)(rng);
           k > 0 && n > 0; --k) {
        int d = std::uniform_int_distribution<int>(0, n - 1)(rng);
        deps.push_back(d);
        depIds.push_back(ids[d]);
      }
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      double dur = std::uniform_int_distribution<int>(1, 9)(rng);
      std::string pname = "p" + std::to_string(n);
      h.core.setHistoricalDuration(pname, dur);
      ids.push_back(
          h.step("n" + std::to_string(n), depIds, "x86_64-linux", {}, pname));
      m.deps.push_back(deps);
      m.dur.push_back(dur);
    }
    BuildId next = 1;
    for (int op = 0; op < 80; ++op) {
      int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      std::string when = "seed " + std::to_string(seed) + " op " +
                         std::to_string(op) + " kind " + std::to_string(kind);
      if (kind < 5 || m.builds.empty()) {
        int node = std::uniform_int_distribution<int>(0, kNodes - 1)(rng);
        if (m.done.contains(node)) continue;
        Model::B b{std::uniform_int_distribution<int>(1, 3)(rng), node,
                   std::uniform_int_distribution<int>(0, 5)(rng),
                   std::uniform_int_distribution<int>(0, 5)(rng)};
        // Re-ingest the closure (dropped steps come back; present ones
        // are returned as they are), dependencies first.
        std::set<int> closure;
        std::vector<int> stack{node};
        while (!stack.empty()) {
          int x = stack.back();
          stack.pop_back();
          if (closure.insert(x).second)
            stack.insert(stack.end(), m.deps[x].begin(), m.deps[x].end());
        }
        for (int x : closure) {
          std::vector<StepId> depIds;
          for (int d : m.deps[x]) depIds.push_back(ids[d]);
          ids[x] = h.step("n" + std::to_string(x), depIds, "x86_64-linux", {},
                          "p" + std::to_string(x));
        }
        h.build(next, ids[node], b.jobset, b.global, b.local);
        m.builds[next++] = b;
      } else {
        auto it = m.builds.begin();
        std::advance(it, std::uniform_int_distribution<size_t>(
                             0, m.builds.size() - 1)(rng));
        if (kind < 8) {
          int g = std::uniform_int_distribution<int>(0, 9)(rng);
          h.core.bumpBuild(it->first, g);
          it->second.global = g;
        } else {
          h.core.cancelBuild(it->first);
          m.builds.erase(it);
        }
      }
      check(h, m, ids, when);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace kiln::scheduler::test

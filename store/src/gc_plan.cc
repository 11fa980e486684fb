#include "kiln/store/gc_plan.h"

#include <functional>

namespace kiln::store {

StorePathSet reachableFrom(const ReferenceGraph& graph,
                           const StorePathSet& roots) {
  StorePathSet seen;
  std::vector<StorePath> todo;
  for (auto& r : roots)
    if (graph.count(r) && seen.insert(r).second) todo.push_back(r);
  while (!todo.empty()) {
    auto p = todo.back();
    todo.pop_back();
    for (auto& ref : graph.at(p))
      if (graph.count(ref) && seen.insert(ref).second) todo.push_back(ref);
  }
  return seen;
}

std::vector<StorePath> planGarbage(const ReferenceGraph& graph,
                                   const StorePathSet& roots) {
  auto live = reachableFrom(graph, roots);
  // Reverse edges among dead paths: reference → its dead referrers.
  std::map<StorePath, std::vector<StorePath>> referrers;
  for (auto& [p, refs] : graph) {
    if (live.count(p)) continue;
    for (auto& r : refs)
      if (r != p && graph.count(r)) referrers[r].push_back(p);
  }
  // Depth-first: emit a path once all its referrers are emitted. The graph
  // of distinct store paths is acyclic (hashes cannot refer in a cycle), but
  // a state guard keeps a corrupt database from recursing forever.
  std::vector<StorePath> order;
  std::map<StorePath, int> state;  // 1 = in progress, 2 = emitted
  std::function<void(const StorePath&)> visit = [&](const StorePath& p) {
    auto& s = state[p];
    if (s) return;
    s = 1;
    for (auto& referrer : referrers[p]) visit(referrer);
    state[p] = 2;
    order.push_back(p);
  };
  for (auto& [p, refs] : graph)
    if (!live.count(p)) visit(p);
  return order;
}

}  // namespace kiln::store

#include "kiln/store/gc_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln::store {
namespace {

StorePath sp(char c, const std::string& name) {
  return StorePath(std::string(32, c) + "-" + name);
}

size_t indexOf(const std::vector<StorePath>& v, const StorePath& p) {
  return static_cast<size_t>(std::find(v.begin(), v.end(), p) - v.begin());
}

TEST(GcPlan, KeepsClosureOfRootsAndOrdersReferrersFirst) {
  auto lib = sp('a', "lib"), app = sp('b', "app"), tool = sp('c', "tool"),
       old = sp('d', "old"), oldDep = sp('f', "old-dep"),
       selfRef = sp('g', "self");
  ReferenceGraph g = {
      {lib, {}},          {app, {lib, app}},          {tool, {lib}},
      {old, {oldDep, old}}, {oldDep, {lib}},            {selfRef, {selfRef}},
  };
  auto order = planGarbage(g, {app});
  // Live: app and lib. Dead: tool, old, old-dep, self.
  EXPECT_EQ(order.size(), 4u);
  for (auto& live : {app, lib})
    EXPECT_EQ(indexOf(order, live), order.size());
  EXPECT_LT(indexOf(order, old), indexOf(order, oldDep));
  EXPECT_LT(indexOf(order, selfRef), order.size());
}

TEST(GcPlan, RootsNotInGraphAreIgnored) {
  auto a = sp('a', "a");
  ReferenceGraph g = {{a, {}}};
  auto order = planGarbage(g, {sp('z', "gone")});
  ASSERT_EQ(order.size(), 1u);
  EXPECT_EQ(order[0], a);
  EXPECT_TRUE(planGarbage(g, {a}).empty());
}

TEST(GcPlan, LongChainIsDeletedTopDown) {
  ReferenceGraph g;
  std::vector<StorePath> chain;
  const std::string alphabet = "0123456789abcdfghijklmnpqrsvwxyz";
  for (char c : alphabet) chain.push_back(sp(c, "n"));
  for (size_t i = 0; i < chain.size(); ++i)
    g[chain[i]] = i + 1 < chain.size() ? StorePathSet{chain[i + 1]}
                                       : StorePathSet{};
  auto order = planGarbage(g, {});
  ASSERT_EQ(order.size(), chain.size());
  for (size_t i = 0; i + 1 < chain.size(); ++i)
    EXPECT_LT(indexOf(order, chain[i]), indexOf(order, chain[i + 1]));
  EXPECT_EQ(reachableFrom(g, {chain[5]}).size(), chain.size() - 5);
}

}  // namespace
}  // namespace kiln::store

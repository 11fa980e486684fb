// Several processes adding, reading and collecting garbage in one store at
// once must neither corrupt it nor lose a live path.
#include "local_store_fixture.h"

namespace kiln::store::testing {
namespace {

constexpr int kAdders = 4;
constexpr int kRounds = 15;

// Adds a chain of shared paths (the same in every adder, so adders race on
// them) and paths of its own, checking after each add that what it added is
// valid and intact; roots the chain's end at the finish.
int adder(const std::string& state, int id) {
  LocalStore store(state);
  StorePathSet prev;
  for (int i = 0; i < kRounds; ++i) {
    std::string shared = "shared " + std::to_string(i) + std::string(i * 100, 's');
    auto s = store.addText("shared-" + std::to_string(i), shared, prev);
    auto own = store.addText("own-" + std::to_string(id) + "-" + std::to_string(i),
                             "own", {s});
    for (auto& [p, want] : {std::pair{s, shared}, std::pair{own, std::string("own")}}) {
      auto info = store.queryPathInfo(p);
      if (!info) return 10;
      if (readFile(store.physicalPath(p)) != want) return 11;
    }
    if (store.queryRequisites({own}).size() != static_cast<size_t>(i + 2)) return 12;
    prev = {s};
  }
  store.addRoot("adder-" + std::to_string(id), *prev.begin());
  return 0;
}

TEST_F(LocalStoreTest, ConcurrentAddersReadersAndCollector) {
  runAddersAgainstCollector(state_, dir_.path() + "/stop", kAdders,
                            [&](int i) { return adder(state_, i); });

  LocalStore store(state_);
  // The rooted chain survives whole; every adder's own paths are now
  // garbage (their temporary roots died with them) and may be gone.
  auto roots = store.findRoots();
  ASSERT_EQ(roots.size(), static_cast<size_t>(kAdders));
  auto closure = store.queryRequisites({roots.begin()->second});
  EXPECT_EQ(closure.size(), static_cast<size_t>(kRounds));
  auto v = store.verify();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front().detail;
  store.collectGarbage();
  EXPECT_EQ(store.queryAllValidPaths(), closure);
  for (auto& e : entries(state_ + "/store"))
    EXPECT_FALSE(e.starts_with(kStoreTempPrefix)) << e;
  EXPECT_TRUE(store.verify().problems.empty());
}

}  // namespace
}  // namespace kiln::store::testing

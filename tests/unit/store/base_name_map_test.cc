// BaseNameMap: DrvHashCache's open-addressing memo table.
#include "kiln/store/base_name_map.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

namespace kiln::store {
namespace {

// A base name like a store path's: 32 nix32-ish characters from `i`, a name.
std::string baseName(unsigned i, const std::string& name = "pkg.drv") {
  static const char kDigits[] = "0123456789abcdfghijklmnpqrsvwxyz";
  std::string s;
  uint64_t x = i * 0x9e3779b97f4a7c15ULL + 1;
  for (int k = 0; k < 32; ++k) {
    s += kDigits[x >> 59];  // an LCG's high bits
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  return s + "-" + name;
}

TEST(BaseNameMap, FindsEveryKeyAndNoOtherAcrossGrowth) {
  BaseNameMap<int> map;
  std::deque<std::string> keys;  // kept: the map holds views
  EXPECT_EQ(map.find(baseName(0)), nullptr);
  for (unsigned i = 0; i < 5000; ++i) {
    keys.push_back(baseName(i));
    ASSERT_EQ(map.find(keys.back()), nullptr);
    map.insert(keys.back(), static_cast<int>(i));
  }
  EXPECT_EQ(map.size(), 5000u);
  for (unsigned i = 0; i < 5000; ++i) {
    auto* it = map.find(baseName(i));  // another copy of the text
    ASSERT_NE(it, nullptr) << i;
    EXPECT_EQ(it->value, static_cast<int>(i));
    EXPECT_EQ(it->key.data(), keys[i].data());  // the kept copy
  }
  for (unsigned i = 5000; i < 6000; ++i)
    EXPECT_EQ(map.find(baseName(i)), nullptr);
}

TEST(BaseNameMap, TellsApartKeysWithTheSameHashBytes) {
  // Equal first 8 bytes (the hash's input) and short keys: compared whole.
  BaseNameMap<int> map;
  std::vector<std::string> keys = {"0000000011111111-a",
                                   "0000000022222222-a",
                                   "0000000011111111-b",
                                   "ab",
                                   "",
                                   "abc"};
  for (size_t i = 0; i < keys.size(); ++i)
    map.insert(keys[i], static_cast<int>(i));
  for (size_t i = 0; i < keys.size(); ++i) {
    auto* it = map.find(std::string(keys[i]));
    ASSERT_NE(it, nullptr) << keys[i];
    EXPECT_EQ(it->value, static_cast<int>(i));
  }
  EXPECT_EQ(map.find("0000000011111111-c"), nullptr);
  EXPECT_EQ(map.find("a"), nullptr);
}

TEST(BaseNameMap, ItemsKeepTheirAddressWhenTheMapGrows) {
  BaseNameMap<int> map;
  std::deque<std::string> keys;
  keys.push_back(baseName(0));
  int* first = &map.insert(keys.back(), 7).value;
  for (unsigned i = 1; i < 3000; ++i) {
    keys.push_back(baseName(i));
    map.insert(keys.back(), 0);
  }
  EXPECT_EQ(&map.find(keys.front())->value, first);
  EXPECT_EQ(*first, 7);
}

}  // namespace
}  // namespace kiln::store

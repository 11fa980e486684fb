// SymbolTable: one id per name, also when threads intern at once while the
// table grows (lock-free lookups of names already interned).
#include "kiln/evaluator/symbol_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kiln::eval {
namespace {

TEST(SymbolTable, OneIdPerNameAndNamesRoundTrip) {
  SymbolTable t;
  Symbol a = t.intern("alpha");
  EXPECT_EQ(t.intern("alpha"), a);
  EXPECT_NE(t.intern("beta"), a);
  EXPECT_EQ(t.name(a), "alpha");
  EXPECT_EQ(std::string(t.cName(a)), "alpha");
  EXPECT_EQ(t.size(), 2u);
}

// The thread's cache of recent names serves each table its own ids: two
// tables that number the same names differently, used in turns, and a
// table made where a destroyed one lived.
TEST(SymbolTable, RecentNamesAreKeptPerTable) {
  SymbolTable a, b;
  Symbol ax = a.intern("x"), ay = a.intern("y");
  Symbol by = b.intern("y"), bx = b.intern("x");
  ASSERT_NE(ax, bx);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.intern("x"), ax);
    EXPECT_EQ(b.intern("x"), bx);
    EXPECT_EQ(a.intern("y"), ay);
    EXPECT_EQ(b.intern("y"), by);
  }
  for (int round = 0; round < 2; ++round) {
    auto t = std::make_unique<SymbolTable>();
    if (round) t->intern("first");  // "name" gets id 2, not the last table's 1
    Symbol s = t->intern("name");
    EXPECT_EQ(t->intern("name"), s);
    EXPECT_EQ(s.id, round ? 2u : 1u);
  }
}

TEST(SymbolTable, SharedInterningFromThreadsWhileTheTableGrows) {
  SymbolTable t;
  t.intern("seed");
  t.setShared(true);
  constexpr int kThreads = 4, kNames = 20000;  // grows the 1,024-slot table many times
  std::vector<std::vector<Symbol>> got(kThreads, std::vector<Symbol>(kNames));
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th)
    threads.emplace_back([&, th] {
      // Each thread walks the names in its own order, so finds and adds mix.
      for (int k = 0; k < kNames; ++k) {
        int i = (k * 7919 + th * 4999) % kNames;  // 7919 is prime to 20,000: a permutation
        got[th][i] = t.intern("name" + std::to_string(i));
      }
    });
  for (auto& th : threads) th.join();
  t.setShared(false);
  EXPECT_EQ(t.size(), size_t{kNames} + 1);
  for (int i = 0; i < kNames; ++i) {
    for (int th = 1; th < kThreads; ++th) ASSERT_EQ(got[th][i], got[0][i]) << i;
    ASSERT_EQ(t.name(got[0][i]), "name" + std::to_string(i));
  }
  EXPECT_EQ(t.intern("name123"), got[0][123]);  // found again after sharing ends
}

}  // namespace
}  // namespace kiln::eval

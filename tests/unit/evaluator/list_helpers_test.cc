// The list helpers (list_helpers.h): while a collection's root is
// evaluated with threads, `concatMap` and `filter` over long lists share
// their elements among the threads, with the results and the errors of
// one thread.
#include "list_helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <sstream>
#include <string>
#include <vector>

#include "eval_parts.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/job_threads.h"
#include "kiln/evaluator/jobs.h"
#include "kiln/evaluator/output.h"

namespace kiln::eval {
namespace {

// Prints `expr` evaluated deeply, with list helpers on `threads` threads
// (1: none), or the error's message.
std::string evalWith(const std::string& expr, unsigned threads) {
  std::string out;
  runWithLargeStack([&] {
    EvalState st;
    try {
      Expr* e = st.parseExprFromString(expr, "/tmp");
      auto deep = [&] {
        Value v;
        st.eval(e, v);
        st.forceValueDeep(v);
        std::ostringstream text;
        printValue(st, text, v);
        out = text.str();
      };
      if (threads < 2) {
        deep();
      } else {
        ListHelpers helpers(st, threads);
        deep();
      }
    } catch (const EvalError& e) {
      out = std::string("error: ") + e.what();
    }
  });
  return out;
}

// A package set filtered as a jobset does (filterAttrs is a concatMap),
// elements that share dependencies, and a nested long concatMap.
const char* kFiltered = R"(
let
  b = builtins;
  filterAttrs = pred: set: b.listToAttrs (b.concatMap (n: let v = set.${n}; in
    if pred n v then [ { name = n; value = v; } ] else [ ]) (b.attrNames set));
  shared = b.genList (i: i * i) 50;
  pkgs = b.listToAttrs (b.genList (i: { name = "p${toString i}"; value = {
    type = if i / 7 * 7 == i then "other" else "derivation";
    deps = b.filter (x: x / 3 * 3 == x) (b.concatMap (j: [ (j + i) ]) (b.genList (j: j) 200));
    sum = b.foldl' (a: x: a + x) 0 shared;
  }; }) 1000);
in b.mapAttrs (n: v: v.deps) (filterAttrs (n: v: v.type == "derivation") pkgs)
)";

TEST(ListHelpers, ConcatMapAndFilterGiveWhatOneThreadGives) {
  const std::string serial = evalWith(kFiltered, 1);
  ASSERT_EQ(serial.find("error"), std::string::npos) << serial;
  EXPECT_EQ(evalWith(kFiltered, 2), serial);
  EXPECT_EQ(evalWith(kFiltered, 4), serial);
}

TEST(ListHelpers, TheFirstErrorInListOrderIsTheOneReported) {
  // Elements 700 and 300 fail; with threads, the block of the second
  // thread starts past 300, so 700 may fail first in time.
  const char* expr = R"(
    builtins.concatMap (i: if i == 700 then throw "seven hundred"
                          else if i == 300 then throw "three hundred" else [ i ])
      (builtins.genList (i: i) 1000))";
  const std::string serial = evalWith(expr, 1);
  EXPECT_NE(serial.find("three hundred"), std::string::npos) << serial;
  for (int round = 0; round < 5; ++round) EXPECT_EQ(evalWith(expr, 2), serial);
  const char* filtered = R"(
    builtins.filter (i: if i == 900 then abort "nine hundred"
                        else if i == 150 then throw "one fifty" else i > 10)
      (builtins.genList (i: i) 1000))";
  EXPECT_NE(evalWith(filtered, 2).find("one fifty"), std::string::npos);
  // tryEval sees the same failure.
  EXPECT_EQ(evalWith(std::string("(builtins.tryEval (builtins.length (") + expr + "))).success", 2),
            "false");
}

TEST(ListHelpers, InfiniteRecursionAcrossThreadsIsReportedNotAwaited) {
  // An element needs the whole result while the list is being made: on
  // a helper, it waits for the thunk the root's thread owns while that
  // thread waits for the helper's elements.
  // (With two threads, the helper's block is 500..999, and the elements
  // are slow enough for the helper to reach 700 itself; 300 is the root's
  // thread's own.)
  for (const char* at : {"700", "300"}) {
    const std::string expr = std::string(R"(
      let
        slow = i: builtins.foldl' (a: x: a + x) i (builtins.genList (x: x) 300);
        xs = builtins.concatMap (i: if i == )") + at + R"( && builtins.length xs > 0 then [ ] else [ (slow i) ])
          (builtins.genList (i: i) 1000);
      in builtins.length xs)";
    EXPECT_NE(evalWith(expr, 1).find("infinite recursion"), std::string::npos) << at;
    EXPECT_NE(evalWith(expr, 2).find("infinite recursion"), std::string::npos) << at;
    EXPECT_NE(evalWith(expr, 3).find("infinite recursion"), std::string::npos) << at;
  }
}

TEST(ListHelpers, ShortListsAndOtherThreadsLoopThemselves) {
  runWithLargeStack([] {
    EvalState st;
    ListHelpers helpers(st, 2);
    std::atomic<int> calls{0};
    // Below kMinElements: not taken, the caller loops.
    EXPECT_FALSE(parallelFor(st, ListHelpers::kMinElements - 1, [&](size_t) { ++calls; }));
    EXPECT_EQ(calls.load(), 0);
    // Long enough: every index once; a nested long run inside an element
    // is not taken either (the element loops itself).
    std::vector<std::atomic<int>> seen(1000);
    std::atomic<int> nestedTaken{0};
    EXPECT_TRUE(parallelFor(st, seen.size(), [&](size_t i) {
      ++seen[i];
      if (i == 5 && parallelFor(st, 500, [](size_t) {})) ++nestedTaken;
    }));
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
    EXPECT_EQ(nestedTaken.load(), 0);
  });
}

TEST(ListHelpers, ThreadedRootGivesTheJobsOfOneThread) {
  const char* collection = R"(
    let
      b = builtins;
      drv = n: derivation { name = n; system = "s"; builder = "/b"; };
      all = b.listToAttrs (b.genList (i: { name = "p${toString i}";
        value = if i == 77 then throw "broken" else drv "p${toString i}"; }) 600);
    in b.listToAttrs (b.concatMap (n: if n == "p5" then [ ] else [ { name = n; value = all.${n}; } ])
                                  (b.attrNames all)))";
  auto jobs = [&](unsigned threads) {
    std::string out;
    runWithLargeStack([&] {
      EvalState st;
      Value v;
      st.eval(st.parseExprFromString(collection, "/tmp"), v);
      Bindings* noArgs = st.allocBindings(0);
      JobRoot root = prepareJobRootThreaded(st, v, noArgs, {}, threads);
      for (size_t i = 0; i < root.entries.size(); ++i)
        enumerateJobEntry(st, root, i, noArgs, "", [&](const Job& j) { out += jobToJson(j) + "\n"; });
    });
    return out;
  };
  const std::string serial = jobs(1);
  EXPECT_EQ(std::count(serial.begin(), serial.end(), '\n'), 599);
  EXPECT_EQ(jobs(2), serial);
  EXPECT_EQ(jobs(3), serial);
}

}  // namespace
}  // namespace kiln::eval

// enumerateJobsThreaded: entries walked in source order, large package
// scopes split into per-attribute tasks, output the same as one thread's.
#include <gtest/gtest.h>

#include <gc/gc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "eval_parts.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/job_threads.h"
#include "kiln/evaluator/jobs.h"

namespace kiln::eval {
namespace {

// Top-level packages defined in reverse name order, a scope of 40 jobs
// (two failing, one nested scope, one set the walk does not enter), the
// same behind a functor (auto-called once, by the walk, not split), a
// small scope that is not split, a function entry and a failing entry.
const char* kCollection = R"(
let
  drv = n: derivation { name = n; system = "s"; builder = "/b"; };
  scope = n: builtins.listToAttrs (builtins.genList (i: {
    name = "${n}${toString i}";
    value = if i == 7 || i == 23 then throw "broken ${toString i}" else drv "${n}-${toString i}";
  }) 40) // {
    recurseForDerivations = true;
    inner = { recurseForDerivations = true; x = drv "inner-x"; y = drv "inner-y"; };
    hidden = { z = drv "hidden-z"; };
  };
in {
  zeta = drv "zeta";
  py = scope "py";
  small = { recurseForDerivations = true; a = drv "small-a"; };
  mid = drv "mid";
  fn = { x ? 1 }: drv "fn";
  functor = { __functor = self: { x ? 1 }: scope "functor"; };
  bad = throw "bad entry";
  alpha = drv "alpha";
  big = scope "big";
}
)";

// Every job line, as enumerateJobsThreaded prints them with `threads`
// threads (0: enumerateJobs on the calling thread).
std::string lines(unsigned threads) {
  std::string out;
  runWithLargeStack([&] {
    EvalState st;
    Value v;
    st.eval(st.parseExprFromString(kCollection, "/tmp"), v);
    Bindings* noArgs = st.allocBindings(0);
    if (threads == 0) {
      enumerateJobs(st, v, noArgs, "", [&](const Job& j) { out += jobToJson(j) + "\n"; });
      return;
    }
    JobRoot root = prepareJobRoot(st, v, noArgs);
    enumerateJobsThreaded(
        st, root, noArgs, "", threads,
        [](const Job& j, std::string& text) { text += jobToJson(j) + "\n"; },
        [&](size_t, const std::string& text) { out += text; });
  });
  return out;
}

TEST(JobThreads, SplitScopesPrintWhatOneThreadPrints) {
  const std::string serial = lines(0);
  // 5 top-level jobs (fn auto-called, bad failing), 3 x (40 + 2 inner), small-a.
  EXPECT_EQ(std::count(serial.begin(), serial.end(), '\n'), 5 + 3 * 42 + 1);
  EXPECT_NE(serial.find("\"attr\":\"functor.functor39\""), std::string::npos);
  EXPECT_NE(serial.find("\"attr\":\"big.big23\",\"error\""), std::string::npos);
  EXPECT_NE(serial.find("\"attr\":\"py.inner.y\""), std::string::npos);
  EXPECT_EQ(serial.find("hidden"), std::string::npos);
  EXPECT_LT(serial.find("\"attr\":\"alpha\""), serial.find("\"attr\":\"zeta\""));
  for (unsigned threads : {1u, 2u, 4u}) EXPECT_EQ(lines(threads), serial) << threads << " threads";
}

// Threads take sets and lists from their own free lists. Each object keeps
// the byte past what was asked for, as GC_MALLOC's do: a pointer just past
// its end (a loop's end pointer) must still keep it alive. Without it a
// `//` loop freed sets still in use when collections were frequent.
TEST(JobThreads, ThreadedObjectsKeepTheByteAfterTheirEnd) {
  runWithLargeStack([] {
    EvalState st;
    st.beginThreads(1);
    EvalState::enterThread(1);
    for (size_t n = 1; n <= 300; ++n) {
      Value** list = st.heap().allocList(n);
      const size_t asked = n * sizeof(Value*);
      EXPECT_GE(GC_size(list), asked + (GC_get_all_interior_pointers() ? 1 : 0)) << n;
      // No more than GC_MALLOC takes (GC_malloc_many rounds the last
      // granules below 2 KiB up by one more).
      EXPECT_LE(GC_size(list), GC_size(GC_MALLOC(asked)) + (asked > 2016 ? 16 : 0)) << n;
    }
    st.endThreads();
  });
}

// Allocates 2 KiB lists on thread slot 1 until `done` or `limit` bytes.
template <class Done>
size_t allocateUntil(EvalState& st, size_t limit, Done done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  size_t allocated = 0;
  while (allocated < limit && !done() && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 64; ++i) st.heap().allocList(250);
    allocated += 64 * 250 * sizeof(Value*);
  }
  return allocated;
}

// Fills the heap with lists on thread slot 1, kept reachable from
// `chain`, until less than 12 MiB of it is free early in a collection
// cycle (the state in which the heap warmer grows the heap: below 16 MiB
// free, not within 80 MiB of the collection threshold) or until
// `warmerActed`. The state is reached right after a collection that freed
// nothing, and the warmer, which waited on the collector's lock during
// that collection, may see it first and grow the heap before this thread
// looks. Returns whether either happened.
template <class Acted>
bool fillHeapEarlyInACycle(EvalState& st, Value** volatile& chain, Acted warmerActed) {
  for (size_t bytes = 0; bytes < (size_t{2} << 30); bytes += 250 * sizeof(Value*)) {
    if (warmerActed()) return true;
    GC_word free = 0, since = 0;
    GC_get_heap_usage_safe(nullptr, &free, nullptr, &since, nullptr);
    if (free < (size_t{12} << 20) && since + (size_t{96} << 20) < GC_get_min_bytes_allocd())
      return true;
    Value** list = st.heap().allocList(250);
    list[0] = reinterpret_cast<Value*>(chain);
    chain = list;
  }
  return false;
}

// With two threads, the heap warmer grows the heap ahead of the allocator
// and populates the new section; it stops with the threads. The test waits
// for the warmer where it must act, so a busy machine only makes it slower.
TEST(JobThreads, HeapWarmerPopulatesNewHeapAheadOfTheAllocator) {
  if (std::getenv("KILN_GC_EVERY")) GTEST_SKIP() << "collections too often to grow ahead";
  // This process set the collector up for one thread (first collection at
  // 80 MiB, within the warmer's margin); `kiln eval --workers N` waits for
  // 512 MiB (gc_setup.cc). Set up first: run alone (ctest), this test's
  // EvalState would otherwise set the 80 MiB threshold over this one.
  initGarbageCollector();
  const GC_word threshold = GC_get_min_bytes_allocd();
  GC_set_min_bytes_allocd(size_t{512} << 20);
  struct Restore {
    GC_word bytes;
    ~Restore() { GC_set_min_bytes_allocd(bytes); }
  } restore{threshold};
  runWithLargeStack([] {
    EvalState st;
    HeapWarmerStats before = heapWarmerStats();
    st.beginThreads(2);
    EvalState::enterThread(1);
    Value** volatile chain = nullptr;  // on the stack: a root
    auto acted = [&] {
      HeapWarmerStats now = heapWarmerStats();
      return now.grownBytes > before.grownBytes && now.populatedBytes > before.populatedBytes;
    };
    ASSERT_TRUE(fillHeapEarlyInACycle(st, chain, acted));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!acted() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    st.endThreads();
    HeapWarmerStats after = heapWarmerStats();
    EXPECT_GT(after.grownBytes, before.grownBytes);
    EXPECT_GT(after.populatedBytes, before.populatedBytes);
    chain = nullptr;
    // Stopped: more allocation finds nothing populated ahead.
    allocateUntil(st, size_t{128} << 20, [] { return false; });
    EXPECT_EQ(heapWarmerStats().populatedBytes, after.populatedBytes);
  });
}

// One thread waits for no other's page faults: no warmer.
TEST(JobThreads, NoHeapWarmerForOneThread) {
  runWithLargeStack([] {
    EvalState st;
    HeapWarmerStats before = heapWarmerStats();
    st.beginThreads(1);
    EvalState::enterThread(1);
    allocateUntil(st, size_t{128} << 20, [] { return false; });
    st.endThreads();
    EXPECT_EQ(heapWarmerStats().populatedBytes, before.populatedBytes);
    EXPECT_EQ(heapWarmerStats().grownBytes, before.grownBytes);
  });
}

}  // namespace
}  // namespace kiln::eval

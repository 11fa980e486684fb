// Waits for thunks another thread claimed (eval_threads.cc, ThreadSlots::
// waitFor and wake): a waiter flags the blackhole's state word and the
// publisher wakes it only if the word it replaced carried the flag. Many
// threads forcing the same thunks in the same order wait for each other
// thousands of times; every wait must end by its wake-up, not by the
// poll's timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "eval_parts.h"
#include "eval_threads.h"
#include "gc_support.h"  // pthread_create registered with the collector
#include "kiln/evaluator/eval_error.h"
#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {
namespace {

constexpr uint32_t kThreads = 3;
constexpr size_t kThunks = 1500;

struct Round {
  EvalState& st;
  Value** elems;
  size_t n;
  std::atomic<uint32_t> ready{0};
  std::atomic<uint64_t> waitNanos{0};
  std::atomic<uint64_t> lateWakes{0};
  std::atomic<uint64_t> results{
      0};  // elements each thread saw evaluated (or failing)
};

struct ThreadArg {
  Round* round;
  uint32_t slot;
};

// Forces every element in list order as `slot`; all threads start together.
void* forceAll(void* p) {
  auto* a = static_cast<ThreadArg*>(p);
  Round& r = *a->round;
  EvalState::enterThread(a->slot);
  r.ready.fetch_add(1);
  while (r.ready.load() < kThreads) {
  }
  for (size_t i = 0; i < r.n; ++i) {
    try {
      r.st.forceValue(*r.elems[i], kNoPos);
      if (r.elems[i]->type == VType::kInt) r.results.fetch_add(1);
    } catch (const EvalError& e) {
      if (std::string(e.what()).find("odd") != std::string::npos)
        r.results.fetch_add(1);
    }
  }
  r.waitNanos.fetch_add(threadWaitNanos());
  r.lateWakes.fetch_add(threadLateWakes());
  return nullptr;
}

// Runs kThreads threads over the elements of `expr` (a list of thunks);
// returns the waits' nanoseconds, after checking every thread saw every
// element's result and no wait ended by its poll.
uint64_t runRound(const char* expr) {
  uint64_t waited = 0;
  runWithLargeStack([&] {
    EvalState st;
    Value list;
    st.eval(st.parseExprFromString(expr, "/tmp"), list);
    st.forceValue(list, kNoPos);
    ASSERT_EQ(list.type, VType::kList);
    ASSERT_EQ(list.list.size, kThunks);
    Round r{st, list.list.elems, list.list.size};
    st.beginThreads(kThreads);
    std::vector<ThreadArg> args;
    for (uint32_t slot = 1; slot <= kThreads; ++slot)
      args.push_back({&r, slot});
    std::vector<pthread_t> ids;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, size_t{64} << 20);
    for (ThreadArg& a : args) {
      pthread_t id;
      ASSERT_EQ(pthread_create(&id, &attr, forceAll, &a), 0);
      ids.push_back(id);
    }
    pthread_attr_destroy(&attr);
    for (pthread_t id : ids) pthread_join(id, nullptr);
    st.endThreads();
    EXPECT_EQ(r.results.load(), kThreads * kThunks);
    EXPECT_EQ(r.lateWakes.load(), 0u);
    waited = r.waitNanos.load();
  });
  return waited;
}

// Each element a few hundred microseconds of work: the threads keep
// meeting each other's blackholes. Rounds repeat (each a new state) until
// the threads waited, within a deadline: a loaded machine may run them
// one after the other.
void expectWaitsComplete(const char* expr) {
  // A lost wake-up then stalls its wait for 5 s (and is counted), where
  // a publisher held off the processor by the machine's load between
  // publishing and waking is not.
  setWaitPoll(std::chrono::seconds(5));
  struct Restore {
    ~Restore() { setWaitPoll(std::chrono::milliseconds(50)); }
  } restore;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  uint64_t waited = 0;
  while (waited == 0 && std::chrono::steady_clock::now() < deadline)
    waited = runRound(expr);
  EXPECT_GT(waited, 0u) << "the threads never waited for each other";
}

TEST(EvalThreads, ManyWaitsForOtherThreadsThunksEndByTheirWakeUp) {
  expectWaitsComplete(R"(
    builtins.genList (i: builtins.foldl' builtins.add i (builtins.genList (x: x) 300)) 1500
  )");
}

// Odd elements throw: their owner puts them back, each waiter is woken,
// claims the thunk itself and gets the error.
TEST(EvalThreads, WaitsForThunksPutBackOnErrorEndByTheirWakeUp) {
  expectWaitsComplete(R"(
    builtins.genList (i: let s = builtins.foldl' builtins.add i (builtins.genList (x: x) 300);
      in if builtins.bitAnd i 1 == 1 then throw "odd ${toString s}" else s) 1500
  )");
}

}  // namespace
}  // namespace kiln::eval

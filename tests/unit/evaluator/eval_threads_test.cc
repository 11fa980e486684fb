// Threaded job evaluation's help path (eval_threads.cc, job_threads.cc): a
// thread that would wait for a thunk another thread evaluates evaluates
// other entries nested instead. Made deterministic with a gate builtin that
// holds the one thread that claims it: the other thread then runs every
// step below alone, in entry order, and the test opens the gate once it has
// seen them. Checked: the jobs are the ones one thread reports (cycles met
// while helping are infinite recursion, with one thread's message), an
// entry that needs the helping thread's own outer thunks is abandoned and
// evaluated again later, and nesting stops at kMaxHelpDepth.
#include "kiln/evaluator/job_threads.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace kiln::eval {
namespace {

using std::chrono::seconds;

// gate x: returns "open" once the test opens the gate (the first caller
// marks it entered). after x: returns x once the gate was entered.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool open = false;

  void waitFor(bool Gate::*flag, const char* what) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, seconds(60), [&] { return this->*flag; }))
      throw EvalError(std::string("test gate: never ") + what);
  }
  void set(bool Gate::*flag) {
    std::lock_guard<std::mutex> lock(mu);
    this->*flag = true;
    cv.notify_all();
  }
};
Gate* gGate = nullptr;

void primGate(EvalState& st, PosIdx, Value**, Value& v) {
  gGate->set(&Gate::entered);
  gGate->waitFor(&Gate::open, "opened");
  st.mkString(v, "open");
}

void primAfter(EvalState& st, PosIdx pos, Value** args, Value& v) {
  gGate->waitFor(&Gate::entered, "entered");
  st.forceValue(*args[0], pos);
  v = *args[0];
}

const PrimOp kGate{"gate", 1, primGate};
const PrimOp kAfter{"after", 1, primAfter};

// Entries in name order, as the helping thread meets them (it runs alone
// while the gate is closed): e00 holds the gate; e01 claims x, then waits
// for the gate and helps: e02–e04 are cycles (level 1, errors), e05–e07
// wait for the gate (levels 1–3), e08 needs x, claimed at level 0
// (abandoned at level 4, the limit); then the thread stops helping and
// sleeps until the gate opens. The rest run after.
const char* kCollection = R"(
{ gate, after }:
let
  mk = name: dep: derivation {
    inherit name; system = "x86_64-linux"; builder = "/bin/sh"; d = dep;
  };
  g = gate "open";
  x = "${after "x"}-${g}";
  e = i: "e" + (if i < 10 then "0" else "") + toString i;
  onGate = builtins.listToAttrs (map (i: { name = e i; value = mk (e i) g; })
    [ 0 5 6 7 9 10 11 12 13 14 15 ]);
in onGate // rec {
  e01 = mk "e01" x;
  e02 = let s = mk "e02" s.drvPath; in s;
  e03 = mk "e03" e04.drvPath;
  e04 = mk "e04" e03.drvPath;
  e08 = mk "e08" x;
}
)";

// Every entry's jobs as JSON lines, in entry order.
using Lines = std::vector<std::vector<std::string>>;

// Evaluates kCollection on `threads` threads; with `hold`, the gate stays
// shut until `opened` returns true for the state's help figures (or a
// minute passes).
Lines evaluate(unsigned threads, bool hold,
               const std::function<bool(const EvalState::HelpStats&)>& opened,
               EvalState::HelpStats& stats) {
  Gate gate;
  gGate = &gate;
  if (!hold) gate.set(&Gate::open);
  Lines lines;
  runWithLargeStack([&] {
    EvalState st;
    Value fn, root;
    st.eval(st.parseExprFromString(kCollection, "/tmp"), fn);
    Bindings* b = st.allocBindings(2);
    for (const PrimOp* p : {&kGate, &kAfter}) {
      Value* v = st.allocValue();
      v->mkPrimOp(p);
      b->push(st.sym(p->name), v);
    }
    Value args;
    st.mkAttrs(args, b);
    st.callFunction(fn, args, root, kNoPos);
    Bindings* noArgs = st.allocBindings(0);
    JobRoot jr = prepareJobRoot(st, root, noArgs);
    std::thread opener;
    if (hold)
      opener = std::thread([&] {
        test::pollUntil([&] { return opened(st.helpStats()); }, seconds(60));
        gate.set(&Gate::open);
      });
    enumerateJobsThreaded(st, jr, noArgs, "", threads,
                          [&](size_t, const std::vector<Job>& jobs) {
                            lines.emplace_back();
                            for (const Job& j : jobs) lines.back().push_back(jobToJson(j));
                          });
    if (opener.joinable()) opener.join();
    stats = st.helpStats();
  });
  gGate = nullptr;
  return lines;
}

Lines oneThread() {
  EvalState::HelpStats stats;
  Lines lines = evaluate(1, false, nullptr, stats);
  EXPECT_EQ(stats.helped, 0u);
  return lines;
}

TEST(EvalThreadsHelp, OneThreadReportsEveryEntryAndTheCycles) {
  Lines lines = oneThread();
  ASSERT_EQ(lines.size(), 16u);
  for (size_t i : {2u, 3u, 4u}) {
    ASSERT_EQ(lines[i].size(), 1u);
    EXPECT_NE(lines[i][0].find("infinite recursion encountered"), std::string::npos)
        << lines[i][0];
  }
  EXPECT_NE(lines[8][0].find("\"drvPath\""), std::string::npos) << lines[8][0];
}

TEST(EvalThreadsHelp, HelpsNestedAbandonsWhatNeedsItsOwnThunksAndStopsAtTheDepthLimit) {
  Lines expected = oneThread();
  EvalState::HelpStats stats;
  bool sawAll = false;
  Lines lines = evaluate(2, true, [&](const EvalState::HelpStats& s) {
    // e02..e08 helped, e08 abandoned at level 4: all before the gate opens.
    sawAll = s.helped >= 7 && s.abandoned >= 1 && s.deepest == EvalState::kMaxHelpDepth;
    return sawAll;
  }, stats);
  EXPECT_TRUE(sawAll) << "helped " << stats.helped << " abandoned " << stats.abandoned
                      << " deepest " << stats.deepest;
  EXPECT_EQ(lines, expected);
  EXPECT_EQ(stats.deepest, EvalState::kMaxHelpDepth);
  EXPECT_GE(stats.abandoned, 1u);
}

TEST(EvalThreadsHelp, SameJobsForEveryNumberOfThreads) {
  Lines expected = oneThread();
  for (unsigned n : {2u, 4u, 8u}) {
    SCOPED_TRACE(std::to_string(n) + " threads");
    EvalState::HelpStats stats;
    // The gate opens once some thread helps: threads nest and meet the
    // cycles in whatever order they take entries.
    Lines lines = evaluate(n, true, [](const EvalState::HelpStats& s) { return s.helped > 0; },
                           stats);
    ASSERT_EQ(lines.size(), expected.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      SCOPED_TRACE(i);
      ASSERT_EQ(lines[i].size(), 1u);
      // Two threads may meet e03/e04's cycle: the one that waits reports
      // it, its trace naming where it met it (docs/evaluator.md).
      if (i == 3 || i == 4)
        EXPECT_NE(lines[i][0].find("infinite recursion encountered"), std::string::npos)
            << lines[i][0];
      else
        EXPECT_EQ(lines[i], expected[i]);
    }
    EXPECT_GE(stats.helped, 1u);
    EXPECT_LE(stats.deepest, EvalState::kMaxHelpDepth);
  }
}

}  // namespace
}  // namespace kiln::eval

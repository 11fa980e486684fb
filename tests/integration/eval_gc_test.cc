// Garbage collection in the evaluator: an expression that allocates far
// more in all than it keeps stays within a stated peak RSS (of the real
// kiln process, from wait4), and collecting very often changes no result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

class EvalGc : public ::testing::Test {
 protected:
  test::RunResult kiln(std::vector<std::string> args,
                       std::vector<std::string> env = {}) {
    args.insert(args.begin(), test::kilnBinary());
    env.push_back("KILN_STATE_DIR=" + dir_.path() + "/state");
    return test::run(args, "", env);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  TempDir dir_{"kiln-eval-gc"};
};

// 10,000 updates of a 50,000-attribute set: each `//` copies the set
// (50,000 attributes, 800 KB), 8 GB in all, of which one copy stays live.
// Without collection the process would need 8 GB; Nix 2.8 peaks at 0.43 GB.
TEST_F(EvalGc, RepeatedUpdatesOfALargeSetStayUnder400MiB) {
  std::string file = write("update.nix", R"nix(
let
  big = builtins.listToAttrs (builtins.genList (i: { name = "a${toString i}"; value = i; }) 50000);
  r = builtins.foldl' (acc: i: acc // { x = i; }) big (builtins.genList (i: i) 10000);
in builtins.length (builtins.attrNames r) * 100000 + r.x
)nix");
  auto r = kiln({"instantiate", "--eval", file});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "5000109999\n");
  EXPECT_LT(r.peakRssBytes, 400u << 20)
      << "peak RSS " << (r.peakRssBytes >> 20) << " MiB";
}

// A fold whose every step adds a small set made in that step (by-name's
// `foldl' (acc: shard: acc // inShard shard) { }`): each intermediate
// accumulator is garbage after the next step, though the step's own values
// live on. Kept beside them in value and environment blocks, every one
// stayed live: 1.16 GB here; 200 MB once they are objects of their own.
TEST_F(EvalGc, FoldAccumulatorsAreCollectedWhileEachStepsValuesLive) {
  std::string file = write("fold.nix", R"nix(
let
  shard = j: builtins.listToAttrs (builtins.genList (i: {
    name = "p${toString j}_${toString i}"; value = { inherit i j; }; }) 20);
  r = builtins.foldl' (acc: j: acc // shard j) { } (builtins.genList (i: i) 6000);
in builtins.length (builtins.attrNames r) + r.p5999_19.j
)nix");
  auto r = kiln({"instantiate", "--eval", file});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "125999\n");
  EXPECT_LT(r.peakRssBytes, 450u << 20)
      << "peak RSS " << (r.peakRssBytes >> 20) << " MiB";
}

// Every builtin that holds values in containers of its own while it calls
// back into Nix code, plus derivations, imports and deep structures: the
// same output when the collector runs every 64 KiB of allocation as when it
// never runs.
TEST_F(EvalGc, CollectingOftenChangesNothing) {
  write("lib.nix", "{ double = x: x * 2; }");
  std::string file = write("mix.nix", R"nix(
let
  lib = import ./lib.nix;
  mk = i: derivation { name = "d${toString i}"; system = "x86_64-linux"; builder = "/bin/sh";
                       deps = map (j: "${mk' j}") (builtins.genList (x: x) (i / 50)); };
  mk' = j: (mk j).outPath;
  closure = builtins.genericClosure {
    startSet = [ { key = 0; } ];
    operator = x: if x.key < 300 then [ { key = x.key + 1; v = builtins.genList lib.double 20; } ] else [ ];
  };
  parts = builtins.partition (x: builtins.elem 6 (x.v or [ ]) || x.key / 2 * 2 == x.key) closure;
  groups = builtins.groupBy (x: toString (x.key / 10)) closure;
  zipped = builtins.zipAttrsWith (n: vs: builtins.length vs) (map (x: { "${toString (x.key / 7)}" = x; }) closure);
  cats = builtins.catAttrs "v" closure;
  splits = builtins.concatMap (s: builtins.split "(,)" s) (map (i: "a,b${toString i},c") (builtins.genList (x: x) 200));
  drvs = builtins.genList (i: (mk i).drvPath) 200;
  sorted = builtins.sort (a: b: a.key > b.key) closure;
in builtins.toJSON {
  inherit drvs;
  right = builtins.length parts.right;
  groups = builtins.attrNames groups;
  zipped = zipped;
  cats = builtins.length (builtins.concatLists cats);
  splits = builtins.length splits;
  first = (builtins.head sorted).key;
  deep = builtins.deepSeq closure (builtins.length closure);
}
)nix");
  auto never =
      kiln({"instantiate", "--eval", "--strict", "--readonly-mode", file},
           {"KILN_NO_GC=1"});
  ASSERT_EQ(never.exitCode, 0) << never.err;
  auto often =
      kiln({"instantiate", "--eval", "--strict", "--readonly-mode", file},
           {"KILN_GC_EVERY=65536"});
  ASSERT_EQ(often.exitCode, 0) << often.err;
  EXPECT_EQ(often.out, never.out);
  auto jobs = kiln({"eval", "--json", "--readonly-mode", "--processes", "2",
                    write("jobs.nix", R"nix(
builtins.listToAttrs (builtins.genList (i: { name = "p${toString i}"; value = derivation {
  name = "p${toString i}"; system = "x86_64-linux"; builder = "/bin/sh";
  big = builtins.length (builtins.attrNames (builtins.foldl' (a: j: a // { "k${toString j}" = j; }) { } (builtins.genList (x: x) 300))); }; }) 100)
)nix")},
                   {"KILN_GC_EVERY=65536"});
  EXPECT_EQ(jobs.exitCode, 0) << jobs.err;
  EXPECT_EQ(test::nonEmptyLines(jobs.out).size(), 100u);
}

// Strings made while evaluating are collectable: a loop whose every step
// makes a 10 KB string (1 GB in all) and keeps 10 bytes of it stays far
// below what keeping them needed (2 GB).
TEST_F(EvalGc, TemporaryStringsAreCollected) {
  std::string file = write("strings.nix", R"nix(
let
  long = builtins.concatStringsSep "" (builtins.genList (i: "0123456789") 1000);
  step = acc: i: builtins.substring 0 10 (acc + long + toString i);
in builtins.foldl' step "" (builtins.genList (i: i) 100000)
)nix");
  auto r = kiln({"instantiate", "--eval", file}, {"KILN_EVAL_STATS=1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "\"0123456789\"\n");
  // ~350 MB here; 2 GB when strings were kept to the end.
  EXPECT_LT(r.peakRssBytes, 600u << 20) << "peak RSS " << (r.peakRssBytes >> 20) << " MiB";
  EXPECT_NE(r.err.find("strings 1"), std::string::npos) << r.err;  // counted: 1 GB or so
}

// Strings, their contexts and the derivations they reach through builtins
// that hold views of strings while they work, and the paths `kiln
// instantiate` collects from derivations whose `drvPath` is a computed
// string: the same when collecting every 64 KiB as when never, with one
// thread and with several.
TEST_F(EvalGc, CollectingOftenKeepsStringsAndContexts) {
  std::string file = write("ctx.nix", R"nix(
let
  b = builtins;
  up = s: b.replaceStrings [ "a" "e" "o" ] [ "A" "E" "O" ] s;
  mk = i: deps: derivation {
    name = "s${toString i}";
    system = "x86_64-linux";
    builder = "/bin/sh";
    flags = b.concatStringsSep " " (map (d: "--with-${d.name}=${d}") deps);
    hook = b.foldl' (acc: d: acc + "\n" + up "export PATH=${d}/bin:$PATH") "# ${toString i}" deps;
    json = b.toJSON { inherit i; paths = map toString deps; };
    short = b.substring 0 20 (b.concatStringsSep "," (map (d: d.outPath) deps));
  };
  pkgs = b.genList (i: mk i (map (j: b.elemAt pkgs j) (b.filter (j: j >= 0 && j < i) [ (i - 1) (i - 7) (i - 30) ]))) 300;
  fake = i: { type = "derivation"; drvPath = "/nix/store/" + b.substring 0 32 (b.hashString "sha256" (toString i)) + "-x${toString i}.drv"; outputName = "o" + toString i; };
in b.listToAttrs (b.genList (i: { name = "p${toString i}"; value = b.elemAt pkgs i; }) 300
   ++ b.genList (i: { name = "f${toString i}"; value = fake i; }) 300)
)nix");
  auto never = kiln({"instantiate", "--readonly-mode", file}, {"KILN_NO_GC=1"});
  ASSERT_EQ(never.exitCode, 0) << never.err;
  EXPECT_EQ(test::nonEmptyLines(never.out).size(), 600u);
  auto often = kiln({"instantiate", "--readonly-mode", file}, {"KILN_GC_EVERY=65536"});
  ASSERT_EQ(often.exitCode, 0) << often.err;
  EXPECT_EQ(often.out, never.out);
  auto sorted = [](std::string s) {
    auto lines = test::nonEmptyLines(s);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  std::string real = write("real.nix", "removeAttrs (import ./ctx.nix) (builtins.genList (i: \"f${toString i}\") 300)");
  auto one = kiln({"eval", "--json", "--readonly-mode", real}, {"KILN_NO_GC=1"});
  ASSERT_EQ(one.exitCode, 0) << one.err;
  EXPECT_EQ(sorted(one.out).size(), 300u);
  for (const char* workers : {"1", "2", "4"}) {
    auto threads = kiln({"eval", "--json", "--readonly-mode", "--workers", workers, real},
                        {"KILN_GC_EVERY=65536"});
    ASSERT_EQ(threads.exitCode, 0) << threads.err;
    EXPECT_EQ(sorted(threads.out), sorted(one.out)) << workers;
  }
}

// KILN_EVAL_STATS=2 reports on stderr where the memory went, after a
// final collection, and changes nothing on stdout; a bigger mark stack
// (KILN_GC_MARK_STACK, grown at start) changes no result either.
TEST_F(EvalGc, StatsReportAndMarkStackSizeChangeNoResult) {
  std::string file = write("chain.nix", R"nix(
let xs = builtins.genList (i: { v = i; next = if i == 0 then null else "${toString i}"; }) 20000;
in builtins.foldl' (a: x: a + x.v) 0 xs
)nix");
  auto plain = kiln({"instantiate", "--eval", file});
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  EXPECT_EQ(plain.out, "199990000\n");
  EXPECT_EQ(plain.err.find("kiln-eval-stats"), std::string::npos);
  auto stats = kiln({"instantiate", "--eval", file}, {"KILN_EVAL_STATS=2"});
  ASSERT_EQ(stats.exitCode, 0) << stats.err;
  EXPECT_EQ(stats.out, plain.out);
  for (const char* line :
       {"kiln-eval-stats: rss ", "kiln-eval-stats: gc heap ",
        "kiln-eval-stats: collections ", "live after a final collection ",
        "kiln-eval-stats: allocated: values ", "kiln-eval-stats: arena "})
    EXPECT_NE(stats.err.find(line), std::string::npos)
        << line << " missing in " << stats.err;
  EXPECT_NE(stats.err.find("markers 1\n"), std::string::npos) << stats.err;
  // With tcmalloc (not in sanitizer builds), free spans go back at once.
  if (stats.err.find("malloc (tcmalloc") != std::string::npos) {
    EXPECT_NE(stats.err.find("malloc (tcmalloc, aggressive decommit) in use"), std::string::npos)
        << stats.err;
  }
  auto small = kiln({"instantiate", "--eval", file},
                    {"KILN_GC_MARK_STACK=2097152", "KILN_GC_EVERY=65536"});
  ASSERT_EQ(small.exitCode, 0) << small.err;
  EXPECT_EQ(small.out, plain.out);
}

// One evaluating thread collects with a free-space divisor of 1 until its
// heap reaches 256 MiB (KILN_GC_LARGE_HEAP: another size), then 2
// (gc_setup.cc): a run whose heap grows past 96 MiB ends with divisor 2
// when the bound is 96 MiB and with 1 when there is none, with the same
// result; a small evaluation keeps 1 with the default bound.
TEST_F(EvalGc, FreeSpaceDivisorDoublesOnceTheHeapIsLarge) {
  std::string file = write("live.nix", R"nix(
let l = builtins.genList (i: "s${toString i}") 1500000;
in builtins.foldl' (a: x: a + builtins.stringLength x) 0 l + builtins.length l
)nix");
  auto large = kiln({"instantiate", "--eval", file},
                    {"KILN_EVAL_STATS=1", "KILN_GC_LARGE_HEAP=100663296"});
  ASSERT_EQ(large.exitCode, 0) << large.err;
  EXPECT_NE(large.err.find("free-space divisor 2, "), std::string::npos)
      << large.err;
  auto never = kiln({"instantiate", "--eval", file},
                    {"KILN_EVAL_STATS=1", "KILN_GC_LARGE_HEAP=0"});
  ASSERT_EQ(never.exitCode, 0) << never.err;
  EXPECT_NE(never.err.find("free-space divisor 1, "), std::string::npos)
      << never.err;
  EXPECT_EQ(large.out, never.out);
  EXPECT_EQ(large.out, "12388890\n");
  auto small =
      kiln({"instantiate", "--eval", "-E", "1"}, {"KILN_EVAL_STATS=1"});
  ASSERT_EQ(small.exitCode, 0) << small.err;
  EXPECT_NE(small.err.find("free-space divisor 1, "), std::string::npos)
      << small.err;
}

// The first collection comes once 80 MiB were allocated (gc_setup.cc): a
// run allocating ~95 MB collects once more than with the first at 128 MiB
// (KILN_GC_THRESHOLD), with the same result. (The fold's calls make no
// environments on the heap: ExprLambda::stackEnvArgs.)
TEST_F(EvalGc, FirstCollectionComesAt80MiB) {
  std::string file = write("garbage.nix", R"nix(
builtins.foldl' (a: x: a + builtins.stringLength x) 0 (builtins.genList (i: "s${toString i}") 800000)
)nix");
  auto collections = [](const std::string& err) {
    size_t at = err.find("kiln-eval-stats: collections ");
    return at == std::string::npos ? -1 : std::atoi(err.c_str() + at + 29);
  };
  auto first = kiln({"instantiate", "--eval", file}, {"KILN_EVAL_STATS=1"});
  ASSERT_EQ(first.exitCode, 0) << first.err;
  auto later = kiln({"instantiate", "--eval", file},
                    {"KILN_EVAL_STATS=1", "KILN_GC_THRESHOLD=134217728"});
  ASSERT_EQ(later.exitCode, 0) << later.err;
  EXPECT_EQ(first.out, "5488890\n");
  EXPECT_EQ(later.out, first.out);
  ASSERT_GE(collections(later.err), 0) << later.err;
  EXPECT_EQ(collections(first.err), collections(later.err) + 1)
      << first.err << later.err;
}

// The mark stack starts at 1,048,576 entries (libgc is built so:
// cmake/KilnLibgc.cmake), so no collection runs to grow it (9 ran at start,
// ~15 ms, when it was grown from libgc's 4,096), and a deep structure
// marked in later collections does not overflow it. A bigger stack
// (KILN_GC_MARK_STACK) is grown from there, one overflow per doubling. Until
// libgc was built so, KILN_GC_MARK_STACK=16384 showed the same structure
// overflowing a small stack; a stack can no longer be made smaller than
// the one libgc starts with, so that half is gone. GC_PRINT_STATS is
// libgc's log.
TEST_F(EvalGc, MarkStackStartsFullSizedAndDeepStructuresDoNotOverflowIt) {
  std::string file = write("deep.nix", R"nix(
let
  chain = builtins.foldl' (acc: i: { a = { v = i; }; next = acc; z = { v = i; }; }) null
    (builtins.genList (i: i) 100000);
  churn = builtins.foldl' (s: i: s + builtins.length [ { x = i; } { y = i; } ]) 0
    (builtins.genList (i: i) 300000);
in builtins.seq chain (chain.a.v + churn)
)nix");
  auto count = [](const std::string& log, const std::string& what) {
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos;
         at = log.find(what, at + 1))
      ++n;
    return n;
  };
  auto trivial = kiln({"instantiate", "--eval", "-E", "1"}, {"KILN_EVAL_STATS=1"});
  ASSERT_EQ(trivial.exitCode, 0) << trivial.err;
  EXPECT_NE(trivial.err.find("kiln-eval-stats: collections 0,"), std::string::npos)
      << trivial.err;
  auto deep = kiln({"instantiate", "--eval", file},
                   {"GC_PRINT_STATS=1", "KILN_GC_EVERY=16000000"});
  ASSERT_EQ(deep.exitCode, 0) << deep.err;
  EXPECT_EQ(deep.out, "699999\n");
  EXPECT_GT(count(deep.err, "Marking for collection"), 1u) << deep.err;
  EXPECT_EQ(count(deep.err, "Mark stack overflow"), 0u) << deep.err;
  EXPECT_EQ(count(deep.err, "Grew mark stack to"), 0u) << deep.err;
  auto bigger = kiln({"instantiate", "--eval", file},
                     {"GC_PRINT_STATS=1", "KILN_GC_EVERY=16000000",
                      "KILN_GC_MARK_STACK=4194304"});
  ASSERT_EQ(bigger.exitCode, 0) << bigger.err;
  EXPECT_EQ(bigger.out, deep.out);
  EXPECT_EQ(count(bigger.err, "Mark stack overflow"), 2u) << bigger.err;
  EXPECT_NE(bigger.err.find("Mark stack overflow; current size: 1048576 entries"),
            std::string::npos)
      << bigger.err;
  EXPECT_EQ(count(bigger.err, "Grew mark stack to"), 2u);
  EXPECT_NE(bigger.err.find("Grew mark stack to 4194304 frames"), std::string::npos);
}

// With libgc's parallel marking (GC_MARKERS=2) a mark procedure sees a
// marker's local stack, and the shared one grows only when a local stack
// handed back finds no room in it. The shared stack is the same array,
// 1,048,576 entries from the start: a chain long enough to leave 600,000
// entries pending (a 16,384-entry stack found no room however the two
// markers split the work) finds room, and no collection grows the stack.
// Until libgc was built with that size, KILN_GC_MARK_STACK=16384 showed
// the no-room case on the same chain; a smaller stack can no longer be
// made, so that half is gone.
TEST_F(EvalGc, ParallelMarkingFindsRoomInTheSharedMarkStack) {
  std::string file = write("deep.nix", R"nix(
let
  chain = builtins.foldl' (acc: i: { a = { v = i; }; next = acc; z = { v = i; }; }) null
    (builtins.genList (i: i) 300000);
in builtins.seq chain chain.a.v
)nix");
  auto run = kiln({"instantiate", "--eval", file},
                  {"GC_PRINT_STATS=1", "GC_MARKERS=2", "KILN_EVAL_STATS=1",
                   "KILN_GC_EVERY=16000000"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, "299999\n");
  EXPECT_NE(run.err.find("markers 2\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("Marking for collection"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("No room to copy back mark stack"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("Grew mark stack to"), std::string::npos) << run.err;
}

// With two markers (`kiln eval --workers 2`, or GC_MARKERS=2) a bigger
// stack (KILN_GC_MARK_STACK) is grown before libgc starts its marker
// helper (gc_setup.cc), so each doubling is one plain overflow on one
// marker, as with one evaluating thread, and not the flood of local stacks
// that parallel marking needs (mark_stack.cc; ~50 ms of serial start-up on
// 2 cores against ~15 ms).
TEST_F(EvalGc, MarkStackIsGrownBeforeTheMarkerHelperStarts) {
  std::string file = write("one.nix", "{ a = 1; }");
  auto threads = kiln({"eval", "--readonly-mode", "--workers", "2", file},
                      {"GC_PRINT_STATS=1", "KILN_GC_MARK_STACK=2097152"});
  auto markers = kiln({"instantiate", "--eval", file},
                      {"GC_PRINT_STATS=1", "GC_MARKERS=2", "KILN_GC_MARK_STACK=2097152"});
  for (const auto* run : {&threads, &markers}) {
    ASSERT_EQ(run->exitCode, 0) << run->err;
    size_t grown = run->err.find("Grew mark stack to 2097152 frames");
    size_t started = run->err.find("Started 1 mark helper threads");
    ASSERT_NE(grown, std::string::npos) << run->err;
    ASSERT_NE(started, std::string::npos) << run->err;
    EXPECT_LT(grown, started);
    EXPECT_EQ(run->err.find("No room to copy back mark stack"), std::string::npos);
  }
}

// Growing the mark stack fills each stack it outgrows (16 MB for
// 1,048,576 entries, then 32 MB for 2,097,152, on the way to 4,194,304),
// and libgc recycles those into its heap as free blocks: their pages are
// given back (mark_stack.cc) as each is outgrown, so a trivial evaluation
// that grows it peaks ~32 MB above one that does not (the last fill), not
// 48 MB. (It compared 1,048,576 with libgc's 4,096 until libgc started at
// 1,048,576: no smaller stack can be made now.)
TEST_F(EvalGc, OutgrownMarkStacksAreGivenBack) {
  auto grown = kiln({"instantiate", "--eval", "-E", "1"}, {"KILN_GC_MARK_STACK=4194304"});
  auto ungrown = kiln({"instantiate", "--eval", "-E", "1"});
  ASSERT_EQ(grown.exitCode, 0) << grown.err;
  ASSERT_EQ(ungrown.exitCode, 0) << ungrown.err;
  EXPECT_EQ(grown.out, "1\n");
  EXPECT_LT(grown.peakRssBytes, ungrown.peakRssBytes + (40u << 20))
      << "grown " << (grown.peakRssBytes >> 20) << " MiB, ungrown "
      << (ungrown.peakRssBytes >> 20) << " MiB";
}

// `kiln eval --workers N` (N > 1) marks on two threads (gc_setup.cc; one
// evaluating thread marks on one), and its jobs are those of one thread,
// with collections as often as tests make them.
TEST_F(EvalGc, ThreadedEvaluationCollectsWithTwoMarkers) {
  std::string file = write("jobs.nix", R"nix(
builtins.listToAttrs (builtins.genList (i: {
  name = "j${toString i}";
  value = derivation {
    name = "j${toString i}"; system = "x86_64-linux"; builder = "/bin/sh";
    junk = builtins.foldl' (a: x: a // { "k${toString x}" = x; }) {} (builtins.genList (x: x) 200);
    n = builtins.length (builtins.attrNames (builtins.foldl' (a: x: a // { "k${toString x}" = x; }) {} (builtins.genList (x: x) 200)));
  };
}) 100)
)nix");
  auto one =
      kiln({"eval", "--json", "--readonly-mode", file}, {"KILN_EVAL_STATS=1"});
  ASSERT_EQ(one.exitCode, 0) << one.err;
  EXPECT_NE(one.err.find("markers 1\n"), std::string::npos) << one.err;
  auto two = kiln({"eval", "--json", "--readonly-mode", "--workers", "2", file},
                  {"KILN_EVAL_STATS=1", "KILN_GC_EVERY=65536"});
  ASSERT_EQ(two.exitCode, 0) << two.err;
  EXPECT_NE(two.err.find("markers 2\n"), std::string::npos) << two.err;
  auto sorted = [](std::string s) {
    auto lines = test::nonEmptyLines(s);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(sorted(two.out), sorted(one.out));
  EXPECT_EQ(sorted(one.out).size(), 100u);
}

}  // namespace
}  // namespace kiln

// Layered sets: `big // small` refers to `big` instead of copying it
// (value.h, layered_bindings.cc). Every reader must see the same set a copy
// would have been.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "eval_test_util.h"
#include "kiln/evaluator/job_threads.h"
#include "kiln/evaluator/jobs.h"

namespace kiln::eval {
namespace {

using testing::evalStrict;

// A set of 20 attributes a0..a19 = 0..19, bound as `big`.
const char* kBig =
    "let big = builtins.listToAttrs (builtins.genList (i: { name = "
    "\"a${toString i}\"; "
    "value = i; }) 20); in ";

// Evaluates `expr` (with `big` in scope) and hands its forced value to `check`.
template <class F>
void withValue(const std::string& expr, F check) {
  EvalState st;
  runWithLargeStack([&] {
    Value v;
    st.eval(st.parseExprFromString(kBig + expr, "/tmp"), v);
    st.forceValueDeep(v);
    check(st, v);
  });
}

// Visible attributes in iteration order, checking that order is strictly
// increasing by symbol (what lookups and merges rely on).
std::vector<Symbol> iterated(const Bindings& b) {
  std::vector<Symbol> out;
  for (const Attr& a : b) {
    if (!out.empty()) {
      EXPECT_LT(out.back().id, a.name.id);
    }
    out.push_back(a.name);
  }
  EXPECT_EQ(out.size(), b.size);
  return out;
}

// Checks the shape of `b` (layers, own and visible attribute counts) and
// the integers it holds (0 in `ints`: absent).
void expectSet(EvalState& st, const Bindings& b, int layers, uint32_t own,
               uint32_t size, const std::map<std::string, int64_t>& ints) {
  EXPECT_EQ(b.layers(), layers);
  EXPECT_EQ(b.ownSize(), own);
  EXPECT_EQ(b.size, size);
  EXPECT_EQ(iterated(b).size(), size);
  for (auto& [name, n] : ints) {
    const Value* x = b.get(st.sym(name));
    if (n == 0) {
      EXPECT_EQ(x, nullptr) << name;
    } else {
      ASSERT_NE(x, nullptr) << name;
      EXPECT_EQ(x->integer, n) << name;
    }
  }
}

TEST(LayeredBindings, SmallRightSideMakesALayerOnTheLeft) {
  withValue("big // { a3 = 100; new = 1; }", [](EvalState& st, Value& v) {
    expectSet(st, *v.attrs, 1, 2, 21,
              {{"a3", 100}, {"a4", 4}, {"new", 1}, {"absent", 0}});
  });
  // Large right sides and small left sides still copy.
  withValue("big // big",
            [](EvalState&, Value& v) { EXPECT_EQ(v.attrs->base(), nullptr); });
  withValue("{ x = 1; } // { y = 2; }",
            [](EvalState&, Value& v) { EXPECT_EQ(v.attrs->base(), nullptr); });
}

TEST(LayeredBindings, LaterUpdatesWinAcrossLayers) {
  // `//` is right-associative: the right sides merge first, one layer.
  withValue("big // { a1 = 1; x = 1; } // { x = 2; } // { a1 = 3; y = 4; }",
            [](EvalState& st, Value& v) {
              expectSet(st, *v.attrs, 1, 3, 22,
                        {{"x", 2}, {"a1", 3}, {"y", 4}, {"a2", 2}});
            });
  // Left-nested: the second update is smaller than the first layer, so it
  // makes a second; the third is larger than that and merges into it.
  withValue("((big // { a1 = 1; x = 1; }) // { x = 2; }) // { a1 = 3; y = 4; }",
            [](EvalState& st, Value& v) {
              expectSet(st, *v.attrs, 2, 3, 22,
                        {{"x", 2}, {"a1", 3}, {"y", 4}, {"a2", 2}});
              EXPECT_EQ(v.attrs->base()->get(st.sym("a1"))->integer, 1);
            });
}

TEST(LayeredBindings, LayersStackUpToTheLimitThenFlatten) {
  // A set per step with its layer count and size: the second update is too
  // large to merge into the first layer, so it makes a second; the third is
  // smaller than the second layer, so it makes a third; the fourth is
  // larger than the third layer and merges into it; the fifth would make a
  // fourth and is copied flat instead.
  std::string steps =
      "let mk = p: n: builtins.listToAttrs (builtins.genList (i: { name = "
      "\"${p}${toString i}\"; "
      "      value = \"${p}${toString i}\"; }) n); "
      "    l1 = big // mk \"b\" 10; "
      "    l2 = l1 // (mk \"c\" 7 // { a0 = \"over\"; }); "
      "    l3 = l2 // mk \"d\" 6; "
      "    l4 = l3 // (mk \"e\" 9 // { b1 = \"over\"; }); "
      "    l5 = l4 // mk \"f\" 20; in ";
  const int layers[] = {1, 2, 3, 3, 0};
  const uint32_t sizes[] = {30, 37, 43, 52, 72};
  for (int i = 0; i < 5; ++i) {
    withValue(steps + "l" + std::to_string(i + 1),
              [&](EvalState& st, Value& v) {
                const Bindings& b = *v.attrs;
                EXPECT_EQ(b.layers(), layers[i]) << "l" << i + 1;
                EXPECT_EQ(b.size, sizes[i]) << "l" << i + 1;
                EXPECT_EQ(iterated(b).size(), sizes[i]);
                if (i == 0) {
                  EXPECT_EQ(b.get(st.sym("a0"))->integer, 0);
                } else {
                  EXPECT_EQ(b.get(st.sym("a0"))->sv(), "over");
                }
                EXPECT_EQ(b.get(st.sym("b1"))->sv(), i >= 3 ? "over" : "b1");
                EXPECT_EQ(b.get(st.sym("f0")) != nullptr, i == 4);
              });
  }
  // What every layer holds, read through all of them, equals a copy.
  EXPECT_EQ(evalStrict(std::string(kBig) + steps +
                       "let copy = builtins.listToAttrs (map (n: { name = n; "
                       "value = l4.${n}; }) "
                       "(builtins.attrNames l4)); in [ (l4 == copy) "
                       "(builtins.attrValues l4 == "
                       "builtins.attrValues copy) (builtins.toJSON l4 == "
                       "builtins.toJSON copy) ]"),
            "[ true true true ]");
}

// Large layers whose names hide ones in every set under them, spread
// thinly and densely (countHidden's cursors move in long and short steps):
// each set's size counts every visible name once, as iterating it does.
TEST(LayeredBindings, SizesCountNamesHiddenInEveryLayer) {
  const std::string sets =
      "let mk = f: n: builtins.listToAttrs (builtins.genList (i: { name = f i; value = i; }) n); "
      "    s = p: i: \"${p}${toString i}\"; "
      "    base = mk (s \"n\") 3000; "
      "    r1 = mk (i: s \"n\" (3 * i)) 500 // mk (s \"m\") 500; "
      "    r2 = mk (i: s \"n\" (7 * i)) 200 // mk (i: s \"m\" (2 * i)) 200 // mk (s \"p\") 300; "
      "    r3 = mk (i: s \"n\" (11 * i)) 100 // mk (i: s \"m\" (5 * i)) 50 "
      "         // mk (i: s \"p\" (3 * i)) 50 // mk (s \"q\") 100; "
      "    a = base // r1; b = a // r2; c = b // r3; in ";
  const char* names[] = {"a", "b", "c"};
  const uint32_t sizes[] = {3500, 3800, 3900};
  for (int i = 0; i < 3; ++i) {
    withValue(sets + names[i], [&](EvalState&, Value& v) {
      EXPECT_EQ(v.attrs->layers(), i + 1) << names[i];
      EXPECT_EQ(v.attrs->size, sizes[i]) << names[i];
      EXPECT_EQ(iterated(*v.attrs).size(), sizes[i]) << names[i];
    });
  }
}

TEST(LayeredBindings, LongChainsStayBounded) {
  // 200 updates of one or two attributes each hold what copies would.
  withValue(
      "builtins.foldl' (acc: i: acc // { \"k${toString i}\" = i; a5 = i; }) "
      "big "
      "(builtins.genList (i: i) 200)",
      [](EvalState& st, Value& v) {
        const Bindings& b = *v.attrs;
        EXPECT_LE(b.layers(), Bindings::kMaxLayers);
        EXPECT_EQ(b.size, 220u);
        EXPECT_EQ(iterated(b).size(), 220u);
        EXPECT_EQ(b.get(st.sym("k150"))->integer, 150);
        EXPECT_EQ(b.get(st.sym("a5"))->integer, 199);
        EXPECT_EQ(b.get(st.sym("a6"))->integer, 6);
      });
}

// Each expression on the layered `l` and on a copy with the same content,
// written out: the two must print the same.
TEST(LayeredBindings, ReadersSeeTheSameSetACopyWouldBe) {
  std::string defs =
      std::string(kBig) +
      "let l = big // { a2 = \"two\"; z = 26; }; "
      "    flat = builtins.listToAttrs (map (n: { name = n; value = l.${n}; }) "
      "      (builtins.attrNames l)); in ";
  const char* exprs[] = {
      "x: [ (builtins.attrNames x) (builtins.attrValues x) ]",
      "x: [ (x ? a2) (x ? z) (x ? a0) (x ? nope) (x.a2) (x.a0) (x.nope or 7) ]",
      "x: builtins.removeAttrs x [ \"a2\" \"z\" \"a7\" ]",
      "x: builtins.intersectAttrs { a2 = 0; z = 0; a9 = 0; q = 0; } x",
      "x: builtins.intersectAttrs x { a2 = 0; z = 0; a9 = 0; q = 0; }",
      "x: builtins.mapAttrs (n: v: \"${n}=${toString v}\") x",
      "x: with x; [ a2 z a11 ]",
      "x: { inherit (x) a2 z a3; }",
      "x: ({ a2, z, ... }@args: [ a2 z (builtins.length (builtins.attrNames "
      "args)) ]) x",
      "x: builtins.toJSON x",
      "x: builtins.toXML x",
      "x: builtins.length (builtins.attrNames (x // { a0 = 0; y = 1; }))",
      "x: builtins.catAttrs \"z\" [ x x ]",
      "x: builtins.zipAttrsWith (n: vs: vs) [ x { z = 0; } ]",
      "x: x == flat",
      "x: x == big",
      "x: (derivation (x // { name = \"n\"; system = \"s\"; builder = \"/b\"; "
      "})).drvPath",
  };
  for (const char* e : exprs) {
    SCOPED_TRACE(e);
    EXPECT_EQ(evalStrict(defs + "(" + e + ") l"),
              evalStrict(defs + "(" + e + ") flat"));
  }
  EXPECT_EQ(evalStrict(defs + "l == flat"), "true");
  EXPECT_EQ(evalStrict(defs + "(l // { z = 0; }) == flat"), "false");
  EXPECT_EQ(evalStrict(defs + "builtins.functionArgs ({ a2, ... }: a2)"),
            "{ a2 = false; }");
  // A pattern without `...` refuses the attributes of both layers it lacks.
  EXPECT_NE(testing::evalError(defs + "({ a2, z }: a2) l")
                .find("unexpected argument"),
            std::string::npos);
}

TEST(LayeredBindings, DerivationOutputsAreLayersOnTheAttributes) {
  withValue(
      "derivation (builtins.removeAttrs (big // { name = \"n\"; system = "
      "\"s\"; "
      "builder = \"/b\"; outputs = [ \"out\" \"dev\" ]; }) [ ])",
      [](EvalState& st, Value& v) {
        const Bindings& b = *v.attrs;
        ASSERT_NE(b.base(), nullptr);
        EXPECT_EQ(b.base()->base(), nullptr);
        EXPECT_EQ(b.get(st.sType)->sv(), "derivation");
        EXPECT_NE(b.get(st.sym("dev")), nullptr);
        EXPECT_EQ(b.get(st.sym("a4"))->integer, 4);
        EXPECT_EQ(iterated(b).size(), b.size);
      });
}

// A fetcher's few attributes are layered on too (a flat copy would
// duplicate them: they stay live as `drvAttrs`), and a base already at the
// most layers gets a copy instead of a layer past the limit.
TEST(LayeredBindings, SmallDerivationsOutputsAreLayersToo) {
  withValue(
      "derivation { name = \"src\"; system = \"s\"; builder = \"/b\"; "
      "url = \"u\"; }",
      [](EvalState& st, Value& v) {
        expectSet(st, *v.attrs, 1, 7, 11, {});
        EXPECT_EQ(v.attrs->get(st.sym("url"))->sv(), "u");
        EXPECT_EQ(v.attrs->get(st.sym("drvAttrs"))->attrs, v.attrs->base());
      });
  withValue(
      "let mk = p: n: builtins.listToAttrs (builtins.genList (i: { name = "
      "\"${p}${toString i}\"; value = i; }) n); "
      "in "
      "derivation (((big // mk \"b\" 10) // (mk \"c\" 7 // { name = \"n\"; "
      "system = "
      "\"s\"; builder = \"/b\"; })) // mk \"d\" 6)",
      [](EvalState& st, Value& v) {
        EXPECT_EQ(v.attrs->get(st.sym("drvAttrs"))->attrs->layers(),
                  Bindings::kMaxLayers);
        EXPECT_EQ(v.attrs->layers(), Bindings::kMaxLayers);
        EXPECT_EQ(v.attrs->get(st.sym("d3"))->integer, 3);
        EXPECT_EQ(v.attrs->get(st.sType)->sv(), "derivation");
      });
}

// Jobs built with `//` chains the way nixpkgs' extendDerivation and
// makeOverridable do, enumerated on 1 and 2 threads sharing the heap.
TEST(LayeredBindings, ThreadsShareLayeredSets) {
  std::string expr =
      std::string(kBig) +
      "let mk = n: let d = derivation (big // { name = n; system = \"s\"; "
      "builder = \"/b\"; "
      "  outputs = [ \"out\" \"lib\" ]; }); "
      "  r = d // { inherit (d) out lib; all = [ d.out d.lib ]; passthru = 1; "
      "}; "
      "  in r // { meta = { description = n; }; override = x: r; overrideAttrs "
      "= x: r; }; in "
      "builtins.listToAttrs (builtins.genList (i: { name = \"p${toString i}\"; "
      "value = mk \"p${toString i}\"; }) 64)";
  auto run = [&](unsigned threads) {
    std::map<std::string, std::string> out;
    runWithLargeStack([&] {
      EvalState st;
      Value v;
      st.eval(st.parseExprFromString(expr, "/tmp"), v);
      Bindings* noArgs = st.allocBindings(0);
      JobRoot root = prepareJobRoot(st, v, noArgs);
      enumerateJobsThreaded(
          st, root, noArgs, "", threads,
          [](const Job& j, std::string& text) { text += j.attr + "\t" + jobToJson(j) + "\n"; },
          [&](size_t, const std::string& text) {
            std::istringstream lines(text);
            for (std::string line; std::getline(lines, line);) {
              size_t tab = line.find('\t');
              out[line.substr(0, tab)] = line.substr(tab + 1);
            }
          });
    });
    return out;
  };
  auto one = run(1);
  ASSERT_EQ(one.size(), 64u);
  EXPECT_NE(one.at("p7").find("\"description\":\"p7\""), std::string::npos);
  EXPECT_NE(one.at("p7").find("\"lib\""), std::string::npos);
  EXPECT_EQ(run(2), one);
}

}  // namespace
}  // namespace kiln::eval

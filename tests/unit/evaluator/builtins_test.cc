// Semantics of the builtins whose algorithms changed for issue 12 (costs are
// measured by bench/builtin_complexity.sh, not here).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "eval_test_util.h"

namespace kiln::eval {
namespace {

using testing::evalDeep;
using testing::evalError;
using testing::evalStrict;

// A set of `n` attributes a0 .. a(n-1), each worth its index.
std::string bigSet(int n) {
  return "(builtins.listToAttrs (builtins.genList (i: { name = \"a${toString "
         "i}\"; value = i; }) " +
         std::to_string(n) + "))";
}

TEST(Builtins, ReplaceStringsAsNix) {
  // Expected values are nix-instantiate 2.8's.
  EXPECT_EQ(evalStrict(R"(builtins.replaceStrings ["ab" "" "b"] ["X" "-" "Y"] "abcabb")"),
            R"("X-cX-b-")");
  EXPECT_EQ(evalStrict(R"(builtins.replaceStrings [""] ["-"] "")"), R"("-")");
  EXPECT_EQ(evalStrict(R"(builtins.replaceStrings ["a" "aa"] ["1" "2"] "aaa")"), R"("111")");
  EXPECT_EQ(evalStrict(R"(builtins.replaceStrings [] [] "xyz")"), R"("xyz")");
  EXPECT_EQ(evalStrict(R"(builtins.replaceStrings ["${"x"}y" "z"] ["Q" "W"] "xyzxy")"), R"("QWQ")");
  // Every replacement is forced, found or not; only those used add context.
  EXPECT_NE(evalError(R"(builtins.replaceStrings ["q" "a"] [(throw "no") "b"] "aa")").find("no"),
            std::string::npos);
  EXPECT_EQ(evalStrict(R"(builtins.getContext (builtins.replaceStrings ["q" "a"]
              ["${derivation { name = "d"; system = "x"; builder = "/b"; }}" "b"] "aa"))"),
            "{ }");
  EXPECT_EQ(evalStrict(R"(toString [ "a" 1 [ ] [ "b" ] null true "c" ])"), R"("a 1 b  1 c")");
}

// Expected values are nix-instantiate 2.8's: patterns beyond the inline
// capacity, runs copied between bytes no pattern starts with, empty
// patterns, overlapping patterns.
// Names are sorted on their first 8 bytes first, then whole where those
// tie: prefixes of each other, ties past 8 bytes, bytes above 0x7f and ""
// (order from nix-instantiate 2.8).
TEST(Builtins, AttrNamesSortsNamesSharingPrefixes) {
  EXPECT_EQ(evalStrict(R"(builtins.attrNames { "configureFlags" = 1; "configurePhase" = 2;
      "configure" = 3; "configur" = 4; "conf" = 5; "" = 6; "configurePhas" = 7; "zé" = 8;
      "z~" = 9; "propagatedBuildInputs" = 10; "propagatedNativeBuildInputs" = 11; "ab" = 12;
      "a" = 13; "B" = 14; "_x" = 15; "x-y" = 16; })"),
            R"([ "" "B" "_x" "a" "ab" "conf" "configur" "configure" "configureFlags" )"
            R"("configurePhas" "configurePhase" "propagatedBuildInputs" )"
            R"("propagatedNativeBuildInputs" "x-y" "z~" "zé" ])");
}

TEST(Builtins, ReplaceStringsManyPatternsAndLongRunsAsNix) {
  EXPECT_EQ(evalStrict("builtins.replaceStrings [ \"a\" \"b\" \"c\" \"d\" \"e\" \"f\" \"g\" \"h\" \"i\" \"j\" \"k\" \"l\" \"m\" \"n\" \"o\" \"p\" \"q\" \"r\" \"s\" \"t\" \"u\" \"v\" \"w\" \"x\" \"y\" \"z\" ] [ \"A\" \"B\" \"C\" \"D\" \"E\" \"F\" \"G\" \"H\" \"I\" \"J\" \"K\" \"L\" \"M\" \"N\" \"O\" \"P\" \"Q\" \"R\" \"S\" \"T\" \"U\" \"V\" \"W\" \"X\" \"Y\" \"Z\" ] \"hello, world: the quick brown fox 123\""),
            "\"HELLO, WORLD: THE QUICK BROWN FOX 123\"");
  EXPECT_EQ(evalStrict("builtins.replaceStrings (builtins.genList (i: \"<${toString i}>\") 40) (builtins.genList (i: \"[${toString (i * 2)}]\") 40) \"a<1>b<39><40>c<3><<2>>d\""),
            "\"a[2]b[78]<40>c[6]<[4]>d\"");
  EXPECT_EQ(evalStrict("builtins.replaceStrings [ \"ab\" \"a\" \"abc\" \"\" ] [ \"1\" \"2\" \"3\" \"-\" ] \"xxabcaab ya\""),
            "\"-x-x1-c21- -y2-\"");
  EXPECT_EQ(evalStrict("builtins.replaceStrings [ \"\\n\" \"'\" \"\\\"\" ] [ \"\\\\n\" \"'\\\\''\" \"\\\\\\\"\" ] \"line one\\nit's \\\"quoted\\\"\\nend\""),
            "\"line one\\\\nit'\\\\''s \\\\\\\"quoted\\\\\\\"\\\\nend\"");
  EXPECT_EQ(evalStrict("builtins.replaceStrings [ \"needle\" ] [ \"pin\" ] \"a long haystack without it at the start, then needle, needleneedle and a needl at the end\""),
            "\"a long haystack without it at the start, then pin, pinpin and a needl at the end\"");
  EXPECT_EQ(evalStrict("builtins.replaceStrings [ \"x\" ] [ \"y\" ] \"\""),
            "\"\"");
  EXPECT_EQ(evalStrict("builtins.replaceStrings [ \"\" ] [ \".\" ] \"abc\""),
            "\".a.b.c.\"");
}

TEST(Builtins, ReplaceStringsThatReplacesNothingReturnsItsSubject) {
  EvalState st;
  Value v;
  evalDeep(st, R"(
      let s = "${derivation { name = "d"; system = "x"; builder = "/b"; }}-suffix";
      in [ s (builtins.replaceStrings [ "zz" ] [ "y" ] s) (builtins.replaceStrings [ "-" ] [ "+" ] s) ])",
           v);
  const Value& s = *v.list.elems[0];
  const Value& same = *v.list.elems[1];
  const Value& changed = *v.list.elems[2];
  EXPECT_EQ(same.str.s, s.str.s);  // no copy
  EXPECT_EQ(same.str.context, s.str.context);
  EXPECT_NE(changed.str.s, s.str.s);
  EXPECT_NE(std::string_view(changed.str.s).find("+suffix"),
            std::string_view::npos);
}

TEST(Builtins, IntersectAttrsTakesValuesFromTheSecondSetWhicheverIsSmaller) {
  // Small names, big values (callPackage's case) and the other way round.
  EXPECT_EQ(
      evalStrict("builtins.intersectAttrs { a3 = 0; a700 = 0; zz = 0; } " +
                 bigSet(1000)),
      "{ a3 = 3; a700 = 700; }");
  EXPECT_EQ(evalStrict("builtins.intersectAttrs " + bigSet(1000) +
                       " { a3 = 0; a700 = 0; zz = 0; }"),
            "{ a3 = 0; a700 = 0; }");
  EXPECT_EQ(evalStrict("builtins.intersectAttrs { } " + bigSet(10)), "{ }");
  EXPECT_EQ(evalStrict("builtins.intersectAttrs " + bigSet(10) + " { }"),
            "{ }");
  EXPECT_EQ(
      evalStrict("builtins.intersectAttrs { x = 1; y = 2; } { y = 3; z = 4; }"),
      "{ y = 3; }");
  // The result is a set like any other: lookups, updates and equality.
  EXPECT_EQ(evalStrict(
                "let s = builtins.intersectAttrs { a5 = 0; a9 = 0; a2 = 0; } " +
                bigSet(20) +
                "; in [ s.a2 s.a9 (s ? a3) (s // { a1 = 1; }) (s == { a2 = 2; "
                "a5 = 5; a9 = 9; }) ]"),
            "[ 2 9 false { a1 = 1; a2 = 2; a5 = 5; a9 = 9; } true ]");
  // Values are not forced.
  EXPECT_EQ(evalStrict("builtins.attrNames (builtins.intersectAttrs { a = 1; } "
                       "{ a = throw \"no\"; })"),
            "[ \"a\" ]");
  EXPECT_NE(evalError("builtins.intersectAttrs 1 { }")
                .find("while a set was expected"),
            std::string::npos);
}

// attrNames and mapAttrs give each name as one value per symbol, shared
// by every call; functionArgs one set per function. What Nix prints is
// unchanged.
TEST(Builtins, NamesAndFunctionArgsAreSharedValues) {
  EXPECT_EQ(evalStrict("[ (builtins.attrNames { b = 1; a = 2; }) (builtins.mapAttrs (n: v: n + \"!\") "
                       "{ x = 1; }) (builtins.functionArgs ({ p, q ? 1 }: p)) ]"),
            "[ [ \"a\" \"b\" ] { x = \"x!\"; } { p = false; q = true; } ]");
  EvalState st;
  Value v;
  evalDeep(st,
           "let f = { p }: p; s = { b = 1; a = 2; }; in "
           "[ (builtins.attrNames s) (builtins.attrNames (s // { c = 3; })) "
           "  (builtins.functionArgs f) (builtins.functionArgs f) ]",
           v);
  ASSERT_EQ(v.list.size, 4u);
  Value* first = v.list.elems[0];
  Value* second = v.list.elems[1];
  EXPECT_EQ(first->list.elems[0], second->list.elems[0]);  // "a"
  EXPECT_EQ(first->list.elems[1], second->list.elems[1]);  // "b"
  EXPECT_EQ(v.list.elems[2]->attrs, v.list.elems[3]->attrs);
}

// removeAttrs that removes everything gives the state's empty set (as
// `{ }`), and otherwise a set of exactly what it keeps: a collectable set
// keeps a trimmed tail (callPackage's `removeAttrs fargs (attrNames given)`
// kept a package's argument count of empty room, 120 bytes a package).
TEST(Builtins, RemoveAttrsAllocatesWhatItKeeps) {
  EvalState st;
  Value v;
  evalDeep(st,
           "let s = { a = 1; b = 2; c = 3; }; in [ "
           "(builtins.removeAttrs s [ \"a\" \"b\" \"c\" ]) "
           "(builtins.removeAttrs s [ \"b\" ]) ]",
           v);
  EXPECT_EQ(v.list.elems[0]->attrs, st.vEmptyAttrs.attrs);
  EXPECT_EQ(v.list.elems[1]->attrs->size, 2u);
  EXPECT_EQ(v.list.elems[1]->attrs->capacity(), 2u);
}

TEST(Builtins, RemoveAttrsAndListToAttrs) {
  EXPECT_EQ(evalStrict("builtins.removeAttrs { a = 1; b = 2; c = 3; } [ \"c\" "
                       "\"zz\" \"a\" \"c\" ]"),
            "{ b = 2; }");
  EXPECT_EQ(evalStrict("builtins.removeAttrs { a = 1; } [ \"a\" ]"), "{ }");
  EXPECT_EQ(evalStrict("builtins.removeAttrs " + bigSet(100) +
                       " [ \"a0\" \"a99\" ] ? a50"),
            "true");
  // The first element with a name wins; values stay lazy.
  EXPECT_EQ(evalStrict(
                "builtins.listToAttrs [ { name = \"b\"; value = 1; } { name = "
                "\"a\"; value = 2; }"
                " { name = \"b\"; value = 3; } { name = \"a\"; value = 4; } ]"),
            "{ a = 2; b = 1; }");
  EXPECT_EQ(evalStrict("builtins.attrNames (builtins.listToAttrs [ ])"), "[ ]");
  EXPECT_EQ(evalStrict("builtins.listToAttrs [ { name = \"x\"; value = throw "
                       "\"lazy\"; } ] ? x"),
            "true");
  EXPECT_EQ(
      evalStrict("builtins.length (builtins.attrNames " + bigSet(1000) + ")"),
      "1000");
}

TEST(Builtins, SetLiteralsInAnyOrderWithOverrides) {
  // Attributes are stored in symbol order; __overrides still reaches every
  // attribute of a rec set that refers to an overridden one.
  EXPECT_EQ(
      evalStrict("[ (rec { __overrides = { a = 2; }; a = 1; x = a; }).x"
                 " (rec { x = a; a = 1; __overrides = { a = 2; }; }).x"
                 " (rec { zz = 1; b = zz + 1; aa = b; }).aa"
                 " (builtins.attrNames { z = 1; y = 2; \"a b\" = 3; }) ]"),
      "[ 2 2 2 [ \"a b\" \"y\" \"z\" ] ]");
}

TEST(Builtins, ConcatenationOfStringsPathsNumbersAndDerivations) {
  EXPECT_EQ(evalStrict("let x = \"b\"; in [ (\"a\" + x + \"c\") "
                       "\"${x}${x}-${\"\"}\" (1 + 2) (1 + 2.5) ]"),
            "[ \"abc\" \"bb-\" 3 3.5 ]");
  EXPECT_EQ(evalStrict("/a/b + \"/c/../d\""), "/a/b/d");
  // A set with outPath (a derivation) counts as its outPath, first or not.
  EXPECT_EQ(evalStrict("let d = { outPath = \"/o\"; }; in [ (d + \"/bin\") "
                       "\"${d}/lib\" (\"-\" + d) ]"),
            "[ \"/o/bin\" \"/o/lib\" \"-/o\" ]");
  EXPECT_EQ(evalStrict("let s = { __toString = self: \"ts\"; outPath = \"/o\"; "
                       "}; in \"${s}!\""),
            "\"ts!\"");
  // Contexts of every part are kept.
  EXPECT_EQ(
      evalStrict("let a = builtins.appendContext \"a\" { "
                 "\"/nix/store/rxcq0i5yqkhxhjf6wv5z1jfynan03a2x-b.drv\" = "
                 "{ path = true; }; }; in builtins.attrNames "
                 "(builtins.getContext \"${a}-${a}x\")"),
      "[ \"/nix/store/rxcq0i5yqkhxhjf6wv5z1jfynan03a2x-b.drv\" ]");
  // Parts are coerced in order: the set fails before the throw is reached.
  EXPECT_NE(evalError("\"${{ }}${throw \"later\"}\"")
                .find("cannot coerce a set to a string"),
            std::string::npos);
  EXPECT_NE(evalError("\"a\" + 1").find("cannot coerce an integer to a string"),
            std::string::npos);
  EXPECT_NE(evalError("1 + \"a\"").find("cannot add a string to an integer"),
            std::string::npos);
  // A string built in a loop.
  EXPECT_EQ(evalStrict("builtins.stringLength (builtins.foldl' (acc: i: acc + "
                       "\"xyz\") \"\" (builtins.genList (i: i) 1000))"),
            "3000");
}

// A Context reads back as a set: sorted, each entry once, whatever the
// order and repetition of insertion, the same texts at other addresses
// included; compaction of a long run of repeats keeps it small and exact.
TEST(Builtins, ContextReadsBackAsASortedSetOfItsEntries) {
  std::vector<std::string> texts = {"=/nix/store/b.drv", "/nix/store/a",
                                    "!out!/nix/store/c.drv", "/nix/store/a"};
  Context ctx;
  EXPECT_TRUE(ctx.empty());
  for (int round = 0; round < 500; ++round)
    for (auto& t : texts) ctx.insert(t);
  std::string copy = texts[1];  // equal text, another address
  ctx.insert(copy);
  EXPECT_FALSE(ctx.empty());
  EXPECT_EQ(ctx.size(), 3u);
  std::vector<std::string> got(ctx.begin(), ctx.end());
  EXPECT_EQ(got,
            (std::vector<std::string>{"!out!/nix/store/c.drv", "/nix/store/a",
                                      "=/nix/store/b.drv"}));
  Context other;
  other.insert(ctx.begin(), ctx.end());
  other.insert(std::string_view("/nix/store/0"));
  std::vector<std::string> merged(other.begin(), other.end());
  EXPECT_EQ(merged.front(), "!out!/nix/store/c.drv");
  EXPECT_EQ(merged.size(), 4u);
  // The context a derivation gathers from many attributes, and a string's
  // (paths as nix-instantiate 2.8 prints them).
  EXPECT_EQ(
      evalStrict("let d = derivation { name = \"d\"; system = \"x\"; "
                 "builder = \"/b\"; }; e = derivation { name = \"e\"; "
                 "system = \"x\"; builder = \"/b\"; a = d; b = \"${d}\"; "
                 "c = [ d d ]; }; in builtins.attrNames (builtins.getContext "
                 "\"${e.drvPath}${d}\")"),
      "[ \"/nix/store/5jf8mg96nyj2p40f1sva2d6zg2b4iapf-d.drv\" "
      "\"/nix/store/i42bx4911qaxv4pj3mw0c03z0i4hdk1j-e.drv\" ]");
}

// `"${x}"` of a string, or of a derivation (its outPath), is that string
// itself, text and context, not a copy; anything else is coerced as
// before (paths copied, `__toString` called, numbers refused).
TEST(Builtins, AnInterpolationOfOneStringIsThatString) {
  EXPECT_EQ(evalStrict("let o = { outPath = \"plain\"; }; t = { __toString = "
                       "self: \"ts\"; outPath = \"no\"; }; in [ \"${o}\" "
                       "\"${t}\" \"${\"\"}\" ]"),
            "[ \"plain\" \"ts\" \"\" ]");
  EXPECT_NE(evalError("let x = 1; in \"${x}\"")
                .find("cannot coerce an integer to a string"),
            std::string::npos);
  EvalState st;
  Value v;
  evalDeep(st,
           "let d = derivation { name = \"d\"; system = \"x\"; "
           "builder = \"/b\"; }; s = \"a${d}\"; in [ s \"${s}\" "
           "d.outPath \"${d}\" ]",
           v);
  ASSERT_EQ(v.list.size, 4u);
  Value* s = v.list.elems[0];
  Value* again = v.list.elems[1];
  EXPECT_EQ(s->str.s, again->str.s);
  EXPECT_EQ(s->str.context, again->str.context);
  ASSERT_NE(s->str.context, nullptr);
  EXPECT_EQ(v.list.elems[2]->str.s, v.list.elems[3]->str.s);
  EXPECT_EQ(v.list.elems[2]->str.context, v.list.elems[3]->str.context);
}

// A derivation's record keeps its input sources' names inside the arena
// text of the context entries they came from (toFile's path), not in a
// copy of its own: a longer source name costs the arena its context
// entry, not a second copy in the record. That a `=` context still lists them
// is checked by the conformance and drv identity suites.
TEST(Builtins, DerivationRecordsKeepNoCopyOfTheirSourcesNames) {
  EvalState st;
  auto arenaUsed = [&](const std::string& srcName, int i) {
    std::string n = std::to_string(i);
    Expr* e = st.parseExprFromString(
        "(derivation { name = \"d" + n +
            "\"; system = \"x\"; builder = \"/b\"; src = "
            "builtins.toFile \"" +
            srcName + "\" \"" + n + "\"; }).drvPath",
        "/tmp");
    auto* before = static_cast<char*>(st.arena.allocate(1, 1));
    Value v;
    runWithLargeStack([&] { st.eval(e, v); });
    auto* after = static_cast<char*>(st.arena.allocate(1, 1));
    return static_cast<size_t>(after - before);
  };
  arenaUsed("warm", 0);
  size_t shortName = arenaUsed(std::string(10, 's'), 1);
  size_t longName = arenaUsed(std::string(200, 'l'), 2);
  ASSERT_GT(longName, shortName);
  // One more copy of the 190 more characters (the context entry), not two.
  EXPECT_LT(longName - shortName, 190u + 95u);
}

// A context entry is laid out after a one-entry context array of itself
// (makeContextEntry): a string whose context is that one entry uses it
// instead of an array of its own, and toFile's and path's results are the
// entry's own text (no collectable copy of the path, no array).
TEST(Builtins, OneEntryContextsAreTheEntrysOwnArray) {
  EvalState st;
  auto ownArray = [](const Value& v) {
    return v.type == VType::kString && v.str.context && v.str.context[0] &&
           !v.str.context[1] &&
           v.str.context == reinterpret_cast<const char* const*>(v.str.context[0]) - 2;
  };
  Value v;
  evalDeep(st, "builtins.toFile \"t.txt\" \"hello\"", v);
  EXPECT_TRUE(ownArray(v));
  EXPECT_EQ(v.str.s, v.str.context[0]);  // the entry is the string itself
  EXPECT_EQ(v.sv(), "/nix/store/9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt");
  evalDeep(st,
           "builtins.appendContext \"a\" { "
           "\"/nix/store/rxcq0i5yqkhxhjf6wv5z1jfynan03a2x-b\" = { path = true; }; }",
           v);
  EXPECT_TRUE(ownArray(v));
  const std::string drv =
      "(derivation { name = \"d\"; system = \"x\"; builder = \"/b\"; })";
  for (const char* attr : {".drvPath", ".outPath", ".out.outPath"}) {
    evalDeep(st, drv + attr, v);
    EXPECT_TRUE(ownArray(v)) << attr;
  }
  // A string built from parts with that one entry, twice, or with another.
  evalDeep(st, "let d = " + drv + "; in \"${d}/bin:${d}/lib\"", v);
  EXPECT_TRUE(ownArray(v));
  evalDeep(st, "let d = " + drv + "; in \"${d.drvPath} ${d}\"", v);
  EXPECT_FALSE(ownArray(v));
  ASSERT_TRUE(v.str.context && v.str.context[0] && v.str.context[1]);
  EXPECT_EQ(v.str.context[2], nullptr);
  EXPECT_EQ(evalStrict("let d = " + drv +
                       "; s = builtins.unsafeDiscardOutputDependency d.drvPath; in "
                       "[ (builtins.getContext s) (builtins.getContext \"${d}${d.drvPath}\") ]"),
            "[ { \"/nix/store/5jf8mg96nyj2p40f1sva2d6zg2b4iapf-d.drv\" = { path = true; }; } "
            "{ \"/nix/store/5jf8mg96nyj2p40f1sva2d6zg2b4iapf-d.drv\" = { allOutputs = true; "
            "outputs = [ \"out\" ]; }; } ]");
}

}  // namespace
}  // namespace kiln::eval

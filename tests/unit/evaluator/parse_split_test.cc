// Parsing a large file on two threads (parse_split.h): a split's bindings
// are used only when the main parser reaches the guessed offset at a
// binding start, and then the tree, the evaluation and every error are as
// in a serial parse; a wrong guess falls back to the serial parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "eval_test_util.h"
#include "parse_split.h"
#include "parser.h"

using namespace kiln::eval;
using namespace kiln::eval::testing;

namespace {

struct Parsed {
  std::string show;   ///< Expr::show of the tree ("" on an error)
  std::string error;  ///< the ParseError's message ("" if none)
  bool splitUsed = false;
};

// Parses `text` as the file "split-test.nix" (its text kept for snippets),
// split at `split` (0: serially).
Parsed parseText(EvalState& st, const std::string& text, size_t split) {
  Parsed r;
  auto owned = std::make_shared<const std::string>(text);
  uint32_t origin = st.positions.addOrigin("split-test.nix", owned, true);
  runWithLargeStack([&] {
    Parser p(st, *owned, origin, "/tmp");
    if (split) p.splitAt(split);
    try {
      std::ostringstream out;
      p.parseAll()->show(st.symbols, out);
      r.show = out.str();
    } catch (const ParseError& e) {
      r.error = e.what();
    }
    r.splitUsed = p.splitTaken();
  });
  return r;
}

// Serial and split parses of `text` (split at the first occurrence of
// `at` after `from`); expects the same tree or error. Returns the split's.
Parsed expectSameAsSerial(const std::string& text, const std::string& at, size_t from = 0) {
  size_t offset = text.find(at, from);
  EXPECT_NE(offset, std::string::npos) << at;
  EvalState st;
  Parsed serial = parseText(st, text, 0);
  Parsed split = parseText(st, text, offset);
  EXPECT_EQ(split.show, serial.show);
  EXPECT_EQ(split.error, serial.error);
  return split;
}

// A package set of `n` bindings, one a line, of several shapes.
std::string bigSet(size_t n, const std::string& insert = "", size_t insertAt = 0) {
  std::string s = "{ lib ? { }, x ? 1 }:\nlet k = 2; in {\n";
  for (size_t i = 0; i < n; ++i) {
    if (i == insertAt && !insert.empty()) s += insert;
    std::string id = std::to_string(i);
    switch (i % 4) {
      case 0:
        s += "  p" + id + " = { pname = \"p" + id + "\"; words = [ \"a\" \"b\" \"p" + id +
             "\" ]; n = " + id + " + k; };\n";
        break;
      case 1: s += "  f" + id + " = y: y + " + id + ";\n"; break;
      case 2: s += "  \"q" + id + "\".r = ''\n    line " + id + "\n  '';\n"; break;
      default: s += "  inherit (lib) l" + id + ";\n  s" + id + " = \"${toString x}-" + id + "\";\n";
    }
  }
  return s + "}\n";
}

}  // namespace

TEST(ParseSplit, GuessFindsABindingStartAfterTheMiddle) {
  std::string text = bigSet(20000);
  size_t at = guessSplitOffset(text);
  ASSERT_NE(at, kNoSplit);
  EXPECT_GT(at, text.size() / 2);
  EXPECT_LT(at, text.size() / 4 * 3);
  EXPECT_EQ(text[at - 1], ' ');
  // No line `name =` (only `==`, keywords, indented strings): no split.
  std::string none(600000, ' ');
  for (size_t i = 0; i + 20 < none.size(); i += 20) none.replace(i, 20, "\n  a == b; in = 1; ");
  EXPECT_EQ(guessSplitOffset(none), kNoSplit);
}

TEST(ParseSplit, LargeFileGivesTheSerialTreeAndEvaluation) {
  std::string text = bigSet(20000);
  ASSERT_GE(text.size(), kParseSplitBytes);
  size_t at = guessSplitOffset(text);
  EvalState st;
  Parsed serial = parseText(st, text, 0);
  Parsed split = parseText(st, text, at);
  EXPECT_TRUE(split.splitUsed);
  EXPECT_EQ(split.error, "");
  EXPECT_EQ(split.show, serial.show);
  // Evaluated with parseThreads 2 (parseAll guesses itself) and 1.
  std::string expr = "let s = (" + text + ") { lib = { " +
                     "l3 = 3; l19999 = 5; }; }; in [ s.p0 s.f19997 s.q19998 s.s19999 " +
                     "(s.f14001 1) s.p16000 (builtins.length (builtins.attrNames s)) ]";
  EvalSettings two;
  two.parseThreads = 2;
  EvalState serialState, splitState(two);
  std::string want = evalStrict(serialState, expr);
  EXPECT_EQ(evalStrict(splitState, expr), want);
  EXPECT_NE(want.find("\"p16000\""), std::string::npos) << want;
}

TEST(ParseSplit, GuessInsideAStringACommentOrANestedSet) {
  // Inside a multi-line '' string: never a token start, not used.
  EXPECT_FALSE(expectSameAsSerial("{\n  a = ''\n  b = 1;\n  '';\n  c = 2;\n}", "b =").splitUsed);
  // Inside a comment.
  EXPECT_FALSE(expectSameAsSerial("{\n  a = 1; /*\n  b = 1;\n  */ c = 2;\n}", "b =").splitUsed);
  // Inside a "string", where the second thread's parse fails.
  EXPECT_FALSE(expectSameAsSerial("{\n  a = \"\n  b = 1; }\";\n  c = 2;\n}", "b =").splitUsed);
  // In a nested set: a binding start all the same, used.
  EXPECT_TRUE(
      expectSameAsSerial("{\n  a = {\n    b = 1;\n    c = 2;\n  };\n  d = 3;\n}", "c =").splitUsed);
  // In a let's bindings (ends at `in`), and the `in` of a let in a set.
  EXPECT_TRUE(expectSameAsSerial("let\n  a = 1;\n  b = a;\nin b", "b =").splitUsed);
  EXPECT_TRUE(expectSameAsSerial("{ x = let a = 1;\n  b = 2; in a; y = 1; }", "b =").splitUsed);
  // Not a binding start where the main parser is: an attribute path's
  // second name, a function's formal (the second thread fails or is never
  // reached).
  EXPECT_FALSE(expectSameAsSerial("{\n  a.\n  b = 1;\n}", "b =").splitUsed);
  EXPECT_FALSE(expectSameAsSerial("{ a ? 1,\n  b ? 2 }: a", "b ?").splitUsed);
}

TEST(ParseSplit, ParseErrorsAreTheSerialOnes) {
  std::string bad = "  broken = { a = ; };\n";
  // After the split, before it, and in both halves (the first one wins).
  EXPECT_NE(expectSameAsSerial(bigSet(4000, bad, 3000), "p2000 =").error.find(
                "syntax error, unexpected ';'"),
            std::string::npos);
  EXPECT_NE(expectSameAsSerial(bigSet(4000, bad, 1000), "p2000 =").error.find("syntax error"),
            std::string::npos);
  std::string both = bigSet(4000, bad, 1000);
  both.insert(both.find("  p3000 ="), "  twice = ] ;\n");
  EXPECT_NE(expectSameAsSerial(both, "p2000 =").error.find("unexpected ';'"), std::string::npos);
  // The end of the file inside the second part; an unterminated string.
  EXPECT_NE(expectSameAsSerial("{\n  a = 1;\n  b = 2;\n", "b =").error.find("end of file"),
            std::string::npos);
  EXPECT_NE(expectSameAsSerial("{\n  a = 1;\n  b = \"x;\n}", "b =").error, "");
  // Errors the parser raises itself, not the grammar.
  EXPECT_NE(expectSameAsSerial("{\n  a = 1;\n  inherit \"${b}\";\n}", "inherit").error.find(
                "dynamic attributes not allowed in inherit"),
            std::string::npos);
  EXPECT_NE(expectSameAsSerial("let\n  a = 1;\n  ${b} = 2;\nin a", "${b}").error.find(
                "dynamic attributes not allowed in let"),
            std::string::npos);
}

TEST(ParseSplit, AttributePathsMergeAcrossTheSplit) {
  std::string text = "{\n  a.b = 1;\n  x = 0;\n  a.c = 2;\n  a = { d = 3; };\n  inherit (x) y;\n}";
  Parsed p = expectSameAsSerial(text, "a.c");
  EXPECT_TRUE(p.splitUsed);
  EXPECT_EQ(p.error, "");
  // In a large file, parsed with parseThreads 2: a.c after the split.
  std::string big = bigSet(20000, "  a.b = 1;\n", 2);
  big.insert(big.find("  p18000 ="), "  a.c = 2;\n");
  EvalSettings two;
  two.parseThreads = 2;
  EvalState st(two);
  EXPECT_EQ(evalStrict(st, "((" + big + ") { }).a"), "{ b = 1; c = 2; }");
}

TEST(ParseSplit, DuplicateAttributesAcrossTheSplitAsSerially) {
  Parsed p = expectSameAsSerial("{\n  x = 1;\n  y = 2;\n  x = 3;\n}", "x = 3");
  EXPECT_NE(p.error.find("attribute 'x' already defined at split-test.nix:2:3"), std::string::npos)
      << p.error;
  p = expectSameAsSerial("{\n  inherit x;\n  y = 2;\n  inherit z x;\n}", "inherit z");
  EXPECT_NE(p.error.find("attribute 'x' already defined at split-test.nix:2:11"),
            std::string::npos)
      << p.error;
  p = expectSameAsSerial("{\n  a.b = 1;\n  y = 2;\n  a.b = 3;\n}", "a.b = 3");
  EXPECT_NE(p.error.find("attribute 'a.b' already defined"), std::string::npos) << p.error;
  // A duplicate after the split and a syntax error after it: the duplicate.
  p = expectSameAsSerial("{\n  x = 1;\n  y = 2;\n  x = 3;\n  z = ;\n}", "y = 2");
  EXPECT_NE(p.error.find("attribute 'x' already defined"), std::string::npos) << p.error;
}

TEST(ParseSplit, PositionsInTheSecondPartAreRight) {
  std::string text = bigSet(4000, "  broken = { a = ; };\n", 3000);
  size_t line = 1 + std::count(text.begin(), text.begin() + text.find("  broken"), '\n');
  Parsed p = expectSameAsSerial(text, "p2000 =");
  EXPECT_NE(p.error.find("split-test.nix:" + std::to_string(line) + ":18"), std::string::npos)
      << p.error;
  // And in an evaluation: __curPos after the split.
  std::string expr = bigSet(20000, "  where = __curPos;\n", 18000);
  size_t whereLine = 1 + std::count(expr.begin(), expr.begin() + expr.find("  where"), '\n');
  EvalSettings two;
  two.parseThreads = 2;
  EvalState st(two);
  EXPECT_EQ(evalStrict(st, "((" + expr + ") { }).where.line"), std::to_string(whereLine));
}

TEST(ParseSplit, NestingLimitCountsTheMainParsersDepth) {
  // 1,490 nested sets (two levels each), a split in the innermost, 20
  // parentheses below it: too deep as a whole, as serially, though the
  // second thread alone is not.
  std::string text;
  for (int i = 0; i < 1489; ++i) text += "{ a = ";
  text += "{\n  x = 1;\n  y = ";
  for (int i = 0; i < 20; ++i) text += "( ";
  text += "1 ";
  for (int i = 0; i < 20; ++i) text += ") ";
  text += ";\n}";
  for (int i = 0; i < 1489; ++i) text += "; }";
  Parsed p = expectSameAsSerial(text, "y =");
  EXPECT_FALSE(p.splitUsed);
  EXPECT_NE(p.error.find("expression nesting too deep"), std::string::npos) << p.error;
}

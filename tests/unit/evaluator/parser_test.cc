// Lexer and parser: syntax, precedence, strings, paths, errors.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "eval_test_util.h"
#include "lexer.h"

using namespace kiln::eval;
using namespace kiln::eval::testing;

namespace {
// The arena bytes parsing `text` takes. The arena bumps within a 4 MiB
// chunk; a parse that starts a new chunk is measured again in the new one.
size_t arenaBytesOfParse(EvalState& st, const std::string& text) {
  size_t used = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto* before = static_cast<char*>(st.arena.allocate(1, 1));
    EXPECT_NE(st.parseExprFromString(text, "/tmp"), nullptr);
    auto* after = static_cast<char*>(st.arena.allocate(1, 1));
    used = static_cast<size_t>(after - before);
    if (after > before && used < (size_t{1} << 20)) break;
  }
  return used;
}

// `prefix` and a list literal of 1,000 `item`s.
std::string thousandInAList(const std::string& prefix,
                            const std::string& item) {
  std::string text = prefix + "[ ";
  for (int i = 0; i < 1000; ++i) text += item + " ";
  return text + "]";
}
}  // namespace

TEST(Parser, OperatorPrecedenceAndAssociativity) {
  EXPECT_EQ(evalStrict("1 + 2 * 3 - 4 / 2"), "5");
  EXPECT_EQ(evalStrict("10 - 3 - 2"), "5");
  EXPECT_EQ(evalStrict("[1] ++ [2] ++ [3]"), "[ 1 2 3 ]");
  EXPECT_EQ(evalStrict("{a=1;} // {b=2;} // {a=3;}"), "{ a = 3; b = 2; }");
  EXPECT_EQ(evalStrict("true -> false -> true"), "true");
  EXPECT_EQ(evalStrict("!true || true && false"), "false");
  EXPECT_EQ(evalStrict("-2 * 3"), "-6");
  EXPECT_EQ(evalStrict("1 < 2 == true"), "true");
  EXPECT_EQ(evalStrict("{a.b = 1;} ? a.b"), "true");
  EXPECT_EQ(evalStrict("2 >= 2 && 3 <= 2 == false"), "true");
}

TEST(Parser, NonAssociativeComparisonIsASyntaxError) {
  EXPECT_NE(evalError("1 == 1 == 1").find("syntax error"), std::string::npos);
  EXPECT_NE(evalError("1 < 2 < 3").find("syntax error"), std::string::npos);
}

TEST(Parser, StringsAndEscapes) {
  EXPECT_EQ(evalStrict(R"("a\"b\n\t\\ $${x} \${y}")"), R"("a\"b\n\t\\ $\${x} \${y}")");
  EXPECT_EQ(evalStrict(R"(let x = "y"; in "a${x}b${toString 1}")"), R"("ayb1")");
  EXPECT_EQ(evalStrict("''\n  a\n    b\n  ''"), R"("a\n  b\n")");
  EXPECT_EQ(evalStrict("''a'''b''$c''\\nd''"), R"("a''b$c\nd")");
}

// Indented strings copy runs without quotes or dollars whole, and lines
// after their indentation whole; quotes and dollars that start nothing stay
// in the run (expected values from nix-instantiate 2.8).
TEST(Parser, IndentedStringRunsAroundQuotesDollarsAndIndentation) {
  EXPECT_EQ(evalStrict("''\n    a $b ''${c} '$ x\n      indented ''"),
            R"("a $b \${c} '$ x\n  indented ")");
  EXPECT_EQ(evalStrict("''' ''' '''' ''\\t tab''\\n\n   \n  less\n    end  \n  ''"),
            R"("' '' ''' \t tab\n\n   \n  less\n    end  \n")");
  EXPECT_EQ(evalStrict("''\n  line one ${\"x\"} rest of line\n    two''$\n  ''"),
            R"("line one x rest of line\n  two$\n")");
  EXPECT_EQ(evalStrict("''a'b$c'd'' "), R"("a'b$c'd")");
  EXPECT_EQ(evalStrict("''  x\n  y''"), R"("x\ny")");
  EXPECT_EQ(evalStrict("''\n\n      " + std::string(300, 'r') + "\n    ''"),
            "\"\\n" + std::string(300, 'r') + "\\n\"");
}

// Space between tokens: runs of blanks, tabs, CR LF, comments of both
// kinds; an unterminated comment is reported where it starts.
TEST(Parser, SpaceRunsCommentsAndWhereAnUnterminatedCommentStarts) {
  EXPECT_EQ(evalStrict("{\n  a =  \t 1; # c\r\n\t b = /* x */ 2;   \n    c = [ 1   2 ]; }"),
            "{ a = 1; b = 2; c = [ 1 2 ]; }");
  EXPECT_EQ(evalStrict("        1 +     # one\n        /**/2"), "3");
  std::string err = evalError("{\n    a = 1;\n      /* never closed\n");
  EXPECT_NE(err.find("unterminated comment"), std::string::npos) << err;
  EXPECT_NE(err.find(":3:7"), std::string::npos) << err;
}

TEST(Parser, StringRunsAroundEscapesCarriageReturnsAndDollars) {
  // Unescaped runs are copied from the source; escapes split them.
  EXPECT_EQ(evalStrict(R"("long run before\tan escape, and a long run after it")"),
            R"("long run before\tan escape, and a long run after it")");
  EXPECT_EQ(evalStrict(R"(let x = "X"; in "ab\"${x}\"cd${x}ef\\")"), R"("ab\"X\"cdXef\\")");
  EXPECT_EQ(evalStrict("\"a\r\nb\rc\""), R"("a\nb\nc")");
  EXPECT_EQ(evalStrict(R"("$" + "a$" + "$$x" + "$\n" + "\$")"), R"("$a$$$x$\n$")");
  EXPECT_EQ(evalStrict(R"("${"a"}" + "")"), R"("a")");
  // Bytes parseString does not stop at are skipped as one run: every byte
  // value but '"', '\\', '$' and CR, between two that it stops at.
  std::string plain;
  for (int i = 1; i < 256; ++i)
    if (i != '"' && i != '\\' && i != '$' && i != '\r') plain += static_cast<char>(i);
  EXPECT_EQ(evalStrict("builtins.stringLength \"\\t" + plain + "$\""),
            std::to_string(plain.size() + 2));
  std::string err = evalError("\n  \"" + plain);
  EXPECT_NE(err.find("unexpected end of file, expecting '\"'"), std::string::npos) << err;
}

// String constants that are list elements share one node per text within
// a file (Parser::shareListLiteral): the lists still hold what was
// written, and selections and interpolations in lists are not shared.
TEST(Parser, ListElementStringsShareNodesAndKeepTheirMeaning) {
  EXPECT_EQ(evalStrict(R"([ "a" "b" "a" [ "b" "a" ] ({ x = "a"; }.x) "${"a"}" "" "" ])"),
            R"([ "a" "b" "a" [ "b" "a" ] "a" "a" "" "" ])");
  EXPECT_EQ(evalStrict(R"(let l = [ "x" "x" ]; in builtins.elemAt l 0 + builtins.elemAt l 1)"),
            R"("xx")");
  EXPECT_EQ(evalStrict(R"(map (s: s + "!") [ "w" "w" "v" ])"), R"([ "w!" "w!" "v!" ])");
}

// A shared list element gives back both its node and the copy of its
// text made just before it: 1,000 copies of a word cost their array
// (8 bytes each) and one node, not 16 bytes of text each as well.
TEST(Parser, SharedListElementsGiveBackTheirText) {
  EvalState st;
  std::string list = thousandInAList("", "\"abcdefghijk\"");
  EXPECT_LT(arenaBytesOfParse(st, list), 1000 * 8 + 1024);
  EXPECT_EQ(evalStrict("builtins.length " + list), "1000");
  EXPECT_EQ(evalStrict(R"(builtins.concatStringsSep "," [ "ab\tc" "ab\tc" "x" "ab\tc" ])"),
            R"("ab\tc,ab\tc,x,ab\tc")");
}

TEST(Parser, ConstantListsAreSharedYetStayThunksUntilForced) {
  EvalState st;
  runWithLargeStack([&] {
    // One literal evaluated twice shares its array; a builtin forcing it
    // gets it too; a list with a non-constant element is made each time.
    Value v;
    st.eval(st.parseExprFromString(R"(
      let f = x: { c = [ "a" 1 ./p ]; d = [ x ]; e = map (s: s) [ "m" "n" ]; };
      in [ (f 1) (f 2) ])",
                                   "/tmp"),
            v);
    st.forceValueDeep(v);
    Value& a = *v.list.elems[0];
    Value& b = *v.list.elems[1];
    auto list = [&](Value& set, const char* name) -> Value& { return *set.attrs->get(st.sym(name)); };
    EXPECT_EQ(list(a, "c").list.elems, list(b, "c").list.elems);
    EXPECT_NE(list(a, "d").list.elems, list(b, "d").list.elems);
    std::ostringstream out;
    printValue(st, out, a);
    EXPECT_EQ(out.str(), R"({ c = [ "a" 1 /tmp/p ]; d = [ 1 ]; e = [ "m" "n" ]; })");
    // Unforced, a constant list prints as Nix prints a thunk.
    Value u;
    st.eval(st.parseExprFromString("{ l = [ 1 2 ]; }", "/tmp"), u);
    std::ostringstream lazy;
    printValue(st, lazy, u);
    EXPECT_EQ(lazy.str(), "{ l = <CODE>; }");
  });
  EXPECT_EQ(evalStrict(R"(builtins.concatStringsSep "," [ "x" "y" ])"), R"("x,y")");
  EXPECT_EQ(evalStrict("builtins.foldl' (acc: x: acc ++ [ x ]) [ 0 ] [ 1 2 ]"), "[ 0 1 2 ]");
  EXPECT_EQ(evalStrict("builtins.elem 2 [ 1 2 ] && !(builtins.elem 3 [ ])"), "true");
  EXPECT_EQ(evalStrict("builtins.removeAttrs { a = 1; b = 2; } [ \"a\" ]"), "{ b = 2; }");
}

TEST(Parser, LargeSetsFindDuplicatesAndNestedPaths) {
  std::string set = "{ ";
  for (int i = 0; i < 300; ++i) set += "a" + std::to_string(i) + ".x = " + std::to_string(i) + "; ";
  EXPECT_EQ(evalStrict(set + "a299.y = 1; }.a299"), "{ x = 299; y = 1; }");
  EXPECT_NE(evalError(set + "a17.x = 0; }").find("attribute 'a17.x' already defined"),
            std::string::npos);
}

TEST(Parser, IndentedStringEscapesDoNotCountAsIndentation) {
  EXPECT_EQ(evalStrict("''\n    x ''\\n y\n    z\n  ''"), R"("x \n y\nz\n")");
}

TEST(Parser, PathsAndUris) {
  EXPECT_EQ(evalStrict("/a/b/../c"), "/a/c");
  EXPECT_EQ(evalStrict("./foo"), "/tmp/foo");
  EXPECT_EQ(evalStrict("let x = \"b\"; in ./a/${x}.nix"), "/tmp/a/b.nix");
  EXPECT_EQ(evalStrict("http://example.org/x?y=1"), R"("http://example.org/x?y=1")");
  EXPECT_EQ(evalStrict("builtins.typeOf a:b"), R"("string")");
}

TEST(Parser, IdentifiersEndWhereNoPathUriOrKeywordContinuesThem) {
  // What follows an identifier decides: '/', '.', '+' make paths, ':' URIs.
  EXPECT_EQ(evalStrict("a/b"), "/tmp/a/b");
  EXPECT_EQ(evalStrict("a.b/c"), "/tmp/a.b/c");
  EXPECT_EQ(evalStrict("a+b/c"), "/tmp/a+b/c");
  EXPECT_NE(evalError("a-b'_c/d").find("undefined variable 'a-b'_c'"), std::string::npos);
  EXPECT_EQ(evalStrict("x+y:z"), R"("x+y:z")");
  EXPECT_EQ(evalStrict("let a = { b = 1; }; in a.b"), "1");
  EXPECT_EQ(evalStrict("let a' = 1; b = 2; in a'+b"), "3");
  EXPECT_EQ(evalStrict("let x = 1; in x==1"), "true");
  EXPECT_EQ(evalStrict("let f = x: x; in f{a=1;}"), "{ a = 1; }");
  EXPECT_EQ(evalStrict("let inherit_ = 1; letx = 2; or_ = 3; in inherit_+letx+or_"), "6");
  EXPECT_EQ(evalStrict("if true then 1 else 2"), "1");
  EXPECT_EQ(evalStrict("{ a = 1; }.b or 5"), "5");
  EXPECT_NE(evalError("let a = 1; in a'").find("undefined variable 'a''"), std::string::npos);
  // After '.' or '+', the whole run of path characters decides (a '/' or
  // ':' right after it), as Nix's longest match does.
  EXPECT_EQ(evalStrict("let a = { b = { c = 1; }; }; in a.b.c"), "1");
  EXPECT_EQ(evalStrict("let a = { b = 1; }; in a.b+1"), "2");
  EXPECT_EQ(evalStrict("let a = { b = 1; }; in [a.b a.b]"), "[ 1 1 ]");
  EXPECT_EQ(evalStrict("let a = { b-c = 1; }; in a.b-c+a.b-c"), "2");
  EXPECT_EQ(evalStrict("a.b.c/d"), "/tmp/a.b.c/d");
  EXPECT_EQ(evalStrict("a+b.c/d"), "/tmp/a+b.c/d");
  EXPECT_EQ(evalStrict("x.y:z"), R"("x.y:z")");
  EXPECT_EQ(evalStrict("x.y+z:w"), R"("x.y+z:w")");
  EXPECT_EQ(evalStrict("let a = { b_c = 1; }; in a.b_c"), "1");
  EXPECT_EQ(evalStrict("a.b_c/d"), "/tmp/a.b_c/d");
  EXPECT_EQ(evalStrict("let a = { b = \"x\"; }; in \"${a.b}\""), R"("x")");
}

TEST(Parser, DuplicateAttributesAreParseErrors) {
  EXPECT_NE(evalError("{ a = 1; a = 2; }").find("attribute 'a' already defined"), std::string::npos);
  EXPECT_NE(evalError("{ a.b = 1; a.b = 2; }").find("already defined"), std::string::npos);
  EXPECT_NE(evalError("let a = 1; a = 2; in a").find("already defined"), std::string::npos);
  EXPECT_EQ(evalStrict("{ a.b = 1; a.c = 2; }"), "{ a = { b = 1; c = 2; }; }");
  EXPECT_EQ(evalStrict("{ a = { b = 1; }; a.c = 2; }"), "{ a = { b = 1; c = 2; }; }");
}

TEST(Parser, DuplicateFormalsAreParseErrors) {
  EXPECT_NE(evalError("{ a, a }: a").find("duplicate formal function argument 'a'"), std::string::npos);
  EXPECT_NE(evalError("{ a }@a: a").find("duplicate formal"), std::string::npos);
}

TEST(Parser, ErrorsShowFileLineColumnAndCaret) {
  std::string e = evalError("let\n  x = 1;\nin x +");
  EXPECT_NE(e.find("syntax error, unexpected end of file"), std::string::npos) << e;
  EXPECT_NE(e.find("«string»:3:7"), std::string::npos) << e;
  EXPECT_NE(e.find("3| in x +"), std::string::npos) << e;
  EXPECT_NE(e.find("^"), std::string::npos) << e;
}

TEST(Parser, UndefinedVariableIsReportedBeforeEvaluation) {
  std::string e = evalError("let x = 1; in y");
  EXPECT_NE(e.find("undefined variable 'y'"), std::string::npos);
  EXPECT_NE(e.find(":1:15"), std::string::npos) << e;
}

TEST(Parser, BadInputDoesNotCrash) {
  for (const char* bad : {"{", "[1 2", "\"abc", "''abc", "/* x", "a.", "{ a = 1 }", "x: ", "1 +* 2",
                          "{ ${ } = 1; }", "let in", "'", "9999999999999999999999", "a/b/", "~/"}) {
    std::string e = evalError(bad);
    EXPECT_FALSE(e.empty()) << bad;
  }
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100000, '(');
  EXPECT_NE(evalError(deep + "1").find("nesting too deep"), std::string::npos);
}

// Fuzz finding: a quote right before the end of input inside an indented
// string made the literal scanner stop without consuming it, so the parser
// appended empty literals forever (out of memory).
TEST(Parser, QuoteAtEndOfIndentedStringIsASyntaxError) {
  for (size_t quotes : {3, 12, 15, 18, 102}) {
    std::string src = "15" + std::string(quotes, '\'');
    std::string e = evalError(src);
    EXPECT_NE(e.find("unexpected end of file"), std::string::npos) << quotes << ": " << e;
  }
  EXPECT_NE(evalError("''a'").find("unexpected end of file"), std::string::npos);
  EXPECT_EQ(evalStrict("''a' ''"), R"("a' ")");
  EXPECT_EQ(evalStrict("''a'$ ''"), R"("a'$ ")");
}

TEST(Positions, ResolveByteOffsetsOfEachSourceToLineAndColumn) {
  PosTable t;
  auto a = std::make_shared<const std::string>("ab\ncd\n\nef");
  auto b = std::make_shared<const std::string>("x\ny");
  uint32_t oa = t.addOrigin("/a.nix", a, false);
  uint32_t ob = t.addOrigin("«string»", b, true);
  auto pos = [&](uint32_t o, size_t off) { return t.base(o) + static_cast<PosIdx>(off); };
  auto at = [&](uint32_t o, size_t off) {
    Pos p = t.get(pos(o, off));
    return std::to_string(p.origin) + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
  };
  EXPECT_EQ(at(oa, 0), std::to_string(oa) + ":1:1");
  EXPECT_EQ(at(oa, 2), std::to_string(oa) + ":1:3");  // the newline itself
  EXPECT_EQ(at(oa, 4), std::to_string(oa) + ":2:2");
  EXPECT_EQ(at(oa, 6), std::to_string(oa) + ":3:1");
  EXPECT_EQ(at(oa, a->size()), std::to_string(oa) + ":4:3");  // end of input
  EXPECT_EQ(at(ob, 0), std::to_string(ob) + ":1:1");
  EXPECT_EQ(at(ob, 2), std::to_string(ob) + ":2:1");
  EXPECT_NE(pos(oa, a->size()), pos(ob, 0));
  EXPECT_EQ(t.origin(oa).text, nullptr);  // not kept
  EXPECT_EQ(*t.origin(ob).text, "x\ny");
  EXPECT_EQ(t.show(pos(ob, 2)), "(string):2:1");
  EXPECT_EQ(t.show(kNoPos), "«none»");
}

TEST(Positions, ErrorsAndCurPosPointAtTheRightLine) {
  EXPECT_EQ(evalStrict("{\n  a = 1;\n  b = __curPos;\n}.b.line"), "3");
  EXPECT_EQ(evalStrict("{\n  a = 1;\n  b = __curPos;\n}.b.column"), "7");
  EXPECT_EQ(evalStrict("(builtins.unsafeGetAttrPos \"b\" {\n a = 1;\n   b = 2; }).column"), "4");
  EXPECT_NE(evalError("let\n  x = 1;\nin\n  y").find("«string»:4:3"), std::string::npos);
}

// The AST keeps positions in 31 bits: the table refuses sources past its
// limit (2 GiB; a small one here) instead of handing out larger indices.
TEST(Positions, SourcesPastTheIndexLimitAreRefused) {
  PosTable t(100);
  auto text = std::make_shared<const std::string>(std::string(60, 'x'));
  uint32_t first = t.addOrigin("/a.nix", text, false);  // indices 1..61
  EXPECT_EQ(t.base(first), 1u);
  try {
    t.addOrigin("/b.nix", text, false);  // would end at 123
    ADD_FAILURE() << "no error";
  } catch (const EvalError& e) {
    EXPECT_NE(std::string(e.what()).find("exceed 2 GiB ('/b.nix')"), std::string::npos) << e.what();
  }
  auto small = std::make_shared<const std::string>(std::string(37, 'y'));
  uint32_t second = t.addOrigin("/c.nix", small, false);  // 62..99: fits
  EXPECT_EQ(t.get(t.base(second) + 37).column, 38u);
  ExprAttrs::AttrDef d{Symbol{1}, kMaxPosIdx, true, nullptr};
  EXPECT_EQ(d.pos, kMaxPosIdx);
  EXPECT_TRUE(d.inherited);
}

// Lines and columns are not narrowed: a file of 70,000 lines whose last
// line is 70,000 bytes long resolves past 65,535 in both.
TEST(Positions, LongFilesResolveLinesAndColumnsPast65535) {
  std::string src = "{\n";
  for (int i = 0; i < 70000; ++i) src += "  a" + std::to_string(i) + " = " + std::to_string(i) + ";\n";
  src += std::string(70000, ' ') + "b = 1; }";
  std::string pos = "let s = " + src + "; p = builtins.unsafeGetAttrPos; in ";
  EXPECT_EQ(evalStrict(pos + "[ (p \"b\" s).line (p \"b\" s).column (p \"a69999\" s).line ]"),
            "[ 70002 70001 70001 ]");
  EXPECT_EQ(evalStrict(pos + "s.a69999 + s.b"), "70000");
}

// Sets grow while they are parsed (nested paths, a set merged into an
// attribute path) and are stored exactly afterwards; large ones are
// indexed for duplicate detection.
TEST(Parser, AttributeSetsBuiltAcrossManyDefinitions) {
  std::string nested = "{ ";
  for (int i = 0; i < 40; ++i) nested += "a.x" + std::to_string(i) + " = " + std::to_string(i) + "; ";
  nested += "a = { y = 1; z.w = 2; }; a.z.v = 3; inherit (builtins) true; }";
  EXPECT_EQ(evalStrict("with " + nested + "; [ (builtins.length (builtins.attrNames a)) a.x39 "
                       "a.y a.z.w a.z.v true ]"),
            "[ 42 39 1 2 3 true ]");
  std::string dup = "{\n";
  for (int i = 0; i < 30; ++i) dup += "x" + std::to_string(i) + " = 1;\n";
  dup += "x7 = 2; }";
  std::string e = evalError(dup);
  EXPECT_NE(e.find("attribute 'x7' already defined at (string):9:1"), std::string::npos) << e;
  EXPECT_NE(e.find("«string»:32:1"), std::string::npos) << e;
  EXPECT_NE(evalError("{ a.b = 1; a = { b = 2; }; }").find("attribute 'b' already defined"),
            std::string::npos);
}

// The literal text between interpolations is kept without a node of its
// own: evaluation, the `+` of a path and `--parse` output are unchanged.
TEST(Parser, InterpolatedStringsAndPathsKeepTheirLiteralText) {
  EXPECT_EQ(evalStrict(R"(let v = "1.2"; n = "p"; in "https://x/${n}/${n}-${v}.tar.gz")"),
            R"("https://x/p/p-1.2.tar.gz")");
  EXPECT_EQ(evalStrict("let d = \"x\"; in ''\n  a ${d}\n    b\n''"), R"("a x\n  b\n")");
  EXPECT_EQ(evalStrict("let d = \"x\"; in ./a/${d}/b.nix"), "/tmp/a/x/b.nix");
  EXPECT_EQ(evalStrict(R"("${"only"}")"), R"("only")");
  EXPECT_NE(evalError(R"(let f = {}; in "a${f}b")").find("cannot coerce a set to a string"),
            std::string::npos);
  EvalState st;
  std::ostringstream out;
  st.parseExprFromString(R"(x: "a${x}b\n")", "/tmp")->show(st.symbols, out);
  EXPECT_EQ(out.str(), R"((x: ("a" + x + "b\n")))");
}

// The compact line table gives what a scan of the text gives, at every
// offset, across anchors and for lines of one to three varint bytes.
TEST(Positions, LineTableMatchesAScanOfTheText) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += std::string((i * 37) % 300, 'x') + "\n";
  text += std::string(20000, 'y') + "\n\nlast";
  Arena arena;
  const uint8_t* table = LineTable::make(text, arena);
  uint32_t line = 1, start = 0;
  for (uint32_t off = 0; off <= text.size(); ++off) {
    if (off > 0 && text[off - 1] == '\n') {
      ++line;
      start = off;
    }
    auto [l, s] = LineTable::find(table, off);
    ASSERT_EQ(l, line) << off;
    ASSERT_EQ(s, start) << off;
  }
  EXPECT_EQ(LineTable::find(LineTable::make("", arena), 0), std::make_pair(1u, 0u));
}

// The lexer's fast paths (identifiers, a select's '.', a lambda's ':')
// must give the token the full longest-match rules give, on any input:
// random runs of the characters where paths, URIs, floats, operators and
// identifiers meet.
TEST(Lexer, FastPathsGiveTheTokensOfTheFullRules) {
  EvalState st;
  std::mt19937 rng(36);
  const std::string alphabet = "ab_'-.+/:0 1e\n~<>=!&|*?@;,{}()[]$";
  auto lexAll = [&](Lexer& lx) {
    std::string out;
    try {
      while (true) {
        Token t = lx.next();
        out += std::to_string(int(t.t)) + "@" + std::to_string(t.start) + "-" +
               std::to_string(t.end) + " ";
        // Strings and interpolated paths are the parser's raw modes.
        if (t.t == Tok::kEof || t.t == Tok::kStrOpen || t.t == Tok::kIndStrOpen ||
            t.t == Tok::kPathStart || t.t == Tok::kHPathStart)
          return out;
      }
    } catch (const ParseError& e) {
      return out + "error: " + e.what();
    }
  };
  size_t dots = 0, colons = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string text(1 + rng() % 20, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    dots += text.find('.') != std::string::npos;
    colons += text.find(':') != std::string::npos;
    auto owned = std::make_shared<const std::string>(text);
    uint32_t origin = st.positions.addOrigin("lexer-test.nix", owned, true);
    Lexer fast(st, *owned, origin), slow(st, *owned, origin);
    fast.setQuiet();
    slow.setQuiet();
    slow.setSlowOnly();
    ASSERT_EQ(lexAll(fast), lexAll(slow)) << "input: '" << text << "'";
  }
  EXPECT_GT(dots, 5000u);
  EXPECT_GT(colons, 5000u);
}

TEST(Lexer, KeywordsAreTheTenOfNixAndNothingElse) {
  const std::pair<const char*, Tok> keywords[] = {
      {"if", Tok::kIf},         {"then", Tok::kThen}, {"else", Tok::kElse},
      {"assert", Tok::kAssert}, {"with", Tok::kWith}, {"let", Tok::kLet},
      {"in", Tok::kIn},         {"rec", Tok::kRec},   {"inherit", Tok::kInherit},
      {"or", Tok::kOrKw}};
  for (auto& [word, tok] : keywords) {
    EXPECT_EQ(keywordToken(word), tok) << word;
    EXPECT_TRUE(isKeyword(word)) << word;
  }
  for (const char* word : {"i", "iff", "is", "on", "lets", "re", "thenx", "Else", "wit",
                           "asserts", "inherits", "inheri", "import", "true", "null", ""})
    EXPECT_EQ(keywordToken(word), Tok::kId) << word;
  EXPECT_EQ(evalStrict("let iff = 1; in_ = 2; or_ = 3; in iff + in_ + or_"), "6");
}

TEST(Lexer, CharacterClassesAreNixs) {
  for (int i = 0; i < 256; ++i) {
    char c = static_cast<char>(i);
    bool alpha = (i >= 'a' && i <= 'z') || (i >= 'A' && i <= 'Z'), digit = i >= '0' && i <= '9';
    EXPECT_EQ(isIdStart(c), alpha || c == '_') << i;
    EXPECT_EQ(isIdChar(c), alpha || digit || c == '_' || c == '\'' || c == '-') << i;
    EXPECT_EQ(isPathChar(c), alpha || digit || c == '.' || c == '_' || c == '-' || c == '+') << i;
  }
}

TEST(Parser, ExprAsFindsExactlyTheTaggedKinds) {
  EvalState st;
  auto parse = [&](const std::string& text) { return st.parseExprFromString(text, "/tmp"); };
  Expr* c = parse("1");
  Expr* a = parse("{ x = 1; }");
  Expr* l = parse("x: x");
  Expr* call = parse("builtins.elem 1 [ 1 2 ]");
  EXPECT_NE(exprAs<ExprConst>(c), nullptr);
  EXPECT_NE(exprAs<ExprAttrs>(a), nullptr);
  EXPECT_NE(exprAs<ExprLambda>(l), nullptr);
  EXPECT_EQ(exprAs<ExprConst>(a), nullptr);
  EXPECT_EQ(exprAs<ExprLambda>(c), nullptr);
  EXPECT_EQ(exprAs<ExprAttrs>(l), nullptr);
  EXPECT_EQ(exprAs<ExprConst>(call), nullptr);
  EXPECT_EQ(exprAs<ExprConst>(nullptr), nullptr);
  auto* app = dynamic_cast<ExprCall*>(call);
  ASSERT_NE(app, nullptr);
  EXPECT_NE(exprAs<ExprConstList>(app->args()[1]), nullptr);
  EXPECT_EQ(exprAs<ExprConstList>(app->args()[0]), nullptr);
  // A lambda bound to a name is named after it (error traces show it).
  auto* set = exprAs<ExprAttrs>(parse("{ f = x: x; }"));
  ASSERT_NE(set, nullptr);
  auto* f = exprAs<ExprLambda>(set->attrs[0].e);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(st.symbols.name(f->name), "f");
}

// Origins are constructed one by one in chunks of raw storage: many of them,
// across chunk boundaries, keep their paths, texts and positions, and the
// table destroys exactly those (a kept text is released with it).
TEST(Positions, OriginsAcrossChunksKeepTheirPathsAndTexts) {
  auto kept = std::make_shared<const std::string>("kept\ntext");
  std::weak_ptr<const std::string> watch = kept;
  {
    PosTable t;
    std::vector<uint32_t> ids;
    for (int i = 0; i < 9000; ++i) {
      auto src = std::make_shared<const std::string>(std::string(i % 7, 'x') + "\ny");
      ids.push_back(t.addOrigin("/f" + std::to_string(i) + ".nix", i == 4500 ? kept : src,
                                i == 4500));
    }
    kept.reset();
    for (int i : {0, 4095, 4096, 4500, 8191, 8192, 8999}) {
      const Origin& o = t.origin(ids[i]);
      EXPECT_EQ(o.path, "/f" + std::to_string(i) + ".nix");
      EXPECT_EQ(t.get(t.base(ids[i]) + o.size).line, 2u) << i;
      EXPECT_EQ(t.show(t.base(ids[i])), "/f" + std::to_string(i) + ".nix:1:1");
    }
    ASSERT_NE(t.origin(ids[4500]).text, nullptr);
    EXPECT_EQ(*t.origin(ids[4500]).text, "kept\ntext");
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired());
}

// A select of one name without `or` keeps the name in its node (no array
// in the arena: 16 bytes less a select); longer paths and defaults keep
// theirs in an array. Every form still evaluates, binds, reports and
// prints as before.
TEST(Parser, OneNameSelectsKeepTheirNameInTheNode) {
  EvalState st;
  std::string list = thousandInAList("s: ", "s.a");
  // Per select: the node (40), its variable (24), the list's slot (8).
  EXPECT_LT(arenaBytesOfParse(st, list), 1000 * (40 + 24 + 8) + 1024);
  EXPECT_EQ(evalStrict(R"(let s = { a = { b = 1; }; c = 2; }; n = "c"; in
      [ s.c s.a.b (s.x or 3) (s.a.x or 4) (s.c or 5) s.${n} (s.${n} or 6) s."c"
        ({ inherit (s) c; }.c) (let { body = 7; }) (s ? c) (s ? a.x) ])"),
            "[ 2 1 3 4 2 2 2 2 2 7 true false ]");
  std::string e = evalError("let s = { a = 1; }; in\n  s.b");
  EXPECT_NE(e.find("attribute 'b' missing"), std::string::npos) << e;
  EXPECT_NE(e.find("«string»:2:3"), std::string::npos) << e;
  EXPECT_NE(evalError("s: s.${y}").find("undefined variable 'y'"),
            std::string::npos);
  std::ostringstream out;
  st.parseExprFromString("s: [ s.a s.a.b (s.c or 1) s.${\"d\"} ]", "/tmp")
      ->show(st.symbols, out);
  EXPECT_EQ(out.str(),
            R"((s: [ ((s).a) ((s).a.b) ((s).c or (1)) ((s)."${"d"}") ]))");
}

// A select of one static name from a variable (`lib.x`, `self.pkg`) is one
// 32-byte node (ExprSelectVar) instead of a select and a variable (64):
// it binds, evaluates, fails and prints as the two did.
TEST(Parser, SelectsOfAVariableAreOneNode) {
  EvalState st;
  std::string list = thousandInAList("s: ", "s.a");
  // Per select: the node (32) and the list's slot (8).
  EXPECT_LT(arenaBytesOfParse(st, list), 1000 * (32 + 8) + 1024);
  EXPECT_EQ(evalStrict(R"(let s = { a = { b = 1; }; c = 2; }; f = x: x.c; in
      [ s.c s.a.b (s.x or 3) (s).c (f s) (with s; a.b) (with { t = s; }; t.c)
        (let l = [ s.z ]; in builtins.length l) ({ inherit (s) c; }.c) ])"),
            "[ 2 1 3 2 2 1 2 1 2 ]");
  std::string e = evalError("let s = { a = 1; }; in\n  s.b");
  EXPECT_NE(e.find("attribute 'b' missing"), std::string::npos) << e;
  EXPECT_NE(e.find("«string»:2:3"), std::string::npos) << e;
  e = evalError("let s = 1; in\n   s.b");
  EXPECT_NE(e.find("value is an integer while a set was expected"), std::string::npos) << e;
  EXPECT_NE(e.find("«string»:2:4"), std::string::npos) << e;
  e = evalError("\n  y.b");
  EXPECT_NE(e.find("undefined variable 'y'"), std::string::npos) << e;
  EXPECT_NE(e.find("«string»:2:3"), std::string::npos) << e;
  e = evalError("with { }; y.b");
  EXPECT_NE(e.find("undefined variable 'y'"), std::string::npos) << e;
  std::ostringstream out;
  st.parseExprFromString("s: [ s.a (s).b s.\"c d\" s.a.b ]", "/tmp")->show(st.symbols, out);
  EXPECT_EQ(out.str(), R"((s: [ ((s).a) ((s).b) ((s)."c d") ((s).a.b) ]))");
}

// A call holds its arguments right after its 24-byte node (a pointer to
// an array apart took 8 bytes more a call); calls evaluate and print as
// before, the legacy `f or` included.
TEST(Parser, CallsHoldTheirArgumentsAfterTheNode) {
  EvalState st;
  std::string calls = thousandInAList("f: ", "(f 1)");
  // Per call: the node (24), its argument's slot (8), the integer (40),
  // the variable `f` (24) and the outer list's slot (8).
  EXPECT_LT(arenaBytesOfParse(st, calls), 1000 * (24 + 8 + 40 + 24 + 8) + 1024);
  EXPECT_EQ(evalStrict(R"(let f = a: b: c: a + b + c; g = x: x; or = 5; in
      [ (f 1 2 3) (g 4) (builtins.add 1 2) ((f 1) 2 3) (g or) (builtins.length [ ]) ])"),
            "[ 6 4 3 6 5 0 ]");
  std::ostringstream out;
  st.parseExprFromString("f: [ (f 1 2) (f (f 3)) ]", "/tmp")->show(st.symbols, out);
  EXPECT_EQ(out.str(), "(f: [ ((f 1 2)) ((f (f 3))) ])");
}

// A list literal of constants holds its elements right after its 24-byte
// node (no list value in it); a builtin that forces it gets one value made
// on first use and kept, also when partly applied.
TEST(Parser, ConstantListsHoldTheirElementsAfterTheNode) {
  EvalState st;
  std::string lists = thousandInAList("", "[ 1 2 ]");
  // Per list: the node (24), its two elements (16), the outer slot (8),
  // and the two integers (40 each).
  EXPECT_LT(arenaBytesOfParse(st, lists), 1000 * (24 + 16 + 8 + 80) + 1024);
  EXPECT_EQ(evalStrict(R"(let r = builtins.replaceStrings [ "a" "b" ] [ "x" "y" ];
      f = s: builtins.replaceStrings [ "a" ] [ "z" ] s; in
      [ (r "abc") (r "bab") (f "aa") (f "ba") (map (x: x + 1) [ 1 2 ])
        (builtins.elem 2 [ 1 2 ]) [ "p" "q" ] (builtins.length [ 1 2 3 ]) ])"),
            R"([ "xyc" "yxy" "zz" "bz" [ 2 3 ] true [ "p" "q" ] 3 ])");
  std::ostringstream out;
  st.parseExprFromString(R"([ 1 "a" ./x ])", "/tmp")->show(st.symbols, out);
  EXPECT_EQ(out.str(), R"([ (1) ("a") (/tmp/x) ])");
}

// A list literal of one element keeps it in the node (no 8-byte array in
// the arena); more are an array, none nothing.
TEST(Parser, OneElementListsKeepItInTheNode) {
  EvalState st;
  std::string lists = thousandInAList("x: ", "[ x ]");
  // Per list: the node (24), its variable (24), the outer list's slot (8).
  EXPECT_LT(arenaBytesOfParse(st, lists), 1000 * (24 + 24 + 8) + 1024);
  EXPECT_EQ(evalStrict(R"(let g = a: a + 1; x = 2; in
      [ [ x ] [ x (g x) ] [ ] [ [ x ] ] (builtins.length [ x ]) (builtins.head [ (g x) ]) ])"),
            "[ [ 2 ] [ 2 3 ] [ ] [ [ 2 ] ] 1 3 ]");
  std::ostringstream out;
  st.parseExprFromString("x: [ [ x ] [ x x ] [ ] ]", "/tmp")
      ->show(st.symbols, out);
  EXPECT_EQ(out.str(), "(x: [ ([ (x) ]) ([ (x) (x) ]) ([ ]) ])");
}

// Evaluator semantics and runtime errors.
#include <gc/gc.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "eval_test_util.h"
#include "kiln/common/file.h"

using namespace kiln::eval;
using namespace kiln::eval::testing;

TEST(Eval, LexicalBindingWinsOverWith) {
  EXPECT_EQ(evalStrict("let x = 1; in with { x = 2; y = 3; }; x + y"), "4");
  EXPECT_EQ(evalStrict("with { x = 1; }; with { x = 2; }; x"), "2");
  EXPECT_EQ(evalStrict("with { x = 1; }; with { y = 2; }; x"), "1");
}

TEST(Eval, LazinessAndThunksForcedOnce) {
  EXPECT_EQ(evalStrict("let x = throw \"no\"; in 1"), "1");
  EXPECT_EQ(evalStrict("builtins.length [ (throw \"no\") ]"), "1");
  EXPECT_EQ(evalStrict("(rec { a = b; b = 2; }).a"), "2");
}

// `{ }` and `rec { }` are the state's one empty set, as Nix's mkAttrs gives
// vEmptySet for no attributes: no 16-byte set each (27,000 of them at
// gen-scopes 10,000, from `callPackage f { }` and `optionalAttrs false`),
// and, as an argument or a binding, no thunk either.
TEST(Eval, EmptySetLiteralsShareTheEmptySet) {
  EvalState st;
  runWithLargeStack([&] {
    for (const char* expr : {"{ }", "rec { }", "(x: x) { }", "let e = { }; in e"}) {
      Value v;
      st.eval(st.parseExprFromString(expr, "/tmp"), v);
      st.forceValue(v, kNoPos);
      ASSERT_EQ(v.type, VType::kAttrs) << expr;
      EXPECT_EQ(v.attrs, st.vEmptyAttrs.attrs) << expr;
    }
  });
  EXPECT_EQ(evalStrict("[ ({ } == { }) ({ } // { a = 1; }) (builtins.attrNames { }) ({ ${\"a\"} = 1; }) ]"),
            "[ true { a = 1; } [ ] { a = 1; } ]");
}

TEST(Eval, InfiniteRecursionIsDetected) {
  EXPECT_NE(evalError("let x = x; in x").find("infinite recursion encountered"), std::string::npos);
  EXPECT_NE(evalError("rec { a = b; b = a; }.a").find("infinite recursion"), std::string::npos);
}

TEST(Eval, UnboundedRecursionHitsTheCallDepthLimit) {
  EvalSettings s;
  s.maxCallDepth = 2000;
  std::string e = evalError("let f = x: f (x + 1); in f 0", s);
  EXPECT_NE(e.find("max-call-depth exceeded"), std::string::npos) << e;
}

TEST(Eval, TypeErrorsNameTheTypes) {
  EXPECT_NE(evalError("1 + \"a\"").find("cannot add a string to an integer"), std::string::npos);
  EXPECT_NE(evalError("if 1 then 2 else 3").find("value is an integer while a Boolean was expected"),
            std::string::npos);
  EXPECT_NE(evalError("1 2").find("attempt to call something which is not a function but an integer"),
            std::string::npos);
}

TEST(Eval, MissingAttributeShowsPosition) {
  std::string e = evalError("{ a = 1; }.b");
  EXPECT_NE(e.find("attribute 'b' missing"), std::string::npos);
  EXPECT_NE(e.find("«string»:1:1"), std::string::npos) << e;
}

TEST(Eval, ThrowAbortAssertAndTryEval) {
  EXPECT_EQ(evalError("throw \"boom\""), "boom");
  EXPECT_NE(evalError("abort \"x\"").find("evaluation aborted"), std::string::npos);
  EXPECT_NE(evalError("assert 1 == 2; 3").find("assertion '(1 == 2)' failed"), std::string::npos);
  EXPECT_EQ(evalStrict("builtins.tryEval (throw \"x\")"), "{ success = false; value = false; }");
  EXPECT_EQ(evalStrict("builtins.tryEval (assert false; 1)"), "{ success = false; value = false; }");
  EXPECT_EQ(evalStrict("builtins.tryEval 1"), "{ success = true; value = 1; }");
  EXPECT_NE(evalError("builtins.tryEval (abort \"x\")").find("aborted"), std::string::npos);
}

TEST(Eval, FunctionsFormalsAndFunctors) {
  EXPECT_EQ(evalStrict("({ a, b ? a + 1, ... }@args: [ a b (args ? c) ]) { a = 1; c = 0; }"),
            "[ 1 2 true ]");
  EXPECT_NE(evalError("({ a }: a) { b = 1; }").find("called without required argument 'a'"),
            std::string::npos);
  EXPECT_NE(evalError("({ a }: a) { a = 1; b = 1; }").find("unexpected argument 'b'"), std::string::npos);
  EXPECT_EQ(evalStrict("let f = { __functor = self: x: x + self.n; n = 10; }; in f 5"), "15");
  EXPECT_EQ(evalStrict("builtins.map (builtins.add 1) [ 1 2 ]"), "[ 2 3 ]");
}

TEST(Eval, PrinterMatchesNix) {
  EXPECT_EQ(evalStrict("[ 1.5 3.0 1.0e30 0.1 123456789.0 ]"), "[ 1.5 3 1e+30 0.1 1.23457e+08 ]");
  EXPECT_EQ(evalStrict("{ \"a b\" = 1; \"if\" = 2; a-b = 3; }"), "{ \"a b\" = 1; a-b = 3; \"if\" = 2; }");
  EXPECT_EQ(evalStrict("let x = [ 1 ]; in [ x x { a = x; } ]"), "[ [ 1 ] «repeated» { a = «repeated»; } ]");
  EXPECT_EQ(evalStrict("[ (x: x) builtins.map (builtins.map (x: x)) null ]"),
            "[ <LAMBDA> <PRIMOP> <PRIMOP-APP> null ]");
}

TEST(Eval, DerivationsMatchNix) {
  // Output of nix-instantiate 2.8 for the same expression.
  EXPECT_EQ(evalStrict("(derivation { name = \"a\"; builder = \"b\"; system = \"c\"; }).drvPath"),
            "\"/nix/store/arhvjaf6zmlyn8vh8fgn55rpwnxq0n7l-a.drv\"");
  EXPECT_EQ(evalStrict("(derivation { name = \"a\"; builder = \"b\"; system = \"c\"; }).outPath"),
            "\"/nix/store/s6glliw064sgl7vix22p91cxsx7ml1rf-a\"");
  EXPECT_NE(evalError("derivation { name = \"a\"; system = \"c\"; }").find("required attribute 'builder' missing"),
            std::string::npos);
}

// `derivation` is built natively; it must give what Nix's derivation.nix
// gives (outputs checked against nix-instantiate 2.8).
TEST(Eval, DerivationWrapperShapeAndLaziness) {
  const std::string d =
      "derivation { name = \"x\"; system = \"s\"; builder = \"b\"; outputs = [\"dev\" \"out\"]; ";
  EXPECT_EQ(evalStrict("with " + d + "}; [outputName out.outputName dev.outputName (builtins.length all)"
                       " drvAttrs.name type (builtins.attrNames dev) (out.drvPath == drvPath)]"),
            "[ \"dev\" \"out\" \"dev\" 2 \"x\" \"derivation\" [ \"all\" \"builder\" \"dev\" \"drvAttrs\" "
            "\"drvPath\" \"name\" \"out\" \"outPath\" \"outputName\" \"outputs\" \"system\" \"type\" ] true ]");
  // The output attributes and type win over attributes of the same name.
  EXPECT_EQ(evalStrict("(" + d + "type = 1; out = 2; outputName = 3; }).out.outputName"), "\"out\"");
  EXPECT_EQ(evalStrict("(" + d + "type = 1; }).type"), "\"derivation\"");
  // derivationStrict is not forced by looking at the attributes.
  EXPECT_EQ(evalStrict("(derivation { name = \"x\"; extra = 1; }).extra"), "1");
  EXPECT_NE(evalError("(derivation { name = \"x\"; }).outPath").find("required attribute 'builder' missing"),
            std::string::npos);
  // But the attribute set, outputs and output names are (as by the wrapper).
  EXPECT_NE(evalError("(derivation 1).x").find("while a set was expected"), std::string::npos);
  EXPECT_NE(evalError("(derivation { outputs = [ 1 ]; }).x").find("while a string was expected"),
            std::string::npos);
  EXPECT_NE(evalError("(derivation { outputs = []; }).x").find("out of bounds"), std::string::npos);
}

TEST(Eval, DrvPathContextsTakeTheClosure) {
  // "=" contexts (a .drv path in a string) pull in the whole closure of a
  // derivation made earlier, through two levels; values from nix-instantiate 2.8.
  EXPECT_EQ(evalStrict("let a = derivation { name = \"a\"; builder = \"b\"; system = \"c\"; outputs = [\"out\" \"dev\"]; };"
                       " b = derivation { name = \"b\"; builder = \"b\"; system = \"c\"; x = a.drvPath; };"
                       " c = derivation { name = \"c\"; builder = \"b\"; system = \"c\"; y = b.drvPath; };"
                       " in [ b.drvPath c.drvPath c.outPath ]"),
            "[ \"/nix/store/rxcq0i5yqkhxhjf6wv5z1jfynan03a2x-b.drv\" \"/nix/store/sb9x8i5k8im9ngmipyl4ln326qrgw3i5-c.drv\""
            " \"/nix/store/avfbd7zryvjm0d1ml73r77s7zxjqhqn2-c\" ]");
}

TEST(Eval, ErrorsInLargeFilesStillShowTheSourceLine) {
  // Files are not kept after parsing; the snippet is read from the file
  // again, large or small.
  kiln::TempDir dir;
  std::string file = dir.path() + "/big.nix";
  std::ofstream(file) << "# " << std::string(2 << 20, 'x') << "\nlet a = 1; in\n  a + \"s\"\n";
  std::string e = evalError("import " + file);
  EXPECT_NE(e.find(file + ":3:"), std::string::npos) << e;
  EXPECT_NE(e.find("a + \"s\""), std::string::npos) << e;
  std::string small = dir.path() + "/small.nix";
  std::ofstream(small) << "let a = 1; in\n  a + \"s\"\n";
  e = evalError("import " + small);
  EXPECT_NE(e.find(small + ":2:"), std::string::npos) << e;
  EXPECT_NE(e.find("2|   a + \"s\""), std::string::npos) << e;
}

TEST(Eval, MissingFilesAndCyclicImports) {
  EXPECT_NE(evalError("import /nonexistent/file.nix").find("/nonexistent/file.nix"), std::string::npos);
  kiln::TempDir dir;
  std::string a = dir.path() + "/a.nix";
  std::ofstream(a) << "import ./b.nix\n";
  std::ofstream(dir.path() + "/b.nix") << "import ./a.nix\n";
  std::string e = evalError("import " + a);
  EXPECT_NE(e.find("infinite recursion"), std::string::npos) << e;
}

TEST(Eval, StringContextAndSources) {
  EXPECT_EQ(evalStrict("builtins.hasContext (toString (derivation { name = \"a\"; builder = \"b\"; system = \"c\"; }))"),
            "true");
  EXPECT_EQ(evalStrict("builtins.toFile \"t.txt\" \"hello\""), "\"/nix/store/9p0nl625gm5mli8h2xfsgma0zz31g9yc-t.txt\"");
}

TEST(Eval, DependentDerivationsMatchNix) {
  // A multi-output input used through two outputs; values from nix-instantiate 2.8.
  EXPECT_EQ(evalStrict("let a = derivation { name = \"a\"; builder = \"b\"; system = \"c\"; outputs = [\"out\" \"dev\"]; };"
                       " b = derivation { name = \"b\"; builder = \"b\"; system = \"c\"; x = a.dev; y = \"${a}\"; };"
                       " in [ b.drvPath b.outPath ]"),
            "[ \"/nix/store/8jdz9f1gayrijzng7y063rba2f4nm5cs-b.drv\" \"/nix/store/bvn7nyjmbg16akg27akx87cbwfq07vvl-b\" ]");
}

// Fixed-output inputs (flat and recursive): the input's hash modulo is
// taken from the output path fillOutputs just set. Values from
// nix-instantiate 2.8.
TEST(Eval, DerivationsOnFixedOutputsMatchNix) {
  EXPECT_EQ(evalStrict("let a = derivation { name = \"a\"; builder = \"b\"; system = \"c\"; outputHash = \"" +
                       std::string(64, '0') + "\"; outputHashAlgo = \"sha256\"; };"
                       " r = derivation { name = \"r\"; builder = \"b\"; system = \"c\"; outputHashMode = \"recursive\";"
                       " outputHash = \"sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=\"; };"
                       " b = derivation { name = \"b\"; builder = \"b\"; system = \"c\"; x = a; y = r; };"
                       " in [ a.outPath b.drvPath b.outPath ]"),
            "[ \"/nix/store/19k94y693b5mi3rbb0f3y9c4zq1jc3z0-a\" \"/nix/store/pwfzzwfnhbihvdby59x918h11qrvb7i8-b.drv\""
            " \"/nix/store/5fqhgaj70q6483xhs3vkk2gxgyn7bi6g-b\" ]");
}

// derivationStrict splits a string `outputs` at Nix's separators (space,
// tab, newline, carriage return) only: a '\v' stays in the name, which
// then makes an invalid store path, as in nix-instantiate 2.8.
TEST(Eval, DerivationStrictSplitsOutputsAtNixSeparatorsOnly) {
  const std::string d = "builtins.derivationStrict { name = \"x\"; system = \"s\"; builder = \"/b\"; outputs = ";
  EXPECT_EQ(evalStrict("builtins.attrNames (" + d + "\" out \\t dev\\n\\r\"; })"),
            "[ \"dev\" \"drvPath\" \"out\" ]");
  EXPECT_NE(evalError("builtins.attrNames (" + d + "\"out\vdev\"; })").find("x-out\vdev"), std::string::npos)
      << evalError("builtins.attrNames (" + d + "\"out\vdev\"; })");
}

// String values carry their length (Value::strLen) and literal string parts
// theirs (StringPart::textLen, with strlen again from 65535 bytes on): the
// lengths at and around that bound, comparisons and equality of strings
// one a prefix of the other, and strings made by every kind of builtin.
TEST(Eval, StringLengthsAreKeptAcrossTheTextLengthBound) {
  for (size_t n : {0, 1, 65534, 65535, 65536, 70000}) {
    std::string lit(n, 'x');
    EXPECT_EQ(evalStrict("let y = \"y\"; in builtins.stringLength \"${y}" + lit + "${y}\""),
              std::to_string(n + 2));
    EXPECT_EQ(evalStrict("builtins.stringLength \"" + lit + "\""), std::to_string(n));
    EXPECT_EQ(evalStrict("builtins.stringLength ''" + lit + "''"), std::to_string(n));
  }
  EXPECT_EQ(evalStrict(R"([ ("ab" < "abc") ("abc" < "ab") ("ab" == "abc") ("a${"b"}" == "ab") ])"),
            "[ true false false true ]");
  EXPECT_EQ(evalStrict(R"(builtins.sort builtins.lessThan [ "abc" "ab" "a" "" "b" ])"),
            R"([ "" "a" "ab" "abc" "b" ])");
  EXPECT_EQ(evalStrict(R"(map builtins.stringLength [ (builtins.concatStringsSep "," [ "a" "bc" ])
      (builtins.replaceStrings [ "a" ] [ "xyz" ] "aba") (builtins.toJSON { a = 1; })
      (builtins.head (builtins.attrNames { abc = 1; })) (toString 12345) (builtins.substring 1 2 "abcd") ])"),
            "[ 4 7 7 3 5 2 ]");
}

// Interpolation, `+` and concatStringsSep reuse a lone part's context and
// merge several (expected values from nix-instantiate 2.8).
TEST(Eval, ConcatenatedStringsKeepTheUnionOfTheirPartsContexts) {
  std::string lets =
      "let a = derivation { name = \"a\"; system = \"x\"; builder = \"/b\"; };"
      "  b = derivation { name = \"b\"; system = \"x\"; builder = \"/b\"; outputs = [ \"out\" \"dev\" ]; };"
      "  ctx = s: builtins.attrNames (builtins.getContext s); in ";
  std::string a = "\"/nix/store/zls09i4hh0vfzm882j1ry186i11233w6-a.drv\"";
  std::string b = "\"/nix/store/b5cw71g39ybvvsazfc7h0vlcx4xsjcd1-b.drv\"";
  EXPECT_EQ(evalStrict(lets + "ctx \"x${a}y\""), "[ " + a + " ]");
  EXPECT_EQ(evalStrict(lets + "ctx \"${a}${b}${a}\""), "[ " + b + " " + a + " ]");
  EXPECT_EQ(evalStrict(lets + "ctx (builtins.concatStringsSep \"${b.dev}\" [ \"1\" a \"2\" ])"),
            "[ " + b + " " + a + " ]");
  EXPECT_EQ(evalStrict(lets + "ctx (builtins.concatStringsSep \" \" [ a a ])"), "[ " + a + " ]");
  EXPECT_EQ(evalStrict(lets + "ctx (\"${a.drvPath}\" + \"${b}\")"), "[ " + b + " " + a + " ]");
  EXPECT_EQ(evalStrict(lets + "builtins.getContext \"${b.dev}${b.dev}\""),
            "{ " + b + " = { outputs = [ \"dev\" ]; }; }");
  EXPECT_EQ(evalStrict(lets + "builtins.hasContext \"${\"x\"}${toString 1}\""), "false");
}

namespace {
// A constructor, not an aggregate: clang 14 has no parenthesised aggregate
// initialisation (what Arena::make's T(args...) would need).
struct CountsDestruction {
  explicit CountsDestruction(int* d) : destroyed(d) {}
  int* destroyed;
  ~CountsDestruction() { ++*destroyed; }
};
}  // namespace

TEST(Arena, RunsDestructorsUnlessLeftToExit) {
  int destroyed = 0;
  {
    Arena a;
    a.make<CountsDestruction>(&destroyed);
    a.make<CountsDestruction>(&destroyed);
  }
  EXPECT_EQ(destroyed, 2);
  destroyed = 0;
  {
    Arena a;
    a.make<CountsDestruction>(&destroyed);  // made before: still destroyed
    a.leaveToExit();
    CountsDestruction* kept = a.make<CountsDestruction>(&destroyed);
    EXPECT_EQ(kept->destroyed, &destroyed);
  }
  EXPECT_EQ(destroyed, 1);
}

// A scanned arena's chunk starts zeroed without being made resident: only
// the pages its objects use count in the process's RSS (the permanent arena
// used to clear its whole 4 MiB chunk at start).
TEST(Arena, ScannedChunkIsZeroAndResidentOnlyWhereUsed) {
  Arena a(true);
  auto* words = static_cast<uint64_t*>(a.allocate(64 * sizeof(uint64_t), 8));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(words[i], 0u);
  words[0] = 1;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto start = reinterpret_cast<uintptr_t>(words) & ~(page - 1);
  const size_t span = size_t{128} << 10;  // inside the first chunk (256 KiB)
  std::vector<unsigned char> resident(span / page);
  ASSERT_EQ(mincore(reinterpret_cast<void*>(start), span, resident.data()), 0);
  size_t pages = 0;
  for (unsigned char r : resident) pages += r & 1;
  EXPECT_GE(pages, 1u);
  EXPECT_LT(pages, resident.size() / 4);
}

// A scanned arena's chunks are root ranges, counted whole in the roots
// libgc sizes its allowance between collections by: the first is 256 KiB
// and each next one doubles up to 4 MiB (the permanent arena of a package
// set uses a few hundred KiB; it took a 4 MiB chunk). What its words point
// to stays alive in any chunk.
TEST(Arena, ScannedChunksStartSmallAndDouble) {
  Arena a(true);
  auto** first = static_cast<void**>(a.allocate(sizeof(void*), 8));
  EXPECT_EQ(a.bytesReserved(), size_t{256} << 10);
  void** last = first;
  for (int i = 0; i < 12 * 1024; ++i) last = static_cast<void**>(a.allocate(1024, 8));
  // 12 MiB in chunks of 256 KiB, 512 KiB, 1, 2, 4 and 4 MiB, then one more.
  EXPECT_EQ(a.bytesReserved(), (size_t{256} << 10) + (size_t{512} << 10) + (size_t{11} << 20) +
                                   (size_t{4} << 20));
  // Kept only from the arena's last chunk (the link, in memory the
  // collector does not scan, is cleared if the object is collected).
  auto** link = static_cast<void**>(std::malloc(sizeof(void*)));
  void* obj = GC_MALLOC(64);
  *first = obj;
  *last = obj;
  *link = obj;
  GC_GENERAL_REGISTER_DISAPPEARING_LINK(link, obj);
  obj = nullptr;
  *first = nullptr;
  GC_gcollect();
  EXPECT_NE(*link, nullptr);
  EXPECT_EQ(*last, *link);
  GC_unregister_disappearing_link(link);
  std::free(link);
}

// Semantics of the builtins whose algorithms changed for issue 12 (costs are
// measured by bench/builtin_complexity.sh, not here).
#include <gtest/gtest.h>

#include "eval_test_util.h"

namespace kiln::eval {
namespace {

using testing::evalError;
using testing::evalStrict;

// A set of `n` attributes a0 .. a(n-1), each worth its index.
std::string bigSet(int n) {
  return "(builtins.listToAttrs (builtins.genList (i: { name = \"a${toString i}\"; value = i; }) " +
         std::to_string(n) + "))";
}

TEST(Builtins, IntersectAttrsTakesValuesFromTheSecondSetWhicheverIsSmaller) {
  // Small names, big values (callPackage's case) and the other way round.
  EXPECT_EQ(evalStrict("builtins.intersectAttrs { a3 = 0; a700 = 0; zz = 0; } " + bigSet(1000)),
            "{ a3 = 3; a700 = 700; }");
  EXPECT_EQ(evalStrict("builtins.intersectAttrs " + bigSet(1000) + " { a3 = 0; a700 = 0; zz = 0; }"),
            "{ a3 = 0; a700 = 0; }");
  EXPECT_EQ(evalStrict("builtins.intersectAttrs { } " + bigSet(10)), "{ }");
  EXPECT_EQ(evalStrict("builtins.intersectAttrs " + bigSet(10) + " { }"), "{ }");
  EXPECT_EQ(evalStrict("builtins.intersectAttrs { x = 1; y = 2; } { y = 3; z = 4; }"), "{ y = 3; }");
  // The result is a set like any other: lookups, updates and equality.
  EXPECT_EQ(evalStrict("let s = builtins.intersectAttrs { a5 = 0; a9 = 0; a2 = 0; } " + bigSet(20) +
                       "; in [ s.a2 s.a9 (s ? a3) (s // { a1 = 1; }) (s == { a2 = 2; a5 = 5; a9 = 9; }) ]"),
            "[ 2 9 false { a1 = 1; a2 = 2; a5 = 5; a9 = 9; } true ]");
  // Values are not forced.
  EXPECT_EQ(evalStrict("builtins.attrNames (builtins.intersectAttrs { a = 1; } { a = throw \"no\"; })"),
            "[ \"a\" ]");
  EXPECT_NE(evalError("builtins.intersectAttrs 1 { }").find("while a set was expected"), std::string::npos);
}

}  // namespace
}  // namespace kiln::eval

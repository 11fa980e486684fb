// builtins.toJSON and builtins.fromJSON against Nix 2.8: the expected
// values are nix-instantiate 2.8's (`--eval --strict`), byte for byte.
// fromJSON parses straight into values (json_parse.cc) and falls back to
// nlohmann for errors, whose messages Nix 2.8 prints.
#include <gtest/gtest.h>

#include <string>

#include "eval_test_util.h"
#include "json_parse.h"
#include "kiln/common/encoding.h"

namespace kiln::eval {
namespace {

using testing::evalError;
using testing::evalStrict;

TEST(Json, ToJsonEscapesControlBytesAsNix) {
  EXPECT_EQ(evalStrict("builtins.toJSON (builtins.fromJSON "
                       "\"\\\"a\\\\b\\\\f\\\\u0001\\\\u001f\\\\u007f\\\\u00e9\\\\u2028\\\\ud"
                       "83d\\\\ude00 \\\\\\\" \\\\\\\\ / \\\\n\\\\r\\\\t\\\"\")"),
            "\"\\\"a\\\\u0008\\\\u000c\\\\u0001\\\\u001f\177\303\251\342\200\250\360"
            "\237\230\200 \\\\\\\" \\\\\\\\ / \\\\n\\\\r\\\\t\\\"\"");
}

TEST(Json, ToJsonNumbersAsNix) {
  EXPECT_EQ(evalStrict("builtins.toJSON [ 1.0 0.1 1.0e20 1.5e-7 123456789.123 (-5) 0 "
                       "(1.0 / 3) 1.0e6 1.0e7 100000.0 (-9223372036854775807) ]"),
            "\"[1,0.1,1e+20,1.5e-07,1.23457e+08,-5,0,0.333333,1e+06,1e+07,100000,-"
            "9223372036854775807]\"");
}

TEST(Json, ToJsonNestedSetsAndListsInNameOrder) {
  EXPECT_EQ(evalStrict("builtins.toJSON { b = 1; a = [ true false null [ ] { } ]; "
                       "\"\303\251\" = \"x\"; \"\" = 2; c = { d = { e = \"f\"; }; }; }"),
            "\"{\\\"\\\":2,\\\"a\\\":[true,false,null,[],{}],\\\"b\\\":1,\\\"c\\\":{"
            "\\\"d\\\":{\\\"e\\\":\\\"f\\\"}},\\\"\303\251\\\":\\\"x\\\"}\"");
}

TEST(Json, ToJsonOutPathAndToString) {
  EXPECT_EQ(evalStrict("builtins.toJSON { x = { outPath = \"/nix/store/abc\"; y = 1; }; s = "
                       "{ __toString = self: \"str${toString self.n}\"; n = 3; }; }"),
            "\"{\\\"s\\\":\\\"str3\\\",\\\"x\\\":\\\"/nix/store/abc\\\"}\"");
}

TEST(Json, ToJsonPlainRun) {
  EXPECT_EQ(evalStrict("builtins.toJSON \"\\u00e9 plain ascii and a long run "
                       "without escapes at all 0123456789\""),
            "\"\\\"u00e9 plain ascii and a long run without escapes at all "
            "0123456789\\\"\"");
}

TEST(Json, FromJsonDuplicateKeysLastWins) {
  EXPECT_EQ(evalStrict("builtins.fromJSON "
                       "''{\"a\":1,\"a\":2,\"b\":{\"x\":1},\"c\":[1,2,{\"d\":"
                       "null}],\"b\":3}''"),
            "{ a = 2; b = 3; c = [ 1 2 { d = null; } ]; }");
}

TEST(Json, FromJsonNumbersIntOrFloatAsNix) {
  EXPECT_EQ(evalStrict("builtins.fromJSON "
                       "''[1,-1,0,-0,1.0,-0.0,1e2,1E2,1e-2,1.5e+3,123456789012345678,"
                       "9223372036854775807,9223372036854775808,18446744073709551615,"
                       "18446744073709551616,-9223372036854775808,-"
                       "9223372036854775809,0.1,1e-400,2.5e-308,-12.50e001]''"),
            "[ 1 -1 0 0 1 -0 100 100 0.01 1500 123456789012345678 "
            "9223372036854775807 -9223372036854775808 -1 1.84467e+19 "
            "-9223372036854775808 -9.22337e+18 0.1 0 2.5e-308 -125 ]");
}

TEST(Json, FromJsonStringEscapesAndUnicode) {
  EXPECT_EQ(evalStrict("builtins.fromJSON "
                       "''\"\\u00e9\\u20ac\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\\"\\\\ "
                       "\\u0041\\u004a\\u004A \303\251\360\237\230\200\"''"),
            "\"\303\251\342\202\254\360\237\230\200/\010\014\\n\\r\\t\\\"\\\\ AJJ "
            "\303\251\360\237\230\200\"");
}

TEST(Json, FromJsonWhitespaceAndEmptyContainers) {
  EXPECT_EQ(evalStrict("builtins.fromJSON ''  [ 1 , { \"k\" : [ ] , \"l\" : { "
                       "} } ,\"x\", true, false, null ]  ''"),
            "[ 1 { k = [ ]; l = { }; } \"x\" true false null ]");
}

TEST(Json, FromJsonNulEndsTheString) {
  EXPECT_EQ(evalStrict("builtins.fromJSON ''\"a\\u0000b\"''"), "\"a\"");
}

TEST(Json, FromJsonManyKeysSorted) {
  EXPECT_EQ(evalStrict("builtins.attrNames (builtins.fromJSON "
                       "''{\"z\":1,\"y\":2,\"x\":3,\"w\":4,\"v\":5,\"u\":6,\"t\":7,\"s\":8,"
                       "\"r\":9,\"q\":10,\"p\":11,\"o\":12,\"n\":13,\"m\":14,\"l\":15,\"k\":"
                       "16,\"j\":17,\"i\":18,\"h\":19,\"g\":20,\"f\":21,\"e\":22,\"d\":23,"
                       "\"c\":24,\"b\":25,\"a\":26,\"aa\":27,\"ab\":28,\"ac\":29,\"ad\":30,"
                       "\"ae\":31,\"af\":32,\"ag\":33,\"ah\":34}'')"),
            "[ \"a\" \"aa\" \"ab\" \"ac\" \"ad\" \"ae\" \"af\" \"ag\" \"ah\" \"b\" "
            "\"c\" \"d\" \"e\" \"f\" \"g\" \"h\" \"i\" \"j\" \"k\" \"l\" \"m\" \"n\" "
            "\"o\" \"p\" \"q\" \"r\" \"s\" \"t\" \"u\" \"v\" \"w\" \"x\" \"y\" \"z\" "
            "]");
}

TEST(Json, FromJsonLongList) {
  EXPECT_EQ(evalStrict("builtins.length (builtins.fromJSON (\"[\" + "
                       "builtins.concatStringsSep \",\" (builtins.genList "
                       "toString 1000) + \"]\"))"),
            "1000");
}

TEST(Json, JsonStringEscapesEveryControlByteAndPassesTheRest) {
  std::string all;
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  std::string out;
  appendJsonString(out, all);
  std::string want = "\"";
  for (int c = 1; c < 256; ++c) {
    char buf[8];
    if (c == '"')
      want += "\\\"";
    else if (c == '\\')
      want += "\\\\";
    else if (c == '\n')
      want += "\\n";
    else if (c == '\r')
      want += "\\r";
    else if (c == '\t')
      want += "\\t";
    else if (c < 0x20)
      want += (std::snprintf(buf, sizeof buf, "\\u%04x", c), buf);
    else
      want += static_cast<char>(c);
  }
  want += '"';
  EXPECT_EQ(out, want);
  out = "x";
  appendJsonString(out, "");
  EXPECT_EQ(out, "x\"\"");
}

// Invalid input gets nlohmann's message, as in Nix 2.8 (kiln prefixes it).
TEST(Json, FromJsonErrorsAreNlohmannsAsNix) {
  auto err = [](const std::string& json) {
    return evalError("builtins.fromJSON ''" + json + "''");
  };
  auto has = [](const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(err("[1,]"),
                  "[json.exception.parse_error.101] parse error at line 1, column 4: "
                  "syntax error while parsing value - unexpected ']'; expected '[', "
                  "'{', or a literal"));
  EXPECT_TRUE(has(err("{\"a\":1,}"),
                  "column 8: syntax error while parsing object key - "
                  "unexpected '}'; expected string literal"));
  EXPECT_TRUE(has(err("[01]"),
                  "column 3: syntax error while parsing array - unexpected number "
                  "literal; expected ']'"));
  EXPECT_TRUE(
      has(err("1e400"), "[json.exception.out_of_range.406] number overflow parsing '1e400'"));
  EXPECT_TRUE(has(err("\"\\ud800\\u0041\""),
                  "surrogate U+D800..U+DBFF must be followed by "
                  "U+DC00..U+DFFF"));
  EXPECT_TRUE(has(err("\"\\udc00\""), "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"));
  EXPECT_TRUE(has(err("\"\\x\""), "forbidden character after backslash"));
  EXPECT_TRUE(has(err("\"\t\""), "control character U+0009 (HT) must be escaped"));
  EXPECT_TRUE(has(err("\"\\u00\""), "'\\u' must be followed by 4 hex digits"));
  EXPECT_TRUE(has(err("tru"), "invalid literal; last read: 'tru'"));
  EXPECT_TRUE(has(err("[1] // c"), "expected end of input"));
  EXPECT_TRUE(has(err(""), "unexpected end of input"));
  EXPECT_TRUE(has(err("\"\xff\""), "invalid string: ill-formed UTF-8 byte"));
  EXPECT_TRUE(has(err("\"\xed\xa0\x80\""), "invalid string: ill-formed UTF-8 byte"));
  EXPECT_TRUE(has(err("\"\xf4\x90\x80\x80\""), "invalid string: ill-formed UTF-8 byte"));
}

// What the direct parser takes on itself and what it leaves to nlohmann.
TEST(Json, DirectParserAcceptsExactlyValidJsonWithoutByteOrderMark) {
  EvalState st;
  Value v;
  for (const char* ok : {"1", " [ ] ", "{}", "\"\\u00e9\xc3\xa9\xf0\x9f\x98\x80\"", "-0.5e-3",
                         "{\"a\":[1,{\"b\":null}],\"a\":true}", "18446744073709551616"})
    EXPECT_TRUE(parseJsonFast(st, ok, v)) << ok;
  for (const char* bad : {"",
                          "[1,]",
                          "01",
                          "1.",
                          "-",
                          "1e",
                          "+1",
                          "[1 2]",
                          "{\"a\" 1}",
                          "{1:2}",
                          "nul",
                          "[1]]",
                          "1e400",
                          "-1e400",
                          "\"\\ud800\"",
                          "\"\xc3\"",
                          "\"\xc0\xaf\"",
                          "\"\x01\"",
                          "\xef\xbb\xbf[1]",
                          "[1] x"})
    EXPECT_FALSE(parseJsonFast(st, bad, v)) << bad;
}

TEST(Json, FromJsonByteOrderMarkAndDeepNesting) {
  EXPECT_EQ(evalStrict("builtins.fromJSON \"\xef\xbb\xbf[1]\""), "[ 1 ]");
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  EXPECT_EQ(evalStrict("builtins.isList (builtins.fromJSON \"" + deep + "\")"), "true");
}

}  // namespace
}  // namespace kiln::eval

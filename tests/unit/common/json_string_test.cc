// appendJsonString: Nix 2.8's JSON string literals (toJSON, show-derivation).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "kiln/common/encoding.h"

namespace kiln {
namespace {

// Every byte value, against escaping one byte at a time as Nix 2.8's
// toJSON does (\b and \f as \u0008 and \u000c; DEL and bytes >= 0x80 raw).
TEST(JsonString, EveryByteAsNix) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  std::string out = "prefix";
  appendJsonString(out, all);
  std::string want = "prefix\"";
  for (int c = 0; c < 256; ++c) {
    char buf[8];
    if (c == '"') want += "\\\"";
    else if (c == '\\') want += "\\\\";
    else if (c == '\n') want += "\\n";
    else if (c == '\r') want += "\\r";
    else if (c == '\t') want += "\\t";
    else if (c < 0x20) want += (std::snprintf(buf, sizeof buf, "\\u%04x", c), buf);
    else want += static_cast<char>(c);
  }
  EXPECT_EQ(out, want + "\"");
}

TEST(JsonString, EmptyRunsAndEscapesAtBothEnds) {
  std::string out;
  appendJsonString(out, "");
  EXPECT_EQ(out, "\"\"");
  out.clear();
  appendJsonString(out, "\"a long run of plain text\"\n");
  EXPECT_EQ(out, "\"\\\"a long run of plain text\\\"\\n\"");
}

TEST(JsonString, NamedEscapesAreTheFiveNixNames) {
  int named = 0;
  for (int c = 0; c < 256; ++c) named += kNamedEscapes[c] != 0;
  EXPECT_EQ(named, 5);
  EXPECT_EQ(kNamedEscapes['\n'], 'n');
  EXPECT_EQ(kNamedEscapes['"'], '"');
}

}  // namespace
}  // namespace kiln

// Sizes as operators write them (kiln/common/byte_size.h).
#include "kiln/common/byte_size.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/error.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(ByteSizeTest, ParsesDigitsWithAnOptionalUnit) {
  EXPECT_EQ(parseByteSize("1000", "x"), 1000u);
  EXPECT_EQ(parseByteSize("100K", "x"), 100u << 10);
  EXPECT_EQ(parseByteSize("512M", "x"), 512u << 20);
  EXPECT_EQ(parseByteSize("2G", "x"), uint64_t{2} << 30);
  EXPECT_EQ(parseByteSize("3T", "x"), uint64_t{3} << 40);
}

TEST(ByteSizeTest, RefusesEverythingElseNamingTheOption) {
  for (const char* bad :
       {"", "0", "0M", "-1", "+5", "1.5G", "2GB", "2g", " 2G", "2G ", "G", "2X",
        "99999999999999999999", "9000000T"}) {
    try {
      parseByteSize(bad, "--build-memory-max");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("--build-memory-max: invalid size '" +
                                      std::string(bad) + "'"));
    }
  }
}

TEST(ByteSizeTest, FormatsExactSizesAsTheyAreWritten) {
  EXPECT_EQ(formatByteSize(1000), "1000");
  EXPECT_EQ(formatByteSize(100 << 20), "100M");
  EXPECT_EQ(formatByteSize(uint64_t{2} << 30), "2G");
  EXPECT_EQ(formatByteSize(1536 << 10), "1536K");
  EXPECT_EQ(formatByteSize((uint64_t{21} << 30) / 2), "10.5G");
  for (const char* s : {"512M", "2G", "100K", "7T", "1536K"})
    EXPECT_EQ(formatByteSize(parseByteSize(s, "x")), s);
}

}  // namespace
}  // namespace kiln

// readFile: regular files read at their size, files stat does not size.
#include "kiln/common/file.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

// A regular file is read into a string of its own size in one piece, not
// grown 64 KiB at a time (which left up to twice the size allocated).
TEST(ReadFile, RegularFileIsReadAtItsSize) {
  TempDir dir("kiln-file-test");
  std::string text;
  for (int i = 0; text.size() < 300001; ++i) text += "line " + std::to_string(i) + "\n";
  text.resize(300001);
  writeFile(dir.path() + "/f", text, false);
  std::string got = readFile(dir.path() + "/f");
  EXPECT_EQ(got, text);
  EXPECT_LT(got.capacity(), text.size() + 4096);
  writeFile(dir.path() + "/empty", "", false);
  EXPECT_EQ(readFile(dir.path() + "/empty"), "");
}

// /proc files have no size in stat: they are read to their end all the same.
TEST(ReadFile, FilesWithoutASizeAreReadToTheEnd) {
  std::string status = readFile("/proc/self/status");
  EXPECT_NE(status.find("Name:"), std::string::npos);
  EXPECT_EQ(status.back(), '\n');
  EXPECT_THROW(readFile("/nonexistent/kiln-file-test"), std::exception);
}

}  // namespace
}  // namespace kiln

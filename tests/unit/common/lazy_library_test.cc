// Shared libraries loaded on first use (kiln/common/lazy_library.h).
#include "kiln/common/lazy_library.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kiln/common/error.h"

namespace {

// A library the test binary does not link: the first lookup maps it, and
// the function found is the library's own.
TEST(LazyLibrary, LoadsALibraryOnFirstUseAndFindsItsFunctions) {
  using StrError = const char* (*)(int);
  auto strError = kiln::lazyFunction<StrError>("libzmq.so.5", "zmq_strerror");
  ASSERT_NE(strError, nullptr);
  EXPECT_NE(std::strlen(strError(0)), 0u);
  // Found again from the handle kept open.
  EXPECT_EQ(kiln::lazySymbol("libzmq.so.5", "zmq_strerror"), reinterpret_cast<void*>(strError));
}

TEST(LazyLibrary, MissingLibrariesAndSymbolsAreErrors) {
  try {
    kiln::lazySymbol("libkiln-no-such-library.so.0", "f");
    FAIL() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load libkiln-no-such-library.so.0"),
              std::string::npos);
  }
  try {
    kiln::lazySymbol("libzmq.so.5", "kiln_no_such_function");
    FAIL() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot find kiln_no_such_function in libzmq.so.5"),
              std::string::npos);
  }
}

}  // namespace

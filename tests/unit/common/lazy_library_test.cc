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
  EXPECT_EQ(kiln::lazySymbol("libzmq.so.5", "zmq_strerror"),
            reinterpret_cast<void*>(strError));
}

// The message of the Error that looking `symbol` up in `soname` throws.
std::string lookupError(const char* soname, const char* symbol) {
  try {
    kiln::lazySymbol(soname, symbol);
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(LazyLibrary, MissingLibrariesAndSymbolsAreErrors) {
  EXPECT_NE(lookupError("libkiln-no-such-library.so.0", "f")
                .find("cannot load libkiln-no-such-library.so.0"),
            std::string::npos);
  EXPECT_NE(lookupError("libzmq.so.5", "kiln_no_such_function")
                .find("cannot find kiln_no_such_function in libzmq.so.5"),
            std::string::npos);
}

}  // namespace

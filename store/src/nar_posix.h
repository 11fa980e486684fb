#pragma once
// POSIX helpers shared by the NAR writer (nar_dump.cc) and the tree walker
// that runs ahead of it (nar_walker.cc).

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/common/stream.h"

namespace kiln::store::nar {

/// "a FIFO", "a socket", ...: what an unsupported file type is called in
/// errors.
std::string fileTypeName(mode_t mode);

/// The error for an object of unsupported type `mode` at `path`.
[[noreturn]] void throwUnsupportedType(const std::string& path, mode_t mode);

/// `dir` joined with entry `name` by one '/' ("" names `dir` itself).
std::string joinPath(const std::string& dir, std::string_view name);

/// Streams exactly `size` bytes of the open regular file `fd` (at offset 0)
/// into `sink`, reading straight into a LendingSink's buffer when `sink` is
/// one (otherwise through `buf`, allocated on first use). Throws Error
/// naming joinPath(dir, name) if the file is shorter or longer.
void readOpenFile(int fd, const std::string& dir, std::string_view name,
                  uint64_t size, Sink& sink, std::unique_ptr<char[]>& buf);

}  // namespace kiln::store::nar

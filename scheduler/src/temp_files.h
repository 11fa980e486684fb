#pragma once
// Unlinked temporary files of the scheduler service under <state>/tmp
// (transfers in and out): nothing is left behind on any failure.

#include <cstdint>
#include <string>

#include "kiln/common/file.h"

namespace kiln::scheduler {

/// Creates `path` exclusively and unlinks it at once: the file lives only
/// as long as the descriptor. Throws SysError.
AutoCloseFD openUnlinkedTemp(const std::string& path);

/// Fresh names `<dir>/<pid>-<tag>-<n>` for openUnlinkedTemp.
class TempNames {
 public:
  TempNames(std::string dir, std::string tag);
  std::string next();

 private:
  std::string prefix_;
  uint64_t counter_ = 0;
};

}  // namespace kiln::scheduler

#include "kiln/common/error.h"

#include <cerrno>
#include <cstring>

namespace kiln {

SysError::SysError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err)), errno_(err) {}

void throwSysError(const std::string& what) { throw SysError(what, errno); }

}  // namespace kiln

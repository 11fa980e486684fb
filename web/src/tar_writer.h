#pragma once
// A tar archive of a folder (tar_writer.cc): what a channel's
// nixexprs.tar.xz holds (docs/release.md).

#include <cstdint>
#include <string>

#include "kiln/common/stream.h"

namespace kiln::web {

/// Writes the tree at `dir` (a folder: its files, folders and symbolic
/// links, sorted by name) as a tar archive into `out`, every entry under
/// `top/`: GNU format (long names as `././@LongLink` entries), owner 0,
/// modification time 1, modes 0755 for folders and executables, 0644 for
/// other files, as Nix's store has them. Throws SysError when the tree
/// cannot be read, Error past `maxBytes` of file contents or for a special
/// file (device, socket, fifo).
void writeTar(const std::string& dir, const std::string& top, Sink& out,
              uint64_t maxBytes);

}  // namespace kiln::web

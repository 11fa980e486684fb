#pragma once
// One descriptor for the loop's wait (docs/architecture.md, "Threads"):
// the transport's receive() polls a single wake descriptor beside its
// socket, and the service is woken by several (the registrar's reports,
// the request listener's notifications). An epoll set, level-triggered,
// is readable while any descriptor in it is; each owner drains its own.

#include "kiln/common/file.h"

namespace kiln::scheduler {

class WakeFds {
 public:
  /// An empty set. Throws SysError if epoll cannot be had.
  WakeFds();
  /// Adds `fd` (readable means "wake"; its owner drains it and keeps it
  /// open while it is in the set). Throws SysError.
  void add(int fd);
  /// Readable while any added descriptor is.
  int fd() const { return epoll_.get(); }

 private:
  AutoCloseFD epoll_;
};

}  // namespace kiln::scheduler

// The loop's wake descriptors as one (wake_fds.h).
#include "wake_fds.h"

#include <sys/epoll.h>

#include "kiln/common/error.h"

namespace kiln::scheduler {

WakeFds::WakeFds() : epoll_(epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_) throwSysError("creating the scheduler loop's epoll set");
}

void WakeFds::add(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) < 0)
    throwSysError("adding a descriptor to the scheduler loop's epoll set");
}

}  // namespace kiln::scheduler

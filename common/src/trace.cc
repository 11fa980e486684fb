#include "kiln/common/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "kiln/common/logging.h"

namespace kiln {
namespace {

struct TraceFile {
  int fd = -1;
  std::mutex mutex;
  TraceFile() {
    const char* path = std::getenv("KILN_TRACE");
    if (!path || !*path) return;
    fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
      logWarn(std::string("KILN_TRACE: cannot open ") + path +
              "; tracing is off");
  }
  ~TraceFile() {
    if (fd >= 0) ::close(fd);
  }
};

TraceFile& traceFile() {
  static TraceFile file;
  return file;
}

}  // namespace

bool traceEnabled() { return traceFile().fd >= 0; }

void traceEvent(std::string_view component, std::string_view event,
                uint64_t step, std::string_view detail) {
  TraceFile& t = traceFile();
  if (t.fd < 0) return;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  char stamp[48];
  std::snprintf(stamp, sizeof stamp, "%lld.%03lld\t",
                static_cast<long long>(us / 1000),
                static_cast<long long>(us % 1000));
  std::string line = stamp;
  line.append(component).append("\t").append(event).append("\t");
  line.append(std::to_string(step)).append("\t").append(detail).append("\n");
  std::lock_guard lock(t.mutex);
  // One write per line: O_APPEND keeps lines of several processes whole.
  if (::write(t.fd, line.data(), line.size()) < 0) return;
}

}  // namespace kiln

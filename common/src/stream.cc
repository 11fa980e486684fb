#include "kiln/common/stream.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln {

void Source::readExact(char* data, size_t len) {
  while (len > 0) {
    size_t n = read(data, len);
    if (n == 0) throw FormatError("unexpected end of input");
    data += n;
    len -= n;
  }
}

uint64_t Source::drainInto(Sink& sink) {
  char buf[65536];
  uint64_t total = 0;
  while (size_t n = read(buf, sizeof buf)) {
    sink.write({buf, n});
    total += n;
  }
  return total;
}

size_t StringSource::read(char* data, size_t len) {
  size_t n = std::min(len, s_.size() - pos_);
  std::memcpy(data, s_.data() + pos_, n);
  pos_ += n;
  return n;
}

FdSink::~FdSink() {
  try {
    flush();
  } catch (...) {
  }
}

void FdSink::write(std::string_view data) {
  written_ += data.size();
  if (buf_.size() + data.size() > 65536) {
    flush();
    if (data.size() >= 65536) {
      writeAll(fd_, data);
      return;
    }
  }
  buf_.append(data);
}

void FdSink::flush() {
  if (buf_.empty()) return;
  writeAll(fd_, buf_);
  buf_.clear();
}

size_t FdSource::read(char* data, size_t len) {
  if (pos_ == end_) {
    // Large reads bypass the buffer.
    if (len >= buf_.size()) {
      for (;;) {
        ssize_t n = ::read(fd_, data, len);
        if (n >= 0) return static_cast<size_t>(n);
        if (errno != EINTR) throwSysError("reading from file descriptor");
      }
    }
    for (;;) {
      ssize_t n = ::read(fd_, buf_.data(), buf_.size());
      if (n >= 0) {
        pos_ = 0;
        end_ = static_cast<size_t>(n);
        break;
      }
      if (errno != EINTR) throwSysError("reading from file descriptor");
    }
    if (end_ == 0) return 0;
  }
  size_t n = std::min(len, end_ - pos_);
  std::memcpy(data, buf_.data() + pos_, n);
  pos_ += n;
  return n;
}

}  // namespace kiln

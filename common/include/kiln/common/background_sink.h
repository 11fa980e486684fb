#pragma once
/// A Sink that hands its bytes to another sink on a background thread, so
/// that producing data (reading files for a NAR) and consuming it (hashing,
/// compressing) use two cores. Memory is bounded by a fixed ring of buffers.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/common/stream.h"

namespace kiln {

/// A sink that lends its internal buffer so that a producer can read()
/// straight into it instead of writing a copy.
class LendingSink : public Sink {
 public:
  /// Free space in the current buffer (never empty); valid until commit().
  virtual std::pair<char*, size_t> lend() = 0;
  /// Marks the first `n` bytes of the lent space as written.
  virtual void commit(size_t n) = 0;
};

/// Copies writes into `count` buffers of `size` bytes; a worker thread
/// writes full buffers to `target` (borrowed; it must outlive this object and
/// is only touched by the worker until finish() returns). finish() flushes,
/// joins and rethrows the target's first exception; after a target failure
/// further write() calls throw it too. The destructor stops the worker and
/// discards pending data if finish() was not called.
class BackgroundSink : public LendingSink {
 public:
  explicit BackgroundSink(Sink& target, size_t size = 512 * 1024, size_t count = 16);
  ~BackgroundSink() override;
  BackgroundSink(const BackgroundSink&) = delete;
  BackgroundSink& operator=(const BackgroundSink&) = delete;

  void write(std::string_view data) override;
  std::pair<char*, size_t> lend() override;
  void commit(size_t n) override;
  /// Writes everything pending to the target and waits for it.
  void finish();

 private:
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t used = 0;
  };
  void submitCurrent();
  void run();
  void rethrowIfFailed();

  Sink& target_;
  size_t size_;
  std::vector<Buffer> buffers_;
  size_t current_ = 0;  ///< index being filled by the producer
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> full_, free_;
  bool producerWaiting_ = false;
  bool closing_ = false;
  bool finished_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace kiln

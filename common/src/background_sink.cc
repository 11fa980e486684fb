#include "kiln/common/background_sink.h"

#include <cstring>

namespace kiln {

BackgroundSink::BackgroundSink(Sink& target, size_t size, size_t count)
    : target_(target), size_(size), buffers_(count < 2 ? 2 : count) {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    buffers_[i].data = std::make_unique<char[]>(size_);
    if (i != current_) free_.push_back(i);
  }
  worker_ = std::thread([this] { run(); });
}

BackgroundSink::~BackgroundSink() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    if (!finished_) full_.clear();  // abandoned: do not write pending data
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void BackgroundSink::rethrowIfFailed() {
  if (error_) std::rethrow_exception(error_);
}

void BackgroundSink::submitCurrent() {
  std::unique_lock lock(mutex_);
  full_.push_back(current_);
  changed_.notify_all();
  if (free_.empty()) {
    // Wait for half the ring to drain so that the threads do not wake each
    // other for every buffer.
    producerWaiting_ = true;
    changed_.wait(lock, [&] { return free_.size() >= buffers_.size() / 2 || error_; });
    producerWaiting_ = false;
  }
  rethrowIfFailed();
  current_ = free_.front();
  free_.pop_front();
  buffers_[current_].used = 0;
}

void BackgroundSink::write(std::string_view data) {
  while (!data.empty()) {
    Buffer& b = buffers_[current_];
    size_t n = std::min(data.size(), size_ - b.used);
    std::memcpy(b.data.get() + b.used, data.data(), n);
    b.used += n;
    data.remove_prefix(n);
    if (b.used == size_) submitCurrent();
  }
}

std::pair<char*, size_t> BackgroundSink::lend() {
  Buffer& b = buffers_[current_];
  return {b.data.get() + b.used, size_ - b.used};
}

void BackgroundSink::commit(size_t n) {
  Buffer& b = buffers_[current_];
  b.used += std::min(n, size_ - b.used);
  if (b.used == size_) submitCurrent();
}

void BackgroundSink::finish() {
  std::unique_lock lock(mutex_);
  if (finished_) {
    rethrowIfFailed();
    return;
  }
  if (buffers_[current_].used > 0) full_.push_back(current_);
  finished_ = true;
  closing_ = true;
  changed_.notify_all();
  lock.unlock();
  if (worker_.joinable()) worker_.join();
  rethrowIfFailed();
}

void BackgroundSink::run() {
  for (;;) {
    size_t idx;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return !full_.empty() || closing_; });
      if (full_.empty() || error_) return;
      idx = full_.front();
      full_.pop_front();
    }
    try {
      target_.write({buffers_[idx].data.get(), buffers_[idx].used});
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    bool wake;
    {
      std::lock_guard lock(mutex_);
      free_.push_back(idx);
      wake = producerWaiting_ && free_.size() >= buffers_.size() / 2;
    }
    if (wake) changed_.notify_all();
  }
}

}  // namespace kiln

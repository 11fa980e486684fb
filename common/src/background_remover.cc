#include "kiln/common/background_remover.h"

#include "kiln/common/file.h"

namespace kiln {

BackgroundRemover::~BackgroundRemover() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundRemover::remove(std::string path) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(path));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_all();
}

void BackgroundRemover::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && busy_ == 0; });
}

void BackgroundRemover::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is removed
    std::string doomed = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    try {
      deletePath(doomed);
    } catch (...) {
      // Left behind (the worker's scratch cleanup removes it later).
    }
    lock.lock();
    --busy_;
    cv_.notify_all();
  }
}

}  // namespace kiln

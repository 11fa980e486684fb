#pragma once
/// Removes directory trees on a thread of its own, so that a caller whose
/// work is done with a tree (a finished build's directory) need not wait
/// for the unlinks: on a busy disk removing a build's sources and objects
/// takes milliseconds that would otherwise delay the step's result.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace kiln {

/// A queue of trees to delete (deletePath) and the thread that deletes
/// them, started at the first. Thread-safe. The destructor waits until
/// every queued tree is gone. A tree that cannot be removed is left.
class BackgroundRemover {
 public:
  BackgroundRemover() = default;
  ~BackgroundRemover();
  BackgroundRemover(const BackgroundRemover&) = delete;
  BackgroundRemover& operator=(const BackgroundRemover&) = delete;

  /// Queues `path` for removal; returns at once.
  void remove(std::string path);
  /// Blocks until every tree queued so far is removed.
  void drain();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t busy_ = 0;  // trees taken from the queue, not yet removed
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kiln

#pragma once
/// A tree walker that runs ahead of a NAR writer on a thread of its own
/// (spec §4): it lists directories, stats objects and opens regular files in
/// NAR order, so that the thread writing the NAR only reads file contents.
/// On a tree of many small files the metadata system calls cost as much as
/// hashing the bytes; this takes them off the writing thread.

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/common/stream.h"

namespace kiln::store {

/// One step of a tree in NAR order: an object (the root first, then each
/// directory's entries sorted bytewise, depth first) or the end of a
/// directory's entries.
struct NarWalkItem {
  /// What the item is.
  enum class Kind : uint8_t { kRegular, kSymlink, kDirectory, kEndDirectory };
  Kind kind = Kind::kEndDirectory;
  std::string name;  ///< entry name; empty for the root and kEndDirectory
  bool executable = false;  ///< kRegular: owner-execute bit set
  uint64_t size = 0;        ///< kRegular: byte size when it was opened
  AutoCloseFD fd;           ///< kRegular: open for reading, positioned at 0
  std::string target;       ///< kSymlink: the target, verbatim
};

/// Walks the tree at `root` (never following symlinks) on a background
/// thread and hands its items out in NAR order through a bounded queue: at
/// most `capacity` items wait in the queue, at most `capacity` more were
/// taken by the consumer's thread and not yet returned by next(), and the
/// walker assembles at most capacity / 4 + 1 more; so fewer than
/// 2.25 × `capacity` + 2 files are open, plus one directory per level up to
/// a fixed depth (deeper directories are reached by full path).
/// System calls work relative to directory descriptors (one path component
/// each) and trust the directory entry's type where the file system gives
/// it, falling back to lstat where it does not or where the object changed.
/// Errors (unsupported file types, objects that vanish, permission errors)
/// reach the consumer, naming the path, in the position where they
/// happened: every item before them is delivered first. The walker thread
/// runs at a slightly lower priority (nice + 5) than its creator, so that on
/// a machine with fewer free cores than threads the ones it feeds come first.
class NarTreeWalker {
 public:
  /// Starts walking `root`. `capacity` >= 1 bounds the queue (256: at most
  /// 580 files open; batches of 64 items keep the threads' wake-ups rare).
  explicit NarTreeWalker(std::string root, size_t capacity = 256);
  /// Stops the walk, joins the thread and closes every undelivered file.
  ~NarTreeWalker();
  NarTreeWalker(const NarTreeWalker&) = delete;
  NarTreeWalker& operator=(const NarTreeWalker&) = delete;

  /// Moves the next item into `out`; false at the end of the tree. Rethrows
  /// the walk's error (an Error naming the path) once every item before it
  /// was returned.
  bool next(NarWalkItem& out);
  /// Items handed over but not yet returned by next(); call it on the
  /// consumer's thread (for tests).
  size_t pending();
  /// The root as given.
  const std::string& root() const { return root_; }

 private:
  struct Entry {
    std::string name;
    unsigned char type;  ///< DT_* from the directory (DT_UNKNOWN: ask lstat)
  };
  struct Dir {
    AutoCloseFD fd;  ///< empty beyond the held depth: entries by full path
    std::string path;
    std::vector<Entry> entries;
    size_t next = 0;
  };
  struct Where;  ///< one object to visit: where it is and what it is called

  void run();
  void walk();
  void visit(const Dir& dir, const Entry& entry);
  void emitByLstat(const Where& w);
  void emitRegular(const Where& w, bool guessed);
  void emitSymlink(const Where& w, bool guessed);
  void emitDirectory(const Where& w, bool guessed);
  void listDirectory(Dir& dir);
  void emit(NarWalkItem item);
  void publishBatch();
  void finish(std::exception_ptr error);

  std::string root_;
  size_t capacity_;
  std::deque<Dir> stack_;           ///< walker thread only
  std::vector<NarWalkItem> batch_;  ///< walker thread only: not yet shared
  std::vector<char> direntBuffer_;  ///< walker thread only
  std::deque<NarWalkItem> taken_;   ///< consumer only: taken from shared_

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<NarWalkItem> shared_;
  bool producerWaiting_ = false;
  bool consumerWaiting_ = false;
  bool done_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

/// As dumpPath(path, sink) on the real file system without a filter, with
/// the same bytes, but the tree is walked by a NarTreeWalker ahead of the
/// calling thread, which only reads file contents and writes the NAR.
/// Throws like dumpPath (a throwing sink stops the walker).
void dumpPathAhead(const std::string& path, Sink& sink, size_t capacity = 256);

}  // namespace kiln::store

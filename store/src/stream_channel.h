#pragma once
// A bounded in-memory byte channel between two threads: one writes through
// `sink()`, the other reads through `source()`. Used to feed dumpPath's
// output straight into restorePath without a temporary NAR file.

#include <deque>
#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "kiln/common/stream.h"
#include "kiln/common/sync.h"

namespace kiln::store {

class StreamChannel {
 public:
  /// Starts `producer` on its own thread, writing into the channel. The
  /// destructor cancels and joins it.
  explicit StreamChannel(std::function<void(Sink&)> producer);
  ~StreamChannel();
  StreamChannel(const StreamChannel&) = delete;
  StreamChannel& operator=(const StreamChannel&) = delete;

  /// The reading end; rethrows the producer's exception at end of stream.
  Source& source() { return source_; }

 private:
  struct State {
    std::deque<std::string> chunks;
    size_t buffered = 0;
    bool done = false;       // producer finished (or failed)
    bool cancelled = false;  // reader gave up
    std::exception_ptr error;
  };
  class ChanSink : public Sink {
   public:
    explicit ChanSink(StreamChannel& c) : c_(c) {}
    void write(std::string_view data) override;

   private:
    StreamChannel& c_;
  };
  class ChanSource : public Source {
   public:
    explicit ChanSource(StreamChannel& c) : c_(c) {}
    size_t read(char* data, size_t len) override;

   private:
    StreamChannel& c_;
    std::string cur_;
    size_t pos_ = 0;
  };

  static constexpr size_t kMaxBuffered = 1 << 20;
  Sync<State> state_;
  ChanSink sink_{*this};
  ChanSource source_{*this};
  std::thread thread_;
};

}  // namespace kiln::store

#include "stream_channel.h"

#include <cstring>

#include "kiln/common/error.h"

namespace kiln::store {

StreamChannel::StreamChannel(std::function<void(Sink&)> producer) {
  thread_ = std::thread([this, producer = std::move(producer)] {
    std::exception_ptr err;
    try {
      producer(sink_);
    } catch (...) {
      err = std::current_exception();
    }
    {
      auto st = state_.lock();
      st->done = true;
      st->error = err;
    }
    state_.notifyAll();
  });
}

StreamChannel::~StreamChannel() {
  {
    auto st = state_.lock();
    st->cancelled = true;
  }
  state_.notifyAll();
  thread_.join();
}

void StreamChannel::ChanSink::write(std::string_view data) {
  if (data.empty()) return;
  {
    auto st = c_.state_.lock();
    st.wait([&] { return st->cancelled || st->buffered < kMaxBuffered; });
    if (st->cancelled) throw Error("stream reader stopped");
    st->chunks.emplace_back(data);
    st->buffered += data.size();
  }
  c_.state_.notifyAll();
}

size_t StreamChannel::ChanSource::read(char* data, size_t len) {
  if (pos_ == cur_.size()) {
    {
      auto st = c_.state_.lock();
      st.wait([&] { return !st->chunks.empty() || st->done; });
      if (st->chunks.empty()) {
        if (st->error) std::rethrow_exception(st->error);
        return 0;
      }
      cur_ = std::move(st->chunks.front());
      st->chunks.pop_front();
      st->buffered -= cur_.size();
      pos_ = 0;
    }
    c_.state_.notifyAll();
  }
  size_t n = std::min(len, cur_.size() - pos_);
  std::memcpy(data, cur_.data() + pos_, n);
  pos_ += n;
  return n;
}

}  // namespace kiln::store

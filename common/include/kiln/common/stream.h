#pragma once
/// Byte streams: `Sink` consumes bytes, `Source` produces them. NAR
/// serialisation, hashing, compression and transfers are all written against
/// these so that memory stays bounded whatever the data size.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "kiln/common/file.h"
#include "kiln/common/hash.h"

namespace kiln {

/// Consumer of bytes. Implementations may throw on write failure.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(std::string_view data) = 0;
  void operator()(std::string_view data) { write(data); }
};

/// Producer of bytes.
class Source {
 public:
  virtual ~Source() = default;
  /// Reads up to `len` bytes; returns 0 only at end of stream.
  virtual size_t read(char* data, size_t len) = 0;
  /// Reads exactly `len` bytes; throws FormatError("unexpected end of …")
  /// if the stream ends first.
  void readExact(char* data, size_t len);
  /// Copies the rest of the stream to `sink`; returns the byte count.
  uint64_t drainInto(Sink& sink);
};

/// Appends to a string it owns.
class StringSink : public Sink {
 public:
  void write(std::string_view data) override { s.append(data); }
  std::string s;
};

/// Reads from a string it borrows (the string must outlive the source).
class StringSource : public Source {
 public:
  explicit StringSource(std::string_view s) : s_(s) {}
  size_t read(char* data, size_t len) override;
  size_t remaining() const { return s_.size() - pos_; }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

/// Writes to a file descriptor it borrows, buffering up to 64 KiB; call
/// flush() before the descriptor is closed (the destructor flushes too,
/// swallowing errors).
class FdSink : public Sink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  ~FdSink() override;
  void write(std::string_view data) override;
  void flush();
  uint64_t written() const { return written_; }

 private:
  int fd_;
  std::string buf_;
  uint64_t written_ = 0;
};

/// Reads from a file descriptor it borrows, buffered.
class FdSource : public Source {
 public:
  explicit FdSource(int fd) : fd_(fd) {}
  size_t read(char* data, size_t len) override;

 private:
  int fd_;
  std::string buf_ = std::string(65536, '\0');
  size_t pos_ = 0, end_ = 0;
};

/// An FdSource that owns its descriptor (closed when it goes).
class OwnedFdSource final : public Source {
 public:
  explicit OwnedFdSource(AutoCloseFD fd)
      : fd_(std::move(fd)), src_(fd_.get()) {}
  size_t read(char* data, size_t len) override { return src_.read(data, len); }

 private:
  AutoCloseFD fd_;
  FdSource src_;
};

/// Hashes everything written to it.
class HashingSink : public Sink {
 public:
  explicit HashingSink(HashAlgo algo) : hasher_(algo) {}
  void write(std::string_view data) override { hasher_.update(data); }
  /// The hash and the number of bytes written; call once.
  std::pair<Hash, uint64_t> finish() {
    auto n = hasher_.bytesHashed();
    return {hasher_.finish(), n};
  }

 private:
  HashSink hasher_;
};

/// Forwards every write to two sinks (e.g. a file and a hash).
class TeeSink : public Sink {
 public:
  TeeSink(Sink& a, Sink& b) : a_(a), b_(b) {}
  void write(std::string_view data) override {
    a_.write(data);
    b_.write(data);
  }

 private:
  Sink& a_;
  Sink& b_;
};

}  // namespace kiln

#pragma once
// Primitive encoding of message bodies: little-endian integers, u32
// length-prefixed strings and lists. The Reader checks every bound and names
// the message and field in its errors.

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/common/error.h"
#include "kiln/common/hash.h"

namespace kiln::protocol::wire {

/// Appends primitive values to a body frame.
class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v);
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(std::string_view s);
  void hash(const Hash& h);
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// Reads primitive values from a body frame it borrows. `what` is the
/// message name used in errors ("protocol: Hello: field 'systems': ...").
class Reader {
 public:
  Reader(std::string_view data, std::string what)
      : data_(data), what_(std::move(what)) {}
  uint8_t u8(const char* field);
  uint32_t u32(const char* field);
  uint64_t u64(const char* field);
  int64_t i64(const char* field) { return static_cast<int64_t>(u64(field)); }
  double f64(const char* field);
  bool boolean(const char* field);
  /// A string of at most `max` bytes.
  std::string str(const char* field, size_t max);
  Hash hash(const char* field);
  /// A list count, bounded by `max` and by the bytes left (each element
  /// needs at least `minElemSize` bytes), so a lying count cannot make the
  /// decoder allocate.
  uint32_t count(const char* field, uint32_t max, size_t minElemSize = 1);
  /// Throws unless every byte was consumed.
  void finish();
  /// Whether every byte was consumed (optional trailing fields follow).
  bool atEnd() const { return pos_ >= data_.size(); }
  /// Throws FormatError "protocol: <msg>: field '<field>': <problem>".
  [[noreturn]] void fail(const char* field, const std::string& problem) const;

 private:
  std::string_view take(const char* field, size_t n);
  std::string_view data_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace kiln::protocol::wire

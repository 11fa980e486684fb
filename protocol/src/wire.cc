#include "wire.h"

#include <cmath>
#include <cstring>

namespace kiln::protocol::wire {

void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
}

void Writer::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
}

void Writer::f64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  u64(bits);
}

void Writer::str(std::string_view s) {
  if (s.size() > UINT32_MAX) throw FormatError("protocol: string too long");
  u32(static_cast<uint32_t>(s.size()));
  out_.append(s);
}

void Writer::hash(const Hash& h) {
  u8(static_cast<uint8_t>(h.algo()));
  out_.append(h.bytes());
}

std::string_view Reader::take(const char* field, size_t n) {
  if (data_.size() - pos_ < n)
    fail(field, "truncated (needs " + std::to_string(n) + " bytes, " +
                    std::to_string(data_.size() - pos_) + " left)");
  auto r = data_.substr(pos_, n);
  pos_ += n;
  return r;
}

uint8_t Reader::u8(const char* field) {
  return static_cast<uint8_t>(take(field, 1)[0]);
}

uint32_t Reader::u32(const char* field) {
  auto b = take(field, 4);
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[i]);
  return v;
}

uint64_t Reader::u64(const char* field) {
  auto b = take(field, 8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[i]);
  return v;
}

double Reader::f64(const char* field) {
  uint64_t bits = u64(field);
  double v;
  std::memcpy(&v, &bits, sizeof v);
  if (!std::isfinite(v)) fail(field, "not a finite number");
  return v;
}

bool Reader::boolean(const char* field) {
  auto v = u8(field);
  if (v > 1) fail(field, "boolean is " + std::to_string(v) + ", not 0 or 1");
  return v == 1;
}

std::string Reader::str(const char* field, size_t max) {
  uint32_t n = u32(field);
  if (n > max)
    fail(field, "length " + std::to_string(n) + " exceeds the limit of " +
                    std::to_string(max));
  return std::string(take(field, n));
}

Hash Reader::hash(const char* field) {
  auto a = u8(field);
  if (a > static_cast<uint8_t>(HashAlgo::kSha512))
    fail(field, "unknown hash algorithm " + std::to_string(a));
  auto algo = static_cast<HashAlgo>(a);
  return Hash(algo, take(field, hashSize(algo)));
}

uint32_t Reader::count(const char* field, uint32_t max, size_t minElemSize) {
  uint32_t n = u32(field);
  if (n > max)
    fail(field, "list of " + std::to_string(n) +
                    " entries exceeds the limit of " + std::to_string(max));
  if (static_cast<uint64_t>(n) * minElemSize > data_.size() - pos_)
    fail(field, "list of " + std::to_string(n) + " entries but only " +
                    std::to_string(data_.size() - pos_) + " bytes left");
  return n;
}

void Reader::finish() {
  if (pos_ != data_.size())
    throw FormatError("protocol: " + what_ + ": " +
                      std::to_string(data_.size() - pos_) +
                      " unexpected trailing bytes in the body");
}

void Reader::fail(const char* field, const std::string& problem) const {
  throw FormatError("protocol: " + what_ + ": field '" + field +
                    "': " + problem);
}

}  // namespace kiln::protocol::wire

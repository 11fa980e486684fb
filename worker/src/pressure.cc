#include "kiln/worker/pressure.h"

#include <charconv>
#include <cmath>
#include <fstream>

namespace kiln::worker {

namespace {

// A /proc file is small; a few KiB bound what is read of it.
constexpr std::streamsize kMaxProcFile = 64 << 10;

std::optional<std::string> readSmall(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxProcFile, '\0');
  in.read(text.data(), kMaxProcFile);
  if (in.bad()) return std::nullopt;
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

class ProcPressureSource : public PressureSource {
 public:
  explicit ProcPressureSource(std::string root) : root_(std::move(root)) {}
  MachinePressure read() override {
    MachinePressure p;
    auto psi = [&](const char* name) -> std::optional<double> {
      auto text = readSmall(root_ + "/pressure/" + name);
      return text ? parsePsiSome(*text) : std::nullopt;
    };
    p.memory = psi("memory");
    p.cpu = psi("cpu");
    p.io = psi("io");
    if (auto text = readSmall(root_ + "/meminfo"))
      p.freeMemory = parseMemAvailable(*text);
    return p;
  }

 private:
  std::string root_;
};

// The number that starts `text` (after spaces), if any.
template <class T>
std::optional<T> leadingNumber(std::string_view text) {
  size_t i = text.find_first_not_of(' ');
  if (i == std::string_view::npos) return std::nullopt;
  T v{};
  auto [end, ec] =
      std::from_chars(text.data() + i, text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data() + i) return std::nullopt;
  return v;
}

}  // namespace

std::unique_ptr<PressureSource> procPressureSource(std::string procRoot) {
  return std::make_unique<ProcPressureSource>(std::move(procRoot));
}

std::optional<double> parsePsiSome(std::string_view text) {
  // "some avg10=1.23 avg60=0.50 avg300=0.10 total=12345\nfull ..."
  if (!text.starts_with("some ")) return std::nullopt;
  std::string_view line = text.substr(0, text.find('\n'));
  size_t at = line.find(" avg10=");
  if (at == std::string_view::npos) return std::nullopt;
  auto v = leadingNumber<double>(line.substr(at + 7));
  if (!v || !std::isfinite(*v) || *v < 0 || *v > 100) return std::nullopt;
  return v;
}

std::optional<uint64_t> parseMemAvailable(std::string_view text) {
  // "MemAvailable:   12345678 kB"
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with("MemAvailable:")) continue;
    auto kb = leadingNumber<uint64_t>(line.substr(13));
    if (!kb || !line.ends_with(" kB") || *kb > (UINT64_MAX >> 10))
      return std::nullopt;
    return *kb << 10;
  }
  return std::nullopt;
}

}  // namespace kiln::worker

#include "pressure_options.h"

#include <charconv>
#include <cmath>

#include "kiln/common/byte_size.h"
#include "kiln/common/error.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

using Field = std::string PressureOptions::*;

struct Flag {
  const char* name;
  Field field;
};

constexpr Flag kFlags[] = {
    {"max-load-average", &PressureOptions::maxLoadAverage},
    {"max-memory-pressure", &PressureOptions::maxMemoryPressure},
    {"max-cpu-pressure", &PressureOptions::maxCpuPressure},
    {"max-io-pressure", &PressureOptions::maxIoPressure},
    {"min-free-disk", &PressureOptions::minFreeDisk},
};

// A number in (0, max]; throws Error naming the option.
double parseNumber(const std::string& text, const char* flag, double max) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(v) || v <= 0 || v > max)
    throw Error(std::string("--") + flag + ": invalid value '" + text +
                "' (a number above 0, at most " +
                std::to_string(static_cast<int64_t>(max)) + ")");
  return v;
}

}  // namespace

void addPressureOptions(po::options_description& opts, PressureOptions& out) {
  opts.add_options()(
      "max-load-average", po::value(&out.maxLoadAverage),
      "take no new step while the one-minute load average is above N")(
      "max-memory-pressure", po::value(&out.maxMemoryPressure),
      "take no new step while memory pressure (PSI some avg10, "
      "/proc/pressure/memory) is above PERCENT")(
      "max-cpu-pressure", po::value(&out.maxCpuPressure),
      "the same for CPU pressure (/proc/pressure/cpu)")(
      "max-io-pressure", po::value(&out.maxIoPressure),
      "the same for IO pressure (/proc/pressure/io)")(
      "min-free-disk", po::value(&out.minFreeDisk),
      "take no new step while the state directory's disk has less free "
      "space than SIZE, e.g. 10G");
}

std::vector<std::string> pressureArgs(const PressureOptions& o) {
  std::vector<std::string> a;
  for (const Flag& f : kFlags)
    if (!(o.*f.field).empty())
      a.insert(a.end(), {std::string("--") + f.name, o.*f.field});
  return a;
}

protocol::PressureThresholds parsePressureOptions(const PressureOptions& o) {
  protocol::PressureThresholds t;
  if (!o.maxLoadAverage.empty())
    t.maxLoadAverage = parseNumber(o.maxLoadAverage, "max-load-average", 1e6);
  if (!o.maxMemoryPressure.empty())
    t.maxMemoryPressure =
        parseNumber(o.maxMemoryPressure, "max-memory-pressure", 100);
  if (!o.maxCpuPressure.empty())
    t.maxCpuPressure = parseNumber(o.maxCpuPressure, "max-cpu-pressure", 100);
  if (!o.maxIoPressure.empty())
    t.maxIoPressure = parseNumber(o.maxIoPressure, "max-io-pressure", 100);
  if (!o.minFreeDisk.empty())
    t.minFreeDiskBytes = parseByteSize(o.minFreeDisk, "--min-free-disk");
  return t;
}

void mergePressureOptions(PressureOptions& o, const PressureOptions& fallback) {
  for (const Flag& f : kFlags)
    if ((o.*f.field).empty()) o.*f.field = fallback.*f.field;
}

}  // namespace kiln::cli

#include "limit_options.h"

#include "kiln/common/byte_size.h"
#include "kiln/common/error.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

/// A whole number in [1, max]; throws Error naming `what`.
uint64_t parseCount(const std::string& text, const std::string& what,
                    uint64_t max) {
  uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 12;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || v == 0 || v > max)
    throw Error(what + ": invalid value '" + text +
                "' (a whole number from "
                "1 to " +
                std::to_string(max) + ")");
  return v;
}

/// One limit by its key (memory-max, pids-max, cpu-weight, disk-max).
void setLimit(worker::ResourceLimits& r, const std::string& key,
              const std::string& value, const std::string& what) {
  if (key == "memory-max")
    r.memoryMaxBytes = parseByteSize(value, what);
  else if (key == "pids-max")
    r.pidsMax = parseCount(value, what, 4194304);
  else if (key == "cpu-weight")
    r.cpuWeight = static_cast<uint32_t>(parseCount(value, what, 10000));
  else if (key == "disk-max")
    r.diskMaxBytes = parseByteSize(value, what);
  else
    throw Error(what + ": unknown limit '" + key +
                "' (memory-max, pids-max, cpu-weight or disk-max)");
}

}  // namespace

void addBuildLimitOptions(po::options_description& opts,
                          BuildLimitOptions& out) {
  opts.add_options()(
      "build-memory-max", po::value(&out.memoryMax),
      "memory of one build, e.g. 4G (its control group; past it the build "
      "ends \"out of memory\")")(
      "build-pids-max", po::value(&out.pidsMax),
      "processes and threads of one build (status \"process limit "
      "exceeded\" when reached)")(
      "build-cpu-weight", po::value(&out.cpuWeight),
      "CPU weight of each build's control group, 1..10000 (100: the "
      "default share)")(
      "build-disk-max", po::value(&out.diskMax),
      "size of one build directory, e.g. 20G (checked every second; "
      "status \"disk limit exceeded\")")(
      "big-build-limits", po::value(&out.bigBuild),
      "memory-max=SIZE,pids-max=N,cpu-weight=W,disk-max=SIZE for builds "
      "requiring the system feature big-parallel, which the worker then "
      "announces");
}

std::vector<std::string> buildLimitArgs(const BuildLimitOptions& o) {
  std::vector<std::string> a;
  for (auto [flag, value] : {std::pair{"--build-memory-max", &o.memoryMax},
                             {"--build-pids-max", &o.pidsMax},
                             {"--build-cpu-weight", &o.cpuWeight},
                             {"--build-disk-max", &o.diskMax},
                             {"--big-build-limits", &o.bigBuild}})
    if (!value->empty()) a.insert(a.end(), {flag, *value});
  return a;
}

worker::ResourceLimits parseBuildLimits(const BuildLimitOptions& o) {
  worker::ResourceLimits r;
  for (auto [key, value] : {std::pair{"memory-max", &o.memoryMax},
                            {"pids-max", &o.pidsMax},
                            {"cpu-weight", &o.cpuWeight},
                            {"disk-max", &o.diskMax}})
    if (!value->empty())
      setLimit(r, key, *value, std::string("--build-") + key);
  return r;
}

std::optional<worker::ResourceLimits> parseBigBuildLimits(
    const BuildLimitOptions& o) {
  if (o.bigBuild.empty()) return std::nullopt;
  worker::ResourceLimits r;
  size_t start = 0;
  while (start <= o.bigBuild.size()) {
    size_t end = std::min(o.bigBuild.find(',', start), o.bigBuild.size());
    std::string item = o.bigBuild.substr(start, end - start);
    auto eq = item.find('=');
    if (eq == std::string::npos)
      throw Error("--big-build-limits: '" + item + "': want KEY=VALUE");
    setLimit(r, item.substr(0, eq), item.substr(eq + 1),
             "--big-build-limits " + item.substr(0, eq));
    start = end + 1;
  }
  return r;
}

}  // namespace kiln::cli

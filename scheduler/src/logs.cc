#include "kiln/scheduler/logs.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include "kiln/common/error.h"

namespace kiln::scheduler {
namespace {

std::string baseOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string stepLogPath(const std::string& stateDir, const std::string& drvPath,
                        int attempt) {
  return stateDir + "/logs/" + baseOf(drvPath) + "." + std::to_string(attempt) +
         ".log";
}

std::vector<std::pair<int, std::string>> stepLogFiles(
    const std::string& stateDir, const std::string& drvPath) {
  std::vector<std::pair<int, std::string>> out;
  std::string dir = stateDir + "/logs";
  std::string prefix = baseOf(drvPath) + ".";
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec == std::errc::no_such_file_or_directory) return out;
  if (ec) throw SysError("reading " + dir, ec.value());
  for (; it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(".log")) continue;
    std::string_view num(name.data() + prefix.size(),
                         name.size() - prefix.size() - 4);
    int attempt = 0;
    auto [p, err] = std::from_chars(num.data(), num.data() + num.size(), attempt);
    if (err != std::errc() || p != num.data() + num.size() || attempt <= 0)
      continue;
    out.emplace_back(attempt, it->path().string());
  }
  if (ec) throw SysError("reading " + dir, ec.value());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<int, std::string>> stepLogFiles(
    const std::string& stateDir, const std::string& drvPath,
    int64_t attempts) {
  std::vector<std::pair<int, std::string>> out;
  int last = static_cast<int>(std::clamp<int64_t>(attempts, 0, 10000));
  for (int n = 1; n <= last; ++n) {
    std::string path = stepLogPath(stateDir, drvPath, n);
    if (::access(path.c_str(), F_OK) == 0) out.emplace_back(n, path);
  }
  return out;
}

}  // namespace kiln::scheduler

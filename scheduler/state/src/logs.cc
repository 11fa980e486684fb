#include "kiln/scheduler/logs.h"

#include <unistd.h>

#include <algorithm>

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
    const std::string& stateDir, const std::string& drvPath, int64_t attempts) {
  std::vector<std::pair<int, std::string>> out;
  int last = static_cast<int>(std::clamp<int64_t>(attempts, 0, 10000));
  for (int n = 1; n <= last; ++n) {
    std::string path = stepLogPath(stateDir, drvPath, n);
    if (::access(path.c_str(), F_OK) == 0) out.emplace_back(n, path);
  }
  return out;
}

std::vector<std::pair<int, std::string>> stepLogFiles(
    StateDb& db, const std::string& stateDir, const std::string& drvPath) {
  auto step = drvPath.find('/') == std::string::npos
                  ? db.stepByBaseName(drvPath)
                  : db.stepByDrv(drvPath);
  if (!step) return {};
  return stepLogFiles(stateDir, step->drvPath, step->attempts);
}

}  // namespace kiln::scheduler

#include "kiln/common/logging.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>

namespace kiln {
namespace {

LogLevel initialLevel() {
  const char* env = std::getenv("KILN_LOG");
  if (!env) return LogLevel::kInfo;
  if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(env, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(env, "error")) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<LogLevel> gLevel{initialLevel()};
std::mutex gMutex;

}  // namespace

void setLogLevel(LogLevel level) { gLevel = level; }
LogLevel logLevel() { return gLevel; }

void logMessage(LogLevel level, std::string_view msg) {
  if (level > gLevel) return;
  static const char* kNames[] = {"error", "warning", "info", "debug"};
  std::string line = "kiln: ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line += msg;
  line += '\n';
  std::lock_guard<std::mutex> lk(gMutex);
  std::cerr << line << std::flush;
}

}  // namespace kiln

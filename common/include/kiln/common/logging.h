#pragma once
/// Minimal leveled logging to stderr, safe from several threads.

#include <string_view>

namespace kiln {

enum class LogLevel { kError = 0, kWarn, kInfo, kDebug };

/// Messages above this level are dropped (default kInfo; KILN_LOG=debug).
void setLogLevel(LogLevel level);
LogLevel logLevel();
/// Writes one line "kiln: <level>: <msg>" to stderr if `level` is enabled.
void logMessage(LogLevel level, std::string_view msg);

inline void logError(std::string_view m) { logMessage(LogLevel::kError, m); }
inline void logWarn(std::string_view m) { logMessage(LogLevel::kWarn, m); }
inline void logInfo(std::string_view m) { logMessage(LogLevel::kInfo, m); }
inline void logDebug(std::string_view m) { logMessage(LogLevel::kDebug, m); }

}  // namespace kiln

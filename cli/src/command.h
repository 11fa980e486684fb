#pragma once
/// The `kiln` command registry. Each subcommand lives in its own file and
/// registers itself with a static `RegisterCommand`; main() picks the
/// longest registered word sequence that prefixes argv.

#include <functional>
#include <string>
#include <vector>

namespace kiln::cli {

/// Exit codes every subcommand uses, so scripts can rely on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,    ///< the operation ran and failed (e.g. verify found corruption)
  kExitUsage = 2,      ///< bad command line
  kExitBadInput = 3,   ///< malformed input (NAR, .drv, narinfo, hash ...)
  kExitNotFound = 4,   ///< a named path/object does not exist
};

/// A subcommand: `args` excludes the command words themselves.
using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string name;     ///< e.g. "store add"
  std::string summary;  ///< one line for `kiln --help`
  CommandFn run;
};

/// All registered commands, sorted by name.
std::vector<Command>& commands();

/// Registers a command at static-initialisation time.
struct RegisterCommand {
  RegisterCommand(std::string name, std::string summary, CommandFn fn);
};

}  // namespace kiln::cli

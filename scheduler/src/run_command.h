#pragma once
// Runs a short helper program (nix-instantiate, git) to completion with
// stdout and stderr captured separately. Private to the scheduler's
// evaluation code.

#include <string>
#include <vector>

namespace kiln::scheduler {

struct CommandResult {
  int exitCode = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
};

// Runs argv (argv[0] looked up in PATH, stdin /dev/null) in `cwd` ("" =
// inherit). Throws SysError if it cannot be started. Output is capped at
// 256 MiB per stream (the rest is dropped).
CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::string& cwd = "");

}  // namespace kiln::scheduler

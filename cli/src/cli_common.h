#pragma once
// Helpers shared by the subcommands: command-line parsing with positional
// PATH arguments and mapping of kiln errors to exit codes.

#include <boost/program_options.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

/// Parses `args` against `opts` plus positional `PATH`s (at most `maxPaths`,
/// -1 for any number, at least `minPaths`); returns an exit code when the
/// command must stop (help printed or usage error).
std::optional<int> parseCommandLine(
    const std::string& name, const boost::program_options::options_description& opts,
    std::vector<std::string>& paths, int maxPaths, const std::vector<std::string>& args,
    boost::program_options::variables_map& vm, int minPaths = 1);

/// Runs `body`, printing "kiln <name>: <message>" for a kiln error and
/// returning its exit code: FormatError → kExitBadInput, a missing file or
/// an invalid store path → kExitNotFound, anything else → kExitFailure.
int guarded(const std::string& name, const std::function<int()>& body);

/// The words of space-separated lists (Nix's list settings, such as
/// `--substituters "A B"` given once or more).
std::vector<std::string> listWords(const std::vector<std::string>& lists);

}  // namespace kiln::cli

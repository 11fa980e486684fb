#pragma once
/// Helpers shared by kiln's tests: where the reference material lives,
/// running a command and capturing its output, polling with a deadline.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace kiln::test {

/// The shared reference folder (spec/, conformance/, bench/).
std::string sharedDir();
/// `sharedDir()/spec/vectors/<rel>`.
std::string vectorPath(const std::string& rel);
/// The built `kiln` executable.
std::string kilnBinary();
/// The source tree's root (tests/data, examples/, docs/, bench/).
std::string sourceDir();
/// The build tree's root (plugins/lib, tests/plugins, test artifacts).
/// These paths are functions, not macros, so that a test file's object
/// does not depend on where the tree is and ccache shares it between trees.
std::string binaryDir();
/// The in-tree plugins as built: `binaryDir()/plugins/lib`.
std::string pluginBuildDir();
/// The test plugins (good/, major/, ...): `binaryDir()/tests/plugins`.
std::string testPluginDir();

/// Result of running a command.
struct RunResult {
  int exitCode = -1;  ///< exit status, or 128+signal
  std::string out;    ///< captured stdout
  std::string err;    ///< captured stderr
  /// Peak resident size of the process and of the descendants it waited
  /// for (the largest of them), from wait4.
  size_t peakRssBytes = 0;
};

/// Runs `argv` (argv[0] looked up in PATH) with optional stdin data and
/// extra environment entries ("K=V") through `kiln::Process`; waits for it
/// and captures output. A program that cannot start gives exitCode -1 and
/// the reason in `err`.
RunResult run(const std::vector<std::string>& argv,
              const std::string& input = "",
              const std::vector<std::string>& env = {});

/// Runs `git -C dir ARGS...` with a committer name and email set; returns
/// the first line of its output. Throws Error with its stderr when it
/// fails.
std::string git(const std::string& dir, std::vector<std::string> args);

/// The exit code of a wait(2) status: the code, or 128+signal.
int exitCodeOf(int waitStatus);

/// Whether an executable named `name` is on PATH.
bool haveProgram(const std::string& name);

/// Compiles the C file `source` into the static aarch64-linux program
/// `out` with Debian's aarch64-linux-gnu-gcc. Returns "" on success, else
/// why not (the compiler is missing: scripts/install-deps.sh; or its
/// output).
std::string crossCompileAarch64(const std::string& source,
                                const std::string& out);

/// Calls `pred` until it returns true or `timeout` passes; returns its last
/// result. Polls with a short back-off, never a fixed sleep.
bool pollUntil(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout);

/// The non-empty lines of `text` (e.g. a command's output), in order.
std::vector<std::string> nonEmptyLines(const std::string& text);

/// Splits a TSV file into rows of fields (the header row included).
std::vector<std::vector<std::string>> readTsv(const std::string& path);

/// The "attr: error" lines of every evaluation error recorded in the
/// scheduler's database under `stateDir`, sorted by attribute (read with
/// python3's sqlite3, so the test sees the file as an operator would).
std::string evalErrors(const std::string& stateDir);

/// A free TCP port on 127.0.0.1 (bound to 0 and released).
int freeLoopbackPort();

}  // namespace kiln::test

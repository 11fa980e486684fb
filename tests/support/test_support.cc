#include "test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/process.h"

namespace kiln::test {

std::string sharedDir() {
  if (const char* e = std::getenv("KILN_SHARED_DIR")) return e;
  return KILN_SHARED_DIR;
}

std::string vectorPath(const std::string& rel) {
  return sharedDir() + "/spec/vectors/" + rel;
}

std::string kilnBinary() {
  if (const char* e = std::getenv("KILN_BIN")) return e;
  return KILN_CLI;
}

std::string sourceDir() { return KILN_SOURCE_DIR; }

std::string binaryDir() { return KILN_BINARY_DIR; }

std::string pluginBuildDir() { return binaryDir() + "/plugins/lib"; }

std::string testPluginDir() { return binaryDir() + "/tests/plugins"; }

RunResult run(const std::vector<std::string>& argv, const std::string& input,
              const std::vector<std::string>& env) {
  RunResult res;
  if (argv.empty()) throw Error("test::run: empty command");
  ProcessSpec spec;
  spec.program = argv[0];
  spec.args = argv;
  spec.searchPath = true;
  spec.separateStderr = true;
  spec.env = currentEnvironment();
  for (auto& e : env) {
    auto eq = e.find('=');
    if (eq == std::string::npos) throw Error("test::run: env entry " + e);
    spec.env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  std::optional<TempDir> inputDir;
  if (!input.empty()) {
    inputDir.emplace("kiln-run-input");
    spec.inputFile = inputDir->path() + "/stdin";
    writeFile(spec.inputFile, input);
  }
  std::unique_ptr<Process> child;
  try {
    child = std::make_unique<Process>(spec);
  } catch (const SysError& e) {
    res.err = "cannot start " + argv[0] + ": " + e.what();
    return res;
  }
  for (;;) {
    auto ev = child->next(std::chrono::hours(1));
    if (ev.kind == ProcessEvent::Kind::kOutput)
      (ev.stream == 2 ? res.err : res.out) += ev.data;
    if (ev.kind != ProcessEvent::Kind::kExited) continue;
    res.exitCode = exitCodeOf(ev.status);
    res.peakRssBytes = ev.peakRssBytes;
    return res;
  }
}

int exitCodeOf(int waitStatus) {
  return WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus)
                               : 128 + WTERMSIG(waitStatus);
}

bool haveProgram(const std::string& name) {
  return run({"sh", "-c", "command -v " + name}).exitCode == 0;
}

std::string crossCompileAarch64(const std::string& source,
                                const std::string& out) {
  const std::string gcc = "aarch64-linux-gnu-gcc";
  if (!haveProgram(gcc))
    return gcc + " is missing (scripts/install-deps.sh installs it)";
  auto r = run({gcc, "-static", "-O2", "-o", out, source});
  if (r.exitCode != 0) return gcc + " failed: " + r.err;
  return "";
}

bool pollUntil(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto delay = std::chrono::milliseconds(1);
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(50));
  }
}

std::vector<std::string> nonEmptyLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::vector<std::vector<std::string>> readTsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open " + path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, '\t')) fields.push_back(f);
    if (!line.empty() && line.back() == '\t') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}

std::string evalErrors(const std::string& stateDir) {
  auto r = run({"python3", "-c",
                "import sqlite3, sys\n"
                "for a, e in sqlite3.connect(sys.argv[1]).execute("
                "'select attr, error from eval_errors order by attr'): "
                "print(a + ': ' + e)",
                stateDir + "/scheduler.sqlite"});
  if (r.exitCode != 0) throw Error("reading eval_errors failed: " + r.err);
  return r.out;
}

int freeLoopbackPort() {
  AutoCloseFD fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throwSysError("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throwSysError("bind 127.0.0.1:0");
  socklen_t len = sizeof a;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throwSysError("getsockname");
  return ntohs(a.sin_port);
}

std::string git(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {"git", "-C", dir, "-c", "user.name=kiln", "-c",
                             "user.email=kiln@example.org"});
  auto r = run(args);
  if (r.exitCode != 0)
    throw Error("git " + args[7] + " failed in " + dir + ": " + r.err);
  return r.out.substr(0, r.out.find('\n'));
}

}  // namespace kiln::test

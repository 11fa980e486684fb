// tests/support/postgres_server.h: scripts/start-postgres.sh driven from a
// test, through test::run.
#include "postgres_server.h"

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <sstream>

#include "kiln/common/error.h"

namespace kiln::test {

namespace {

const char kScript[] = "/scripts/start-postgres.sh";

std::string scriptPath() { return sourceDir() + kScript; }

// The last `n` lines of the file at `path`, or "" if it cannot be read.
std::string lastLines(const std::string& path, size_t n) {
  std::string text;
  try {
    text = readFile(path);
  } catch (const Error&) {
    return "";
  }
  size_t at = text.size();
  if (at > 0 && text[at - 1] == '\n') --at;
  for (size_t i = 0; i < n && at != std::string::npos && at > 0; ++i)
    at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

bool validDatabaseName(const std::string& name) {
  if (name.empty() || name.size() > 63 || (name[0] >= '0' && name[0] <= '9'))
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

}  // namespace

bool PostgresServer::available(std::string* why) {
  auto r = run({scriptPath(), "check"});
  if (r.exitCode == 0) return true;
  if (why) *why = r.err.empty() ? "start-postgres.sh check failed" : r.err;
  return false;
}

PostgresServer::PostgresServer() : PostgresServer("", "") {}

PostgresServer::PostgresServer(std::string netns, std::string listenAddress)
    : netns_(std::move(netns)), listen_(std::move(listenAddress)) {
  auto check = run({scriptPath(), "check"});
  if (check.exitCode != 0)
    throw Error("PostgreSQL cannot run here: " + check.err);
  bindir_ = nonEmptyLines(check.out).at(0);
  dir_ = std::make_unique<TempDir>("kiln-pg");
  // mkdtemp's 0700 would keep the server's user (postgres) out.
  if (::chmod(dir_->path().c_str(), 0755) != 0)
    throwSysError("chmod " + dir_->path());
  port_ = freeLoopbackPort();
  try {
    startScript();
  } catch (const Error&) {
    // The destructor will not run: leave no server behind.
    runThere({scriptPath(), "stop", dir_->path()});
    throw;
  }
}

PostgresServer::~PostgresServer() {
  if (!running_) return;
  try {
    stop();
    return;
  } catch (const std::exception&) {
  }
  // The script could not stop it: kill the postmaster (its children exit
  // when it is gone).
  try {
    std::istringstream pidFile(readFile(dataDir() + "/postmaster.pid"));
    long pid = 0;
    if (pidFile >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
  } catch (const std::exception&) {
  }
}

RunResult PostgresServer::script(const std::vector<std::string>& args,
                                 const std::string& what) const {
  std::vector<std::string> argv = {scriptPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = runThere(argv);
  if (r.exitCode != 0)
    throw Error("PostgresServer: " + what + " failed (exit " +
                std::to_string(r.exitCode) + "): " + r.err + "\nserver log:\n" +
                logTail());
  return r;
}

void PostgresServer::startScript() {
  auto r = script({dir_->path(), std::to_string(port_)}, "start");
  running_ = true;
  url_.clear();
  passFile_.clear();
  // `export KILN_DATABASE_URL=... PGPASSFILE=...`
  for (const auto& line : nonEmptyLines(r.out)) {
    std::istringstream words(line);
    std::string word;
    if (!(words >> word) || word != "export") continue;
    while (words >> word) {
      auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      std::string name = word.substr(0, eq), value = word.substr(eq + 1);
      if (name == "KILN_DATABASE_URL") url_ = value;
      if (name == "PGPASSFILE") passFile_ = value;
    }
  }
  if (url_.empty() || passFile_.empty())
    throw Error(
        "PostgresServer: start-postgres.sh printed no URL and "
        "PGPASSFILE: " +
        r.out);
}

void PostgresServer::stop() {
  if (!running_) return;
  script({"stop", dir_->path()}, "stop");
  running_ = false;
}

void PostgresServer::start() {
  if (running_) return;
  startScript();
}

std::string PostgresServer::createDatabase(const std::string& name) {
  if (!validDatabaseName(name))
    throw Error("PostgresServer: '" + name +
                "' is not a database name this helper makes");
  auto r = runThere({bindir_ + "/createdb", "-w", "-h", "127.0.0.1", "-p",
                     std::to_string(port_), "-U", "kiln", name});
  if (r.exitCode != 0)
    throw Error("PostgresServer: createdb " + name + " failed: " + r.err);
  return "postgresql://kiln@" + (listen_.empty() ? "127.0.0.1" : listen_) +
         ":" + std::to_string(port_) + "/" + name;
}

RunResult PostgresServer::psql(const std::string& sql,
                               const std::string& url) const {
  return runThere({bindir_ + "/psql", "-w", "-X", "-q", "-A", "-t", "-v",
                   "ON_ERROR_STOP=1", "-d", url.empty() ? url_ : url, "-c",
                   sql});
}

RunResult PostgresServer::runThere(std::vector<std::string> argv) const {
  if (!netns_.empty())
    argv.insert(argv.begin(), {"ip", "netns", "exec", netns_});
  std::vector<std::string> env = {"PGCONNECT_TIMEOUT=10"};
  if (!passFile_.empty()) env.push_back("PGPASSFILE=" + passFile_);
  if (!listen_.empty()) env.push_back("KILN_PG_LISTEN=" + listen_);
  return run(argv, "", env);
}

PostgresPause::PostgresPause(const PostgresServer& server) {
  std::string pidFile = server.dataDir() + "/postmaster.pid";
  int postmaster = 0;
  std::istringstream(readFile(pidFile)) >> postmaster;
  if (postmaster <= 0) throw Error("no postmaster pid in " + pidFile);
  if (::kill(postmaster, SIGSTOP) != 0)
    throw Error("cannot stop the postmaster " + std::to_string(postmaster));
  pids_.push_back(postmaster);
  // Stopped, it forks no new backend: its children now are all of them.
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat;
    try {
      stat = readFile(e.path().string() + "/stat");
    } catch (const Error&) {
      continue;  // exited meanwhile
    }
    // pid (comm) state ppid ...: comm may hold spaces, not a ')'.
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid != postmaster) continue;
    int pid = std::stoi(name);
    if (::kill(pid, SIGSTOP) == 0) pids_.push_back(pid);
  }
}

void PostgresPause::resume() noexcept {
  if (resumed_) return;
  resumed_ = true;
  for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) ::kill(*it, SIGCONT);
}

std::string PostgresServer::logTail() const {
  if (!dir_) return "";
  return lastLines(dir_->path() + "/log/postgres.log", 20);
}

}  // namespace kiln::test

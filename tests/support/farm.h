#pragma once
/// A build farm of real processes on loopback for integration tests and
/// benchmarks: one `kiln scheduler` and any number of
/// `kiln worker --private-store` processes, each with its own state
/// directory under one temporary folder, plus helpers to drive the
/// scheduler (operator commands) and to watch its state (its SQLite
/// database opened read-only, or its PostgreSQL database with
/// FarmOptions::database; its /metrics endpoint).
///
/// Typical use:
///
///   test::Farm farm;                      // nothing runs yet
///   farm.startScheduler();                // waits for "listening"
///   farm.addWorker(test::WorkerOptions::withSlots(2));  // worker 0
///   ASSERT_TRUE(farm.waitForWorkers(1, 30s));
///   farm.createJobset("p", "j", collectionDir);
///   int64_t eval = farm.evaluate("p", "j");
///   ASSERT_TRUE(farm.waitForBuilds(eval, 300s));
///   for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0);
///
/// Faults: killScheduler() then startScheduler() restarts it on the same
/// port and state; killWorker(i) / stopWorker(i) / pauseWorker(i) (SIGSTOP)
/// / resumeWorker(i) (SIGCONT); startWorker(i) restarts a worker with the
/// same options and state directory. Every process writes its stdout and
/// stderr to a log file (`log()` of the process, also kept in `dir()` as
/// `scheduler.N.log` / `worker-I.N.log`, N counting starts).
///
/// Workers use `--private-store`, so tests need root (CI and this machine
/// run as root); `Farm::canRun()` says whether it can, with a reason for
/// GTEST_SKIP(). Errors (a process that does not come up, a failed
/// command) throw kiln::Error with the process's log tail in the message.
/// The destructor SIGKILLs every process still running and waits for it;
/// the temporary folder is removed unless KILN_KEEP_FARM is set.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/common/process.h"
#include "kiln/scheduler/state_view.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln::test {

/// How the scheduler is run.
struct FarmOptions {
  /// Heartbeat interval announced to workers; a worker silent for three
  /// intervals is declared lost.
  std::chrono::milliseconds heartbeat{1000};
  unsigned maxRetries = 3;
  /// Extra `kiln scheduler` arguments (e.g. {"--log-limit", "1000"}).
  std::vector<std::string> schedulerArgs;
  /// CurveZMQ instead of plain text: the scheduler and every worker get a
  /// key pair (`kiln key generate`, under `dir()/keys`), and the
  /// scheduler's allow-list, written each time it starts, holds the keys
  /// of the workers added so far whose `keyAllowed` is set.
  bool curve = false;
  /// The network namespace the scheduler runs in ("": the test's), e.g. a
  /// NetnsLab's; /metrics is then read from a thread that enters it.
  std::string netns;
  /// The address the scheduler listens on and workers connect to (one of
  /// the scheduler namespace's addresses when `netns` is set).
  std::string host = "127.0.0.1";
  /// Extra environment of the scheduler (e.g. KILN_PLUGIN_PATH).
  std::map<std::string, std::string> schedulerEnv;
  /// The farm's state in PostgreSQL: a `postgresql://USER@HOST:PORT/DB`
  /// URL (e.g. a PostgresServer's createDatabase()) given as `--database`
  /// to the scheduler and to every kiln() command, and opened by view().
  /// The password comes from PGPASSFILE in the environment the processes
  /// inherit. Empty (the default): SQLite under stateDir().
  std::string database;
};

/// How one worker is run.
struct WorkerOptions {
  unsigned slots = 1;
  /// `--systems`; empty: the worker announces what its platforms run.
  std::vector<std::string> systems{"x86_64-linux"};
  /// `--platforms` (comma-separated); empty: the worker's default.
  std::string platforms;
  std::vector<std::string> features;
  std::vector<std::string> mandatoryFeatures;
  /// Extra `kiln worker` arguments.
  std::vector<std::string> extraArgs;
  /// `--worker-id`; default "worker-<index>".
  std::string name;
  /// With FarmOptions::curve: whether its key is in the allow-list.
  bool keyAllowed = true;
  /// `--sandbox`. The farm tests exercise scheduling and their builders
  /// talk to the test through files on the host (release files, pid
  /// files), so they run unsandboxed by default. Empty: no --sandbox, so
  /// `kiln worker`'s own default (`linux`), as farm_sandbox_test runs it.
  std::string sandbox = "none";
  /// The network namespace the worker runs in ("": the test's).
  std::string netns;

  /// Defaults with `slots` slots (designated initialisers trip
  /// -Wmissing-field-initializers).
  static WorkerOptions withSlots(unsigned n) {
    WorkerOptions o;
    o.slots = n;
    return o;
  }
};

/// A build and a step of the scheduler's state (scheduler/state_db.h).
using FarmBuild = scheduler::BuildRow;
using FarmStep = scheduler::StepRow;

/// The farm. Not thread-safe; use it from the test's thread.
class Farm {
 public:
  /// Makes the folder and picks two free loopback ports (ZeroMQ and
  /// /metrics) kept for the Farm's life. Starts nothing.
  explicit Farm(FarmOptions options = {});
  ~Farm();
  Farm(const Farm&) = delete;
  Farm& operator=(const Farm&) = delete;

  /// Whether this host can run workers with --private-store (root) and
  /// evaluate jobsets (nix-instantiate on PATH); otherwise false and `why`
  /// says so.
  static bool canRun(std::string* why = nullptr);

  /// The temporary folder holding every state directory and log.
  const std::string& dir() const { return dir_->path(); }
  /// The scheduler's state directory (central store, scheduler.sqlite).
  std::string stateDir() const { return dir() + "/scheduler"; }
  /// Where the farm's state is: FarmOptions::database, else the SQLite
  /// file in stateDir().
  scheduler::DatabaseSpec database() const;
  /// `tcp://HOST:PORT` (FarmOptions::host), the same across restarts.
  std::string endpoint() const;
  int metricsPort() const { return metricsPort_; }

  // ---- scheduler --------------------------------------------------------

  /// Starts `kiln scheduler` and waits until it prints "listening"; throws
  /// Error (with its log) if it exits or does not listen within `timeout`.
  void startScheduler(
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  /// Arms fail point `point` (docs/operations.md, "Fail points": a value
  /// of KILN_FAIL_POINT, e.g. "scheduler.step-finish.after-commit:2") for
  /// the next startScheduler() only.
  void armSchedulerFailPoint(const std::string& point) {
    schedulerFailPoint_ = point;
  }
  /// Sets (or, with nullopt, removes) variable `name` of the scheduler's
  /// environment (FarmOptions::schedulerEnv) from its next start on.
  void setSchedulerEnv(const std::string& name,
                       const std::optional<std::string>& value) {
    if (value)
      options_.schedulerEnv[name] = *value;
    else
      options_.schedulerEnv.erase(name);
  }
  /// The current scheduler process; throws Error if none was started.
  KilnProcess& scheduler();
  /// SIGKILLs the scheduler (its state stays for a restart).
  void killScheduler();
  /// SIGTERM; returns its exit code.
  int stopScheduler();

  // ---- workers ----------------------------------------------------------

  /// Adds and starts a worker (state `dir()/worker-<i>`); returns its index.
  size_t addWorker(WorkerOptions options = {});
  /// (Re)starts worker `i` with its options and state directory.
  void startWorker(size_t i);
  KilnProcess& worker(size_t i);
  /// Worker `i`'s options, which its next startWorker(i) uses.
  WorkerOptions& workerOptions(size_t i) { return workers_.at(i).options; }
  size_t workerCount() const { return workers_.size(); }
  std::string workerStateDir(size_t i) const;
  /// The `--worker-id` of worker `i`.
  std::string workerName(size_t i) const;
  void killWorker(size_t i);    ///< SIGKILL and reap
  int stopWorker(size_t i);     ///< SIGTERM (graceful), exit code
  void pauseWorker(size_t i);   ///< SIGSTOP
  void resumeWorker(size_t i);  ///< SIGCONT
  /// Polls /metrics until `kiln_workers` equals `n`.
  /// On timeout, prints workersDiagnosis() to stderr.
  bool waitForWorkers(size_t n, std::chrono::milliseconds timeout);
  /// What a failed wait for `n` workers saw: the last `kiln_workers` sample
  /// (`last`), whether each process still runs, and its log's tail.
  std::string workersDiagnosis(size_t n, std::optional<double> last);
  /// Adds a worker with `kiln worker`'s default sandbox (no --sandbox) as
  /// the only worker and waits for it: "" when it is up, else why the sandbox
  /// cannot run on this host (the test skips). Throws Error with its log if it
  /// does not come up for another reason.
  std::string addSandboxedWorker(WorkerOptions options);

  // ---- operator commands (kiln CLI with --state-dir stateDir()) ---------

  /// Runs `kiln ARGS... --state-dir stateDir()` (and `--database URL` with
  /// FarmOptions::database).
  RunResult kiln(std::vector<std::string> args) const;
  /// Same with `--json`; throws Error (stderr included) unless it exits 0.
  nlohmann::json kilnJson(std::vector<std::string> args) const;
  /// Writes `dir()/<name>/default.nix` as `let mk = ...; in <body>` and
  /// returns the folder. `mk name script deps` is an x86_64-linux
  /// derivation running `/bin/sh -c script` with PATH=/usr/bin:/bin and
  /// `deps` (a list of derivations) as inputs in `$deps`. Rewriting the
  /// same name replaces the file.
  std::string writeCollection(const std::string& name,
                              const std::string& body) const;
  /// Creates the project (if new) and an on-demand `path` jobset for the
  /// collection folder `collection` (file default.nix). `arguments` is the
  /// jobset's JSON object of Nix expressions.
  void createJobset(const std::string& project, const std::string& jobset,
                    const std::string& collection,
                    const std::string& arguments = "{}");
  /// `kiln jobset eval` (needs a running scheduler); returns the
  /// evaluation id. `timeout` bounds the whole evaluation.
  int64_t evaluate(const std::string& project, const std::string& jobset,
                   std::chrono::seconds timeout = std::chrono::seconds(600));

  // ---- state (database(), through scheduler::StateView) ----------------

  /// Builds of evaluation `eval` (every build when 0), by id.
  std::vector<FarmBuild> builds(int64_t eval = 0) const;
  /// Every step, by id.
  std::vector<FarmStep> steps() const;
  /// Polls until every build of `eval` (0: all) is finished.
  bool waitForBuilds(int64_t eval, std::chrono::milliseconds timeout) const;
  /// A read-only view of the scheduler's state (outputs, cached failures,
  /// counts...); nullptr before the scheduler created its database.
  std::unique_ptr<scheduler::StateView> view() const;

  // ---- metrics ----------------------------------------------------------

  /// The scheduler's /metrics text; throws Error if it cannot be fetched.
  std::string metricsText() const;
  /// The value of the sample named exactly `sample` (with its labels, e.g.
  /// `kiln_queue_steps{system="x86_64-linux"}`, or a bare name), or
  /// nullopt if absent or unreachable.
  std::optional<double> metric(const std::string& sample) const;

 private:
  struct WorkerSlot {
    WorkerOptions options;
    std::unique_ptr<KilnProcess> process;
    int starts = 0;
  };

  FarmOptions options_;
  std::unique_ptr<TempDir> dir_;
  int port_ = 0;
  int metricsPort_ = 0;
  std::unique_ptr<KilnProcess> scheduler_;
  int schedulerStarts_ = 0;
  std::string schedulerFailPoint_;  ///< for the next start only
  std::vector<WorkerSlot> workers_;
  std::map<std::string, std::string> publicKeys_;  ///< key name → Z85

  /// Generates `dir()/keys/<name>.key|.pub` once; returns the public key.
  std::string keyPair(const std::string& name);
  /// The scheduler's key and allow-list arguments (curve), or plain text.
  std::vector<std::string> schedulerSecurityArgs();
};

/// In a GoogleTest body: skips the test unless Farm::canRun().
#define KILN_SKIP_UNLESS_FARM_CAN_RUN() \
  if (std::string why_; !::kiln::test::Farm::canRun(&why_)) GTEST_SKIP() << why_

/// A collection (text for Farm::writeCollection) of `n` independent jobs'
/// steps `part0`...: each sleeps 0.3 s; job `all` needs them all. With
/// `partsAreJobs` each part is a job of its own too.
std::string partsCollection(int n, bool partsAreJobs);


/// GET http://127.0.0.1:<port><path>; the body, or throws Error. With
/// `netns`, from a thread that entered that named network namespace
/// (/run/netns/NETNS): the loopback of the namespace.
std::string httpGet(int port, const std::string& path,
                    const std::string& netns = "");

/// Parses Prometheus text: the value of the sample named exactly `sample`.
std::optional<double> prometheusSample(const std::string& text,
                                       const std::string& sample);

}  // namespace kiln::test

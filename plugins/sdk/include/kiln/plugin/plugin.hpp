#pragma once
/// Header-only C++ helper for writing kiln plugins (docs/plugin-abi.md):
/// an in-tree plugin is a class plus one macro. The helper turns the C ABI
/// of abi.h into virtual-free, exception-safe calls: every function of the
/// table is a thunk that catches everything and reports it as a kiln_error,
/// so no exception ever crosses the boundary.
///
///     class MySandbox {
///      public:
///       struct Build { ... };                      // per-build state
///       static constexpr uint32_t kCapabilities = KILN_SANDBOX_ISOLATES;
///       explicit MySandbox(kiln::plugin::Host host);
///       std::string buildDir(const std::string& hostBuildDir);
///       std::unique_ptr<Build> start(const kiln_sandbox_spec& spec,
///                                    kiln_sandbox_process& process);
///       void finish(std::unique_ptr<Build> build);
///       void probe();                              // throws if unusable
///     };
///     KILN_SANDBOX_PLUGIN(MySandbox, "mine", "1.0.0", "what it does")
///
///     class MyPlatform {
///      public:
///       explicit MyPlatform(kiln::plugin::Host host);
///       std::vector<std::string> systems();        // what runs here
///       // {file to exec, argv[0], ...}; Failure(KILN_ERR_UNSUPPORTED)
///       std::vector<std::string> command(const std::string& system,
///                                        const std::string& program,
///                                        const std::string& argv0);
///     };
///     KILN_PLATFORM_PLUGIN(MyPlatform, "mine", "1.0.0", "what it does")
///
///     class MyNotifier {
///      public:
///       explicit MyNotifier(kiln::plugin::Host host);
///       // throws Failure when the receiver did not accept the event
///       void deliver(const std::string& event, const std::string& body);
///     };
///     KILN_NOTIFIER_PLUGIN(MyNotifier, "mine", "1.0.0", "what it does")
///
///     class MyEvaluator {
///      public:
///       explicit MyEvaluator(kiln::plugin::Host host);
///       // throws Failure when the evaluation as a whole failed
///       void evaluate(const kiln_eval_request& request,
///                     kiln::plugin::EvalSink& sink);
///     };
///     KILN_EVALUATOR_PLUGIN(MyEvaluator, "mine", "1.0.0", "what it does")

#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/plugin/abi.h"

namespace kiln::plugin {

/// A failure inside a plugin, turned into a kiln_error at the boundary.
class Failure : public std::exception {
 public:
  /// A failure with a status code (KILN_ERR_*) and a message.
  Failure(kiln_status code, std::string message, int sysErrno = 0)
      : code_(code), errno_(sysErrno), message_(std::move(message)) {}
  /// A failed system call: "<what>: <strerror(errno)>", KILN_ERR_SYSTEM.
  static Failure sys(const std::string& what, int err = errno) {
    return Failure(KILN_ERR_SYSTEM, what + ": " + std::strerror(err), err);
  }
  const char* what() const noexcept override { return message_.c_str(); }
  kiln_status code() const { return code_; }
  int sysErrno() const { return errno_; }

 private:
  kiln_status code_;
  int errno_;
  std::string message_;
};

/// Fills `err` (if given) and returns its code.
inline kiln_status report(kiln_error* err, kiln_status code, int sysErrno,
                          const char* message) {
  if (err) {
    err->code = code;
    err->sys_errno = sysErrno;
    std::strncpy(err->message, message, sizeof err->message - 1);
    err->message[sizeof err->message - 1] = '\0';
  }
  return code;
}

/// Runs `fn`, turning any exception into a status and `err`.
template <class Fn>
kiln_status guard(kiln_error* err, Fn&& fn) noexcept {
  try {
    fn();
    return KILN_OK;
  } catch (const Failure& f) {
    return report(err, f.code(), f.sysErrno(), f.what());
  } catch (const std::exception& e) {
    return report(err, KILN_ERR_FAILED, 0, e.what());
  } catch (...) {
    return report(err, KILN_ERR_FAILED, 0, "unknown exception in plugin");
  }
}

/// The host's services, as the plugin sees them. Cheap to copy.
class Host {
 public:
  explicit Host(const kiln_host_services* s) : s_(s) {}
  /// Logs through the host (attributed to this plugin).
  void log(kiln_log_level level, const std::string& msg) const {
    if (s_ && s_->log) s_->log(s_->ctx, level, msg.c_str());
  }
  /// Adds to one of this plugin's counters.
  void metricAdd(const char* name, double delta) const {
    if (s_ && s_->metric_add) s_->metric_add(s_->ctx, name, delta);
  }
  /// The configuration value of `key`, if set.
  std::optional<std::string> config(const char* key) const {
    if (!s_ || !s_->config_get) return std::nullopt;
    char buf[4096];
    int64_t n = s_->config_get(s_->ctx, key, buf, sizeof buf);
    if (n < 0) return std::nullopt;
    if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, n);
    std::string big(static_cast<size_t>(n) + 1, '\0');
    s_->config_get(s_->ctx, key, big.data(), big.size());
    big.resize(static_cast<size_t>(n));
    return big;
  }

 private:
  const kiln_host_services* s_;
};

/// Thunks shared by every kind: create and destroy an instance of P.
template <class P>
struct InstanceThunks {
  static kiln_status create(const kiln_host_services* host, void** instance,
                            kiln_error* err) {
    return guard(err, [&] { *instance = new P(Host(host)); });
  }
  static void destroy(void* instance) {
    guard(nullptr, [&] { delete static_cast<P*>(instance); });
  }
};

/// The sandbox table for class P (see the file comment).
template <class P>
struct SandboxThunks : InstanceThunks<P> {
  static P& self(void* i) { return *static_cast<P*>(i); }
  static kiln_status buildDir(void* i, const char* hostBuildDir, char* buf,
                              size_t size, kiln_error* err) {
    return guard(err, [&] {
      std::string dir = self(i).buildDir(hostBuildDir);
      if (dir.size() + 1 > size)
        throw Failure(KILN_ERR_INVALID, "build directory path too long");
      std::memcpy(buf, dir.c_str(), dir.size() + 1);
    });
  }
  static kiln_status start(void* i, const kiln_sandbox_spec* spec, void** build,
                           kiln_sandbox_process* process, kiln_error* err) {
    return guard(err,
                 [&] { *build = self(i).start(*spec, *process).release(); });
  }
  static kiln_status finish(void* i, void* build, kiln_error* err) {
    return guard(err, [&] {
      self(i).finish(std::unique_ptr<typename P::Build>(
          static_cast<typename P::Build*>(build)));
    });
  }
  static kiln_status probe(void* i, kiln_error* err) {
    return guard(err, [&] { self(i).probe(); });
  }
  /// The table, as built against this header's KILN_PLUGIN_ABI_MINOR.
  static kiln_sandbox_functions table() {
    kiln_sandbox_functions t{};
    t.size = sizeof t;
    t.capabilities = P::kCapabilities;
    t.create = &InstanceThunks<P>::create;
    t.destroy = &InstanceThunks<P>::destroy;
    t.build_dir = &buildDir;
    t.start = &start;
    t.finish = &finish;
#if KILN_PLUGIN_ABI_MINOR >= 1
    t.probe = &probe;
#endif
    return t;
  }
};

/// The platform table for class P (see the file comment).
template <class P>
struct PlatformThunks : InstanceThunks<P> {
  static P& self(void* i) { return *static_cast<P*>(i); }
  static kiln_status systems(void* i, char* buf, size_t size, kiln_error* err) {
    return guard(err, [&] {
      std::string joined;
      for (auto& s : self(i).systems())
        joined += (joined.empty() ? "" : " ") + s;
      if (joined.size() + 1 > size)
        throw Failure(KILN_ERR_INVALID, "system list too long");
      std::memcpy(buf, joined.c_str(), joined.size() + 1);
    });
  }
  static kiln_status command(void* i, const char* system, const char* program,
                             const char* argv0, char* buf, size_t size,
                             uint32_t* count, kiln_error* err) {
    return guard(err, [&] {
      auto words = self(i).command(system, program, argv0);
      size_t used = 0;
      for (auto& w : words) {
        if (used + w.size() + 1 > size)
          throw Failure(KILN_ERR_INVALID, "command too long");
        std::memcpy(buf + used, w.c_str(), w.size() + 1);
        used += w.size() + 1;
      }
      *count = static_cast<uint32_t>(words.size());
    });
  }
  /// The table (minor 2 and later).
  static kiln_platform_functions table() {
    kiln_platform_functions t{};
    t.size = sizeof t;
    t.create = &InstanceThunks<P>::create;
    t.destroy = &InstanceThunks<P>::destroy;
    t.systems = &systems;
    t.command = &command;
    return t;
  }
};

/// The notifier table for class P, which has
///     explicit P(kiln::plugin::Host host);    // throws if misconfigured
///     void deliver(const std::string& event, const std::string& body);
/// (deliver throws when the receiver did not accept the event).
template <class P>
struct NotifierThunks : InstanceThunks<P> {
  static kiln_status deliver(void* i, const char* event, const char* body,
                             size_t len, kiln_error* err) {
    return guard(err, [&] {
      static_cast<P*>(i)->deliver(std::string(event), std::string(body, len));
    });
  }
  /// The table, as built against this header's KILN_PLUGIN_ABI_MINOR.
  static kiln_notifier_functions table() {
    kiln_notifier_functions t{};
    t.size = sizeof t;
    t.create = &InstanceThunks<P>::create;
    t.destroy = &InstanceThunks<P>::destroy;
#if KILN_PLUGIN_ABI_MINOR >= 3
    t.deliver = &deliver;
#endif
    return t;
  }
};

#if KILN_PLUGIN_ABI_MINOR >= 4
/// The host's kiln_eval_sink as an evaluator sees it: each call throws the
/// host's refusal as a Failure (which the thunk turns back into a status).
class EvalSink {
 public:
  explicit EvalSink(const kiln_eval_sink* s) : s_(s) {}
  /// Reports one job line (see kiln_eval_sink.job).
  void job(const std::string& line) const {
    kiln_error err{};
    if (kiln_status st = s_->job(s_->ctx, line.data(), line.size(), &err))
      throw Failure(st, err.message, err.sys_errno);
  }
  /// Has the host import `paths`' closures from the Nix store at `nixRoot`.
  void importNixStore(const std::string& nixRoot,
                      const std::vector<std::string>& paths) const {
    std::vector<const char*> ptrs;
    for (auto& p : paths) ptrs.push_back(p.c_str());
    ptrs.push_back(nullptr);
    kiln_error err{};
    if (kiln_status st =
            s_->import_nix_store(s_->ctx, nixRoot.c_str(), ptrs.data(), &err))
      throw Failure(st, err.message, err.sys_errno);
  }

 private:
  const kiln_eval_sink* s_;
};

/// The evaluator table for class P, which has
///     explicit P(kiln::plugin::Host host);    // throws if misconfigured
///     void evaluate(const kiln_eval_request&, EvalSink&);  // throws
template <class P>
struct EvaluatorThunks : InstanceThunks<P> {
  static kiln_status evaluate(void* i, const kiln_eval_request* request,
                              const kiln_eval_sink* sink, kiln_error* err) {
    return guard(err, [&] {
      EvalSink s(sink);
      static_cast<P*>(i)->evaluate(*request, s);
    });
  }
  /// The table (minor 4 and later).
  static kiln_evaluator_functions table() {
    kiln_evaluator_functions t{};
    t.size = sizeof t;
    t.create = &InstanceThunks<P>::create;
    t.destroy = &InstanceThunks<P>::destroy;
    t.evaluate = &evaluate;
    return t;
  }
};
#endif

/// The common table (an evaluator or a notifier built against an older
/// minor, without `evaluate` or `deliver`) for P.
template <class P>
kiln_generic_functions genericTable() {
  return {sizeof(kiln_generic_functions), &InstanceThunks<P>::create,
          &InstanceThunks<P>::destroy};
}

}  // namespace kiln::plugin

/// Defines the library's entry point for plugin class `Class` of `kind`
/// with function table `table` (an expression).
#define KILN_PLUGIN_ENTRY_WITH(kind, table, name, version, summary) \
  extern "C" __attribute__((visibility("default")))                 \
  const kiln_plugin_descriptor*                                     \
  kiln_plugin_entry(void) {                                         \
    static const auto functions = (table);                          \
    static const kiln_plugin_descriptor descriptor = {              \
        sizeof(kiln_plugin_descriptor),                             \
        KILN_PLUGIN_ABI_MAJOR,                                      \
        KILN_PLUGIN_ABI_MINOR,                                      \
        (kind),                                                     \
        (name),                                                     \
        (version),                                                  \
        (summary),                                                  \
        &functions};                                                \
    return &descriptor;                                             \
  }

/// Makes `Class` a sandbox plugin named `name`.
#define KILN_SANDBOX_PLUGIN(Class, name, version, summary)                    \
  KILN_PLUGIN_ENTRY_WITH(KILN_PLUGIN_SANDBOX,                                 \
                         ::kiln::plugin::SandboxThunks<Class>::table(), name, \
                         version, summary)

/// Makes `Class` a platform plugin named `name`.
#define KILN_PLATFORM_PLUGIN(Class, name, version, summary)                    \
  KILN_PLUGIN_ENTRY_WITH(KILN_PLUGIN_PLATFORM,                                 \
                         ::kiln::plugin::PlatformThunks<Class>::table(), name, \
                         version, summary)

/// Makes `Class` a notifier plugin named `name` (see NotifierThunks).
#define KILN_NOTIFIER_PLUGIN(Class, name, version, summary)                    \
  KILN_PLUGIN_ENTRY_WITH(KILN_PLUGIN_NOTIFIER,                                 \
                         ::kiln::plugin::NotifierThunks<Class>::table(), name, \
                         version, summary)

/// Makes `Class` an evaluator plugin named `name` (see EvaluatorThunks).
#define KILN_EVALUATOR_PLUGIN(Class, name, version, summary)              \
  KILN_PLUGIN_ENTRY_WITH(KILN_PLUGIN_EVALUATOR,                           \
                         ::kiln::plugin::EvaluatorThunks<Class>::table(), \
                         name, version, summary)

/// Makes `Class` an evaluator or notifier plugin with the common table only
/// (`kind` is KILN_PLUGIN_EVALUATOR or KILN_PLUGIN_NOTIFIER).
#define KILN_GENERIC_PLUGIN(kind, Class, name, version, summary)            \
  KILN_PLUGIN_ENTRY_WITH(kind, ::kiln::plugin::genericTable<Class>(), name, \
                         version, summary)

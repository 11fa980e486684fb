#pragma once
/// Operator requests as a typed table (docs/scheduler.md, "Operations"):
/// each request kind is a name, a schema of its arguments and a handler.
/// The CLI's `kiln build|jobset|queue ...`, the requests table of the state
/// database and (next) the web's write API all go through one table, so a
/// new request is one `add` call (docs/architecture.md, "How to extend").

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::scheduler {

/// The JSON type an argument must have.
enum class ArgType { kString, kInt, kBool, kAny };

/// One argument of a request.
struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kString;
  bool required = false;
  std::string help;  ///< one line, for listings
};

/// Runs a request whose arguments passed the schema; returns its JSON
/// answer. Throws SchedulerStateError for the caller's mistakes (no such
/// build...) and Error for the scheduler's own failures.
using RequestFn = std::function<nlohmann::json(const nlohmann::json& args)>;

/// A request kind.
struct RequestHandler {
  std::string name;  ///< e.g. "build-cancel"
  std::string help;  ///< one line
  std::vector<ArgSpec> args;
  RequestFn run;
};

/// Request kinds by name. Not thread-safe; the service builds its table
/// once and uses it from its own thread.
class RequestTable {
 public:
  /// Adds `handler`, replacing one of the same name (a live scheduler
  /// overrides the offline handlers this way).
  void set(RequestHandler handler);
  /// The handler named `name`, or nullptr.
  const RequestHandler* find(const std::string& name) const;
  /// Checks `args` against the schema (an object; required arguments
  /// present; declared arguments of the right type; others are ignored)
  /// and runs the handler. Throws SchedulerStateError for an unknown kind
  /// or bad arguments, and whatever the handler throws.
  nlohmann::json apply(const std::string& name,
                       const nlohmann::json& args) const;
  /// The schema check of apply() alone; returns the handler.
  const RequestHandler& check(const std::string& name,
                              const nlohmann::json& args) const;
  /// Every handler, by name.
  std::vector<const RequestHandler*> list() const;

 private:
  std::map<std::string, RequestHandler> handlers_;
};

/// Argument accessors for handlers (after the schema check): the value,
/// or `def` when absent.
std::string strArg(const nlohmann::json& args, const char* name,
                   const std::string& def = "");
int64_t intArg(const nlohmann::json& args, const char* name, int64_t def = 0);
bool boolArg(const nlohmann::json& args, const char* name, bool def);

}  // namespace kiln::scheduler

// The typed table of operator requests (requests.h).
#include "kiln/scheduler/requests.h"

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

bool hasType(const json& v, ArgType t) {
  switch (t) {
    case ArgType::kString:
      return v.is_string();
    case ArgType::kInt:
      return v.is_number_integer();
    case ArgType::kBool:
      return v.is_boolean();
    case ArgType::kAny:
      return true;
  }
  return false;
}

const char* typeName(ArgType t) {
  switch (t) {
    case ArgType::kString:
      return "a string";
    case ArgType::kInt:
      return "an integer";
    case ArgType::kBool:
      return "a boolean";
    case ArgType::kAny:
      break;
  }
  return "a JSON value";
}

}  // namespace

void RequestTable::set(RequestHandler handler) {
  std::string name = handler.name;
  handlers_.insert_or_assign(name, std::move(handler));
}

const RequestHandler* RequestTable::find(const std::string& name) const {
  auto it = handlers_.find(name);
  return it == handlers_.end() ? nullptr : &it->second;
}

json RequestTable::apply(const std::string& name, const json& args) const {
  const RequestHandler& h = check(name, args);
  return h.run(args.is_null() ? json::object() : args);
}

const RequestHandler& RequestTable::check(const std::string& name,
                                          const json& args) const {
  const RequestHandler* h = find(name);
  if (!h) throw SchedulerStateError("unknown request kind '" + name + "'");
  if (!args.is_object() && !args.is_null())
    throw SchedulerStateError("the arguments of '" + name +
                              "' must be a JSON object");
  const json& a = args;
  for (const ArgSpec& spec : h->args) {
    if (!a.is_object()) {
      if (spec.required)
        throw SchedulerStateError("missing argument '" + spec.name + "'");
      continue;
    }
    if (!a.contains(spec.name)) {
      if (spec.required)
        throw SchedulerStateError("missing argument '" + spec.name + "'");
      continue;
    }
    if (!hasType(a[spec.name], spec.type))
      throw SchedulerStateError("argument '" + spec.name + "' must be " +
                                typeName(spec.type));
  }
  return *h;
}

std::vector<const RequestHandler*> RequestTable::list() const {
  std::vector<const RequestHandler*> out;
  for (auto& [name, h] : handlers_) out.push_back(&h);
  return out;
}

std::string strArg(const json& a, const char* k, const std::string& def) {
  return a.contains(k) ? a[k].get<std::string>() : def;
}

int64_t intArg(const json& a, const char* k, int64_t def) {
  return a.contains(k) ? a[k].get<int64_t>() : def;
}

bool boolArg(const json& a, const char* k, bool def) {
  return a.contains(k) ? a[k].get<bool>() : def;
}

}  // namespace kiln::scheduler

// Hydra-style job enumeration over an evaluated collection.
#include "kiln/evaluator/jobs.h"

#include <algorithm>
#include <sstream>

#include "eval_services.h"
#include "kiln/common/encoding.h"
#include "kiln/evaluator/output.h"

namespace kiln::eval {
namespace {

std::string joinAttr(const std::string& prefix, std::string_view name) {
  std::string n(name);
  if (n.empty() || n.find('.') != std::string::npos) n = "\"" + n + "\"";
  return prefix.empty() ? n : prefix + "." + n;
}

std::string stringAttr(EvalState& st, Value& drv, Symbol name, const char* what) {
  Value* a = drv.attrs->get(name);
  if (!a) throw EvalError(std::string("derivation has no '") + what + "' attribute");
  Context ctx;
  return std::string(forceString(st, *a, ctx, kNoPos));
}

void describeOutputs(EvalState& st, Value& drv, Job& job) {
  Value* outs = drv.attrs->get(st.sOutputs);
  if (!outs) {
    job.outputs.push_back({"out", stringAttr(st, drv, st.sOutPath, "outPath")});
    return;
  }
  forceList(st, *outs, kNoPos);
  for (size_t i = 0; i < outs->list.size; ++i) {
    std::string name(forceStringNoCtx(st, *outs->list.elems[i], kNoPos));
    Value* o = drv.attrs->get(st.sym(name));
    if (!o) throw EvalError("derivation has no attribute for its output '" + name + "'");
    forceAttrs(st, *o, kNoPos);
    job.outputs.push_back({name, stringAttr(st, *o, st.sOutPath, "outPath")});
  }
}

// Meta attributes that fail to evaluate or have no JSON form are left out:
// they describe the job but must not make it fail.
void describeMeta(EvalState& st, Value& drv, Job& job) {
  Value* meta = drv.attrs->get(st.sMeta);
  if (!meta) return;
  forceAttrs(st, *meta, kNoPos);
  for (const Attr* a : sortedByName(st, meta->attrs)) {
    std::string out;
    try {
      Context ctx;
      printValueAsJSON(st, true, *a->value, kNoPos, out, ctx, false);
    } catch (const EvalError&) {
      continue;
    }
    job.meta.push_back({std::string(st.symbols.name(a->name)), std::move(out)});
  }
}

// An aggregate job (`_hydraAggregate = true`): the derivations its
// `constituents` list holds (from the string context of the list coerced
// to a string, as nix-eval-jobs reads them) and the job names in it.
void describeConstituents(EvalState& st, Value& drv, Job& job) {
  Value* flag = drv.attrs->get(st.sym("_hydraAggregate"));
  if (!flag || !forceBool(st, *flag, kNoPos)) return;
  job.aggregate = true;
  Value* list = drv.attrs->get(st.sym("constituents"));
  if (!list) throw EvalError("aggregate job '" + job.attr + "' has no 'constituents' attribute");
  Context ctx;
  coerceToString(st, kNoPos, *list, ctx, true, false);
  for (std::string_view c : ctx) {
    if (c.empty() || c[0] != '!') continue;  // only derivations' outputs
    size_t bang = c.find('!', 1);
    if (bang != std::string_view::npos) job.constituents.emplace_back(c.substr(bang + 1));
  }
  std::sort(job.constituents.begin(), job.constituents.end());
  job.constituents.erase(std::unique(job.constituents.begin(), job.constituents.end()),
                         job.constituents.end());
  forceList(st, *list, kNoPos);
  for (size_t i = 0; i < list->list.size; ++i) {
    Value& e = *list->list.elems[i];
    st.forceValue(e, kNoPos);
    if (e.type == VType::kString) job.namedConstituents.emplace_back(forceStringNoCtx(st, e, kNoPos));
  }
}

Job describeDerivation(EvalState& st, Value& drv, const std::string& attr,
                       const JobWalkOptions& options) {
  Job job;
  job.attr = attr;
  job.name = stringAttr(st, drv, st.sName, "name");
  // A package set's own wrapper sets (a `mkDerivation` of its own) need
  // not carry `system`: the platform is in the .drv, and nix-eval-jobs and
  // Hydra report "unknown" for such a job instead of failing it.
  job.system = drv.attrs->get(st.sSystem) ? stringAttr(st, drv, st.sSystem, "system") : "unknown";
  job.drvPath = stringAttr(st, drv, st.sDrvPath, "drvPath");
  describeOutputs(st, drv, job);
  describeMeta(st, drv, job);
  if (options.constituents) describeConstituents(st, drv, job);
  return job;
}

class Walker {
 public:
  Walker(EvalState& st, Bindings* autoArgs, const JobWalkOptions& options,
         const std::function<void(const Job&)>& onJob)
      : st_(st), autoArgs_(autoArgs), options_(options), onJob_(onJob) {}

  // The value of `v0` after auto-calling and forcing it.
  Value force(Value& v0) {
    Value v;
    st_.autoCallFunction(autoArgs_, v0, v);
    st_.forceValue(v, kNoPos);
    return v;
  }

  // Returns without calling onJob for values that are not jobs.
  void visit(Value& v0, const std::string& attr) {
    Value v = force(v0);
    if (isDerivation(st_, v)) {
      onJob_(describeDerivation(st_, v, attr, options_));
      return;
    }
    for (const Attr* a : enteredAttrs(v)) visitGuarded(*a, attr);
  }

  void visitGuarded(const Attr& a, const std::string& prefix) {
    std::string attr = joinAttr(prefix, st_.symbols.name(a.name));
    try {
      visit(*a.value, attr);
    } catch (const EvalError& e) {
      Job job;
      job.attr = attr;
      job.error = e.what();
      onJob_(job);
    }
  }

  void describe(Value& drv, const std::string& attr) {
    onJob_(describeDerivation(st_, drv, attr, options_));
  }

  // The attributes visit(v0) would walk into, or empty when it would not
  // enter v0 (a derivation, not a set, no recurseForDerivations).
  // Functions and functors are left to visit, which auto-calls them once.
  std::vector<const Attr*> entered(Value& v0) {
    st_.forceValue(v0, kNoPos);
    if (v0.type != VType::kAttrs || v0.attrs->get(st_.sFunctor) || isDerivation(st_, v0)) return {};
    return enteredAttrs(v0);
  }

 private:
  // The attributes of `v` (forced, not a derivation) the walk enters, in
  // name order: none unless it is a set with `recurseForDerivations = true`
  // (or any set, with forceRecurse).
  std::vector<const Attr*> enteredAttrs(Value& v) {
    if (v.type != VType::kAttrs) return {};
    if (options_.forceRecurse) return sortedByName(st_, v.attrs);
    Value* r = v.attrs->get(st_.sRecurseForDerivations);
    if (!r || !forceBool(st_, *r, kNoPos)) return {};
    return sortedByName(st_, v.attrs);
  }

  EvalState& st_;
  Bindings* autoArgs_;
  const JobWalkOptions& options_;
  const std::function<void(const Job&)>& onJob_;
};

}  // namespace

JobRoot prepareJobRoot(EvalState& st, Value& root, Bindings* autoArgs,
                       const JobWalkOptions& options) {
  std::function<void(const Job&)> none;
  JobRoot r;
  r.options = options;
  r.value = Walker(st, autoArgs, r.options, none).force(root);
  if (isDerivation(st, r.value)) {
    r.isDerivation = true;
    return r;
  }
  if (r.value.type != VType::kAttrs)
    throw EvalError(std::string("the collection must be a set or a derivation, but is ") +
                    showType(r.value));
  r.entries = sortedByName(st, r.value.attrs);
  return r;
}

void enumerateJobEntry(EvalState& st, const JobRoot& root, size_t index, Bindings* autoArgs,
                       const std::string& rootAttr, const std::function<void(const Job&)>& onJob) {
  Walker w(st, autoArgs, root.options, onJob);
  if (!root.isDerivation) return w.visitGuarded(*root.entries.at(index), rootAttr);
  Value drv = root.value;
  w.describe(drv, rootAttr);
}

std::vector<const Attr*> jobEntrySubEntries(EvalState& st, const JobRoot& root, size_t index,
                                            Bindings* autoArgs) {
  if (root.isDerivation) return {};
  std::function<void(const Job&)> none;
  try {
    return Walker(st, autoArgs, root.options, none).entered(*root.entries.at(index)->value);
  } catch (const EvalError&) {
    return {};  // enumerateJobEntry reports it
  }
}

void enumerateJobSubEntry(EvalState& st, const JobRoot& root, const Attr& attr,
                          const std::string& prefix, Bindings* autoArgs,
                          const std::function<void(const Job&)>& onJob) {
  Walker(st, autoArgs, root.options, onJob).visitGuarded(attr, prefix);
}

std::string jobEntryAttr(EvalState& st, const JobRoot& root, size_t index,
                         const std::string& rootAttr) {
  if (root.isDerivation) return rootAttr;
  return joinAttr(rootAttr, st.symbols.name(root.entries.at(index)->name));
}

void enumerateJobs(EvalState& st, Value& root, Bindings* autoArgs, const std::string& rootAttr,
                   const std::function<void(const Job&)>& onJob) {
  JobRoot r = prepareJobRoot(st, root, autoArgs);
  size_t n = r.isDerivation ? 1 : r.entries.size();
  for (size_t i = 0; i < n; ++i) enumerateJobEntry(st, r, i, autoArgs, rootAttr, onJob);
}

std::string jobToJson(const Job& job) {
  std::string out;
  out += "{\"attr\":";
  appendJsonString(out, job.attr);
  if (!job.error.empty()) {
    out += ",\"error\":";
    appendJsonString(out, job.error);
    out += "}";
    return out;
  }
  out += ",\"name\":";
  appendJsonString(out, job.name);
  out += ",\"system\":";
  appendJsonString(out, job.system);
  out += ",\"drvPath\":";
  appendJsonString(out, job.drvPath);
  out += ",\"outputs\":{";
  for (size_t i = 0; i < job.outputs.size(); ++i) {
    if (i) out += ",";
    appendJsonString(out, job.outputs[i].first);
    out += ":";
    appendJsonString(out, job.outputs[i].second);
  }
  out += "},\"meta\":{";
  for (size_t i = 0; i < job.meta.size(); ++i) {
    if (i) out += ",";
    appendJsonString(out, job.meta[i].first);
    out += ":";
    out += job.meta[i].second;
  }
  out += "}";
  if (job.aggregate) {
    auto list = [&](const char* name, const std::vector<std::string>& items) {
      out += ",\"";
      out += name;
      out += "\":[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ",";
        appendJsonString(out, items[i]);
      }
      out += "]";
    };
    list("constituents", job.constituents);
    list("namedConstituents", job.namedConstituents);
  }
  out += "}";
  return out;
}

}  // namespace kiln::eval

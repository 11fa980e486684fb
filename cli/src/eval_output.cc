// `kiln eval`'s job lines (eval_output.h).
#include "eval_output.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <nlohmann/json.hpp>

#include "eval_cli.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/derivation.h"
#include "kiln/store/local_store.h"
#include "kiln/store/narinfo.h"

namespace kiln::cli {

using nlohmann::json;

JobFormat parseJobFormat(const std::string& text) {
  if (text == "lines") return JobFormat::kLines;
  if (text == "json") return JobFormat::kJson;
  if (text == "nix-eval-jobs") return JobFormat::kNixEvalJobs;
  throw Error("unknown output format '" + text + "' (lines, json or nix-eval-jobs)");
}

std::vector<std::string> splitJobAttr(const std::string& attr) {
  std::vector<std::string> parts;
  if (attr.empty()) return parts;
  std::string cur;
  bool quoted = false;
  for (char c : attr) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == '.' && !quoted) {
      parts.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(std::move(cur));
  return parts;
}

namespace {

// nix-eval-jobs' line: keys sorted (it writes an nlohmann::json object).
std::string nixEvalJobsLine(const eval::Job& job, bool meta) {
  json j = {{"attr", job.attr}, {"attrPath", splitJobAttr(job.attr)}};
  if (!job.error.empty()) {
    j["error"] = job.error;
    return j.dump() + "\n";
  }
  j["name"] = job.name;
  j["system"] = job.system;
  j["drvPath"] = job.drvPath;
  json outputs = json::object();
  for (auto& [name, path] : job.outputs) outputs[name] = path;
  j["outputs"] = std::move(outputs);
  if (meta) {
    json m = json::object();
    for (auto& [name, text] : job.meta) m[name] = json::parse(text);
    j["meta"] = std::move(m);
  }
  if (job.aggregate) {
    j["constituents"] = job.constituents;
    j["namedConstituents"] = job.namedConstituents;
  }
  return j.dump() + "\n";
}

}  // namespace

std::string formatJob(const eval::Job& job, JobFormat format, bool meta) {
  switch (format) {
    case JobFormat::kJson:
      return eval::jobToJson(job) + "\n";
    case JobFormat::kNixEvalJobs:
      return nixEvalJobsLine(job, meta);
    case JobFormat::kLines:
      break;
  }
  if (!job.error.empty()) return job.attr + ": error: " + job.error + "\n";
  return job.attr + " " + job.drvPath + "\n";
}

// ---------------------------------------------------------------- cache status

struct CacheStatusChecker::Cache {
  std::string url;
  std::unique_ptr<store::CacheStorage> storage;
  std::unique_ptr<store::BinaryCacheReader> reader;
  bool failed = false;
};

CacheStatusChecker::CacheStatusChecker(store::LocalStore& store,
                                       const std::vector<std::string>& cacheUrls)
    : store_(store) {
  for (auto& url : cacheUrls) {
    auto c = std::make_unique<Cache>();
    c->url = url;
    try {
      c->storage = store::openCacheStorage(url);
      c->reader = std::make_unique<store::BinaryCacheReader>(*c->storage, store.storeDir());
      c->reader->init();
    } catch (const Error& e) {
      std::cerr << "kiln eval: cache " << url << " is not used: " << e.what() << "\n";
      c->failed = true;
    }
    caches_.push_back(std::move(c));
  }
}

CacheStatusChecker::~CacheStatusChecker() = default;

const CacheStatusChecker::DrvNode& CacheStatusChecker::node(const std::string& drvPath) {
  auto known = drvs_.find(drvPath);
  if (known != drvs_.end()) return known->second;
  store::StorePath sp = store_.parsePath(drvPath);
  store::Derivation drv = store::readDerivationFile(store_.storeDir(), store_.physicalPath(sp));
  DrvNode n;
  for (auto& [name, out] : drv.outputs) {
    if (out.path)
      n.outputs.push_back(store_.printPath(*out.path));
    else
      n.complete = false;
  }
  for (auto& [input, names] : drv.inputDrvs) n.inputs.push_back(store_.printPath(input));
  return drvs_.emplace(drvPath, std::move(n)).first->second;
}

bool CacheStatusChecker::valid(const std::string& path) {
  auto known = valid_.find(path);
  if (known != valid_.end()) return known->second;
  bool v = store_.isValid(store_.parsePath(path));
  valid_.emplace(path, v);
  return v;
}

bool CacheStatusChecker::outputsValid(const std::vector<std::string>& outputs) {
  for (auto& o : outputs)
    if (!valid(o)) return false;
  return true;
}

// The references of `path` when a cache has its narinfo; nullopt if none.
std::optional<std::set<std::string>> CacheStatusChecker::inCache(const std::string& path) {
  auto known = narInfos_.find(path);
  if (known != narInfos_.end()) return known->second;
  std::optional<std::set<std::string>> refs;
  store::StorePath sp = store_.parsePath(path);
  for (auto& c : caches_) {
    if (c->failed) continue;
    try {
      if (auto ni = c->reader->queryNarInfo(sp)) {
        refs.emplace();
        for (auto& r : ni->references) refs->insert(store_.printPath(r));
        break;
      }
    } catch (const Error& e) {
      std::cerr << "kiln eval: cache " << c->url << " is not used any more: " << e.what() << "\n";
      c->failed = true;
    }
  }
  narInfos_.emplace(path, refs);
  return refs;
}

void CacheStatusChecker::addSubstitute(const std::string& path, std::set<std::string>& subs,
                                       std::set<std::string>& seen, bool& unknown) {
  if (!seen.insert(path).second) return;
  if (valid(path)) return;
  auto refs = inCache(path);
  if (!refs) {
    unknown = true;
    return;
  }
  subs.insert(path);
  for (auto& r : *refs)
    if (r != path) addSubstitute(r, subs, seen, unknown);
}

void CacheStatusChecker::visitDrv(const std::string& drvPath, CacheStatus& st,
                                  std::set<std::string>& subs, std::set<std::string>& seen,
                                  bool& unknown) {
  if (!seen.insert(drvPath).second) return;
  const DrvNode& n = node(drvPath);
  if (n.complete && outputsValid(n.outputs)) return;
  bool allCached = n.complete && !caches_.empty();
  for (auto& o : n.outputs) allCached = allCached && inCache(o).has_value();
  if (allCached) {
    for (auto& o : n.outputs) addSubstitute(o, subs, seen, unknown);
    return;
  }
  for (auto& input : n.inputs) visitDrv(input, st, subs, seen, unknown);
  st.neededBuilds.push_back(drvPath);  // after its inputs: dependencies first
}

CacheStatus CacheStatusChecker::check(const std::string& drvPath) {
  CacheStatus st;
  std::set<std::string> subs, seen;
  bool unknown = false;
  visitDrv(drvPath, st, subs, seen, unknown);
  st.neededSubstitutes.assign(subs.begin(), subs.end());
  // By name, then by the whole path, as nix-eval-jobs orders them.
  std::sort(st.neededSubstitutes.begin(), st.neededSubstitutes.end(),
            [](const std::string& a, const std::string& b) {
              auto name = [](const std::string& p) {
                auto slash = p.rfind('/');
                return p.substr(std::min(p.size(), slash + 34));
              };
              return std::pair(name(a), a) < std::pair(name(b), b);
            });
  if (!st.neededBuilds.empty() || unknown)
    st.status = "notBuilt";
  else
    st.status = st.neededSubstitutes.empty() ? "local" : "cached";
  return st;
}

namespace {

// Calls `onLine` with each line of `text` (without its newline) and the
// line parsed as a JSON object (discarded when it is none).
void forEachJsonLine(const std::string& text,
                     const std::function<void(std::string& line, json& j)>& onLine) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    json j = line.empty() || line[0] != '{' ? json(json::value_t::discarded)
                                            : json::parse(line, nullptr, false);
    onLine(line, j);
  }
}

}  // namespace

std::string CacheStatusChecker::annotate(const std::string& text) {
  std::string out;
  forEachJsonLine(text, [&](std::string& line, json& j) {
    if (j.is_object() && j.contains("drvPath")) {
      CacheStatus st = check(j["drvPath"].get<std::string>());
      j["isCached"] = st.status != "notBuilt";
      j["cacheStatus"] = st.status;
      j["neededBuilds"] = st.neededBuilds;
      j["neededSubstitutes"] = st.neededSubstitutes;
      line = j.dump();
    }
    out += line + "\n";
  });
  return out;
}

// ---------------------------------------------------------------- constituents

void ConstituentResolver::add(const std::string& text) {
  forEachJsonLine(text, [&](std::string& line, json& j) {
    if (!j.is_object() || !j.contains("attr")) {
      out_ << line << "\n";
      return;
    }
    std::string attr = j["attr"].get<std::string>();
    if (j.contains("error"))
      errorOf_[attr] = j["error"].is_string() ? j["error"].get<std::string>() : "failed";
    else if (j.contains("drvPath"))
      drvOf_[attr] = j["drvPath"].get<std::string>();
    // Aggregates wait for every job: their named constituents are resolved
    // and, when rewriting, their derivations made to depend on all.
    auto named = j.find("namedConstituents");
    bool hasNamed = named != j.end() && named->is_array() && !named->empty();
    if ((hasNamed || (rewrite_ && j.contains("constituents"))) && !j.contains("error"))
      held_[attr] = line;
    else
      out_ << line << "\n";
  });
}

namespace {

// Resolves aggregates depth first, so one naming another sees whether that
// one failed (and its rewritten `.drv`); a cycle fails every aggregate on
// it.
class Resolution {
 public:
  Resolution(std::map<std::string, json>& held, std::map<std::string, std::string>& drvOf,
             const std::map<std::string, std::string>& errorOf,
             const ConstituentResolver::Rewrite& rewrite)
      : held_(held), drvOf_(drvOf), errorOf_(errorOf), rewrite_(rewrite) {}

  // Why job `attr` cannot be a constituent ("" if it can).
  std::string broken(const std::string& attr) {
    auto h = held_.find(attr);
    if (h != held_.end()) {
      if (active_.count(attr)) return "a dependency cycle between aggregate jobs";
      resolve(attr);
      if (h->second.contains("error")) return "an aggregate whose constituents failed";
      return "";
    }
    auto e = errorOf_.find(attr);
    if (e != errorOf_.end()) return e->second;
    if (!drvOf_.count(attr)) return "does not exist";
    return "";
  }

  void resolve(const std::string& attr) {
    if (done_.count(attr)) return;
    active_.insert(attr);
    json& j = held_.at(attr);
    std::vector<std::string> constituents = j.value("constituents", std::vector<std::string>{});
    std::vector<std::string> named;
    std::string errors;
    for (auto& name : j["namedConstituents"]) {
      std::string child = name.is_string() ? name.get<std::string>() : "";
      std::string why = child == attr ? "the aggregate itself" : broken(child);
      if (why.empty())
        named.push_back(drvOf_.at(child));
      else
        errors += child + ": " + why + "\n";
    }
    constituents.insert(constituents.end(), named.begin(), named.end());
    std::sort(constituents.begin(), constituents.end());
    constituents.erase(std::unique(constituents.begin(), constituents.end()), constituents.end());
    j["constituents"] = constituents;
    j.erase("namedConstituents");
    if (errors.empty() && rewrite_ && !constituents.empty()) rewriteDrv(attr, j, constituents);
    if (!errors.empty()) j["error"] = errors;
    active_.erase(attr);
    done_.insert(attr);
  }

 private:
  // The aggregate's derivation made to depend on all its constituents.
  void rewriteDrv(const std::string& attr, json& j, const std::vector<std::string>& all) {
    try {
      std::string before = j.at("drvPath").get<std::string>();
      RewrittenDrv r = rewrite_(before, all);
      if (r.drvPath == before) return;
      j["drvPath"] = r.drvPath;
      j["outputs"] = r.outputs;
      drvOf_[attr] = r.drvPath;
    } catch (const std::exception& e) {
      j["error"] = std::string("adding the constituents to its derivation failed: ") +
                   e.what();
    }
  }

  std::map<std::string, json>& held_;
  std::map<std::string, std::string>& drvOf_;
  const std::map<std::string, std::string>& errorOf_;
  const ConstituentResolver::Rewrite& rewrite_;
  std::set<std::string> done_, active_;
};

}  // namespace

size_t ConstituentResolver::finish() {
  std::map<std::string, json> held;
  for (auto& [attr, line] : held_) held[attr] = json::parse(line);
  Resolution r(held, drvOf_, errorOf_, rewrite_);
  size_t failed = 0;
  for (auto& [attr, j] : held) r.resolve(attr);
  for (auto& [attr, j] : held) {
    failed += j.contains("error");
    out_ << j.dump() << "\n";
  }
  held_.clear();
  out_.flush();
  return failed;
}

// ---------------------------------------------------------------- the stage

JobOutputStage::JobOutputStage(EvalStoreTarget& target, bool checkCacheStatus,
                               std::vector<std::string> cacheUrls, bool constituents)
    : target_(target), cacheUrls_(std::move(cacheUrls)) {
  if (checkCacheStatus) {
    if (target.readOnly())
      throw Error("--check-cache-status reads the jobs' .drv files from the store: "
                  "it cannot be used with --readonly-mode");
    target.setTransform([this](const std::string& text) {
      if (!checker_) {
        store::LocalStore* store = target_.localStore();
        if (!store) throw Error("--check-cache-status needs kiln's store (not --store-root)");
        checker_ = std::make_unique<CacheStatusChecker>(*store, cacheUrls_);
      }
      return checker_->annotate(text);
    });
  }
  if (constituents) {
    // Named constituents are added to the aggregate's derivation when the
    // `.drv` files are in kiln's store (not --store-root, --readonly-mode).
    ConstituentResolver::Rewrite rewrite;
    if (!target.readOnly() && !target.storeRooted())
      rewrite = [this](const std::string& drvPath, const std::vector<std::string>& named) {
        if (!rewriter_) {
          store::LocalStore* store = target_.localStore();
          rewriter_ = std::make_unique<AggregateRewriter>(
              store->storeDir(), store::fileDrvLoader(store->storeDir(), store->physicalRoot()),
              *target_.writer());
        }
        return rewriter_->rewrite(drvPath, named);
      };
    resolver_ = std::make_unique<ConstituentResolver>(std::cout, std::move(rewrite));
    target.setSink([this](const std::string& text) { resolver_->add(text); });
  }
}

JobOutputStage::~JobOutputStage() {
  if (memFd_ >= 0) ::close(memFd_);
}

void JobOutputStage::afterFork() {
  (void)checker_.release();  // the parent's store connection: not closed here
  target_.setSink(nullptr);
}

int JobOutputStage::workerOutputFd() {
  if (!resolver_) return STDOUT_FILENO;
  if (memFd_ < 0) memFd_ = ::memfd_create("kiln-eval-jobs", MFD_CLOEXEC);
  if (memFd_ < 0) throw SysError("making a memory file for the worker processes' jobs", errno);
  return memFd_;
}

void JobOutputStage::collectWorkers() {
  if (!resolver_ || memFd_ < 0) return;
  if (::lseek(memFd_, 0, SEEK_SET) < 0) throw SysError("rewinding the worker processes' jobs", errno);
  std::string text, buf(1 << 16, '\0');
  for (ssize_t n; (n = ::read(memFd_, buf.data(), buf.size())) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SysError("reading the worker processes' jobs", errno);
    }
    text.append(buf.data(), size_t(n));
    size_t cut = text.rfind('\n');
    if (cut == std::string::npos) continue;
    resolver_->add(text.substr(0, cut + 1));
    text.erase(0, cut + 1);
  }
  if (!text.empty()) resolver_->add(text + "\n");
}

size_t JobOutputStage::finish() { return resolver_ ? resolver_->finish() : 0; }

}  // namespace kiln::cli

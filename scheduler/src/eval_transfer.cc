// The stream a remote evaluation is sent in (eval_transfer.h).
#include "eval_transfer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "kiln/common/hash.h"
#include "kiln/common/logging.h"
#include "kiln/store/compression.h"
#include "kiln/store/nar.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 20;
constexpr int kFormat = 1;

void putRecord(Sink& out, char tag, std::string_view body) {
  char head[9];
  head[0] = tag;
  uint64_t n = body.size();
  for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<char>(n >> (8 * i));
  out.write(std::string_view(head, 9));
  out.write(body);
}

json jobJson(const Job& j) {
  if (!j.error.empty()) return {{"attr", j.attr}, {"error", j.error}};
  json out = {{"attr", j.attr},
          {"name", j.name},
          {"system", j.system},
          {"drvPath", j.drvPath},
          {"outputs", j.outputs},
          {"meta",
           {{"schedulingPriority", j.schedulingPriority},
            {"maxSilent", j.maxSilentSec},
            {"timeout", j.timeoutSec}}}};
  if (j.aggregate) out["constituents"] = j.constituents;
  return out;
}

// The closure of `roots` in `store`, every path after its references.
// Iterative post-order: a path is marked when it is expanded, not when it
// is pushed (a path pushed by two parents is expanded once, where it is
// met first); a self-reference is skipped.
std::vector<store::ValidPathInfo> closureInOrder(
    store::LocalStore& store, const std::vector<store::StorePath>& roots) {
  std::vector<store::ValidPathInfo> out;
  std::set<store::StorePath> done, expanded;
  struct Frame {
    store::StorePath path;
    std::optional<store::ValidPathInfo> info;  // set once expanded
  };
  std::vector<Frame> todo;
  for (auto& root : roots) {
    todo.push_back({root, std::nullopt});
    while (!todo.empty()) {
      Frame& f = todo.back();
      if (f.info) {
        done.insert(f.path);
        out.push_back(std::move(*f.info));
        todo.pop_back();
        continue;
      }
      if (done.count(f.path) || !expanded.insert(f.path).second) {
        todo.pop_back();  // written already, or an ancestor (a cycle)
        continue;
      }
      f.info = store.requirePathInfo(f.path);
      std::vector<store::StorePath> refs;
      for (auto& r : f.info->references)
        if (!(r == f.path) && !done.count(r)) refs.push_back(r);
      for (auto& r : refs) todo.push_back({r, std::nullopt});
    }
  }
  return out;
}

}  // namespace

void writeEvalStream(const EvalOutcome& o, store::LocalStore& store,
                     Sink& out) {
  auto z = store::makeCompressionSink("zstd", out);
  json header{{"format", kFormat},
              {"jobset", o.jobset},
              {"inputsHash", o.inputsHash},
              {"timeMs", o.timeMs},
              {"durationMs", o.durationMs},
              {"skipped", o.skipped},
              {"error", o.error}};
  // A reader that predates `sources` ignores the field and stores the
  // path as any other content-addressed one.
  std::vector<store::StorePath> roots;
  if (!o.sources.empty()) {
    header["sources"] = o.sources;
    roots.push_back(store.parsePath(o.sources));
  }
  putRecord(*z, 'H', header.dump());
  for (auto& j : o.jobs)
    if (j.error.empty()) roots.push_back(store.parsePath(j.drvPath));
  for (auto& info : closureInOrder(store, roots)) {
    json refs = json::array();
    for (auto& r : info.references) refs.push_back(store.printPath(r));
    putRecord(*z, 'P',
              json{{"path", store.printPath(info.path)},
                   {"narHash", info.narHash.to(HashFormat::kNix32)},
                   {"narSize", info.narSize},
                   {"references", refs},
                   {"ca", info.ca}}
                  .dump());
    uint64_t before = 0;
    struct Counting : Sink {
      Sink& next;
      uint64_t& n;
      Counting(Sink& s, uint64_t& c) : next(s), n(c) {}
      void write(std::string_view d) override {
        n += d.size();
        next.write(d);
      }
    } counting(*z, before);
    store::dumpPath(store.physicalPath(info.path), counting);
    if (before != info.narSize)
      throw Error("store path " + store.printPath(info.path) +
                  " changed while it was sent");
  }
  for (auto& j : o.jobs) putRecord(*z, 'J', jobJson(j).dump());
  putRecord(*z, 'E', "");
  z->finish();
}

namespace {

// Reads at most `left` bytes of `in`; skip() drops what was not read.
class BoundedSource : public Source {
 public:
  BoundedSource(Source& in, uint64_t n) : in_(in), left_(n) {}
  size_t read(char* data, size_t len) override {
    if (left_ == 0) return 0;
    size_t n = in_.read(data, std::min<uint64_t>(len, left_));
    if (n == 0) throw FormatError("evaluation result: a NAR is truncated");
    left_ -= n;
    return n;
  }
  void skip() {
    char buf[65536];
    while (left_ > 0) read(buf, sizeof buf);
  }

 private:
  Source& in_;
  uint64_t left_;
};

struct Record {
  char tag = 0;
  uint64_t size = 0;
};

Record getRecordHead(Source& in) {
  char head[9];
  in.readExact(head, 9);
  Record r{head[0], 0};
  for (int i = 0; i < 8; ++i)
    r.size |= uint64_t{static_cast<unsigned char>(head[1 + i])} << (8 * i);
  return r;
}

json getJson(Source& in, const Record& r) {
  if (r.size > kMaxRecordBytes)
    throw FormatError("evaluation result: a record is larger than 1 MiB");
  std::string body(r.size, '\0');
  in.readExact(body.data(), body.size());
  try {
    return json::parse(body);
  } catch (const json::exception& e) {
    throw FormatError(std::string("evaluation result: a record is not "
                                  "JSON: ") +
                      e.what());
  }
}

void readHeader(const json& h, EvalOutcome& o) {
  try {
    if (h.at("format").get<int>() != kFormat)
      throw FormatError("evaluation result: format " + h.at("format").dump() +
                        " is not one this kiln reads (1)");
    h.at("jobset").get_to(o.jobset);
    h.at("inputsHash").get_to(o.inputsHash);
    h.at("timeMs").get_to(o.timeMs);
    h.at("durationMs").get_to(o.durationMs);
    h.at("skipped").get_to(o.skipped);
    h.at("error").get_to(o.error);
    if (h.contains("sources")) h.at("sources").get_to(o.sources);
  } catch (const json::exception& e) {
    throw FormatError(std::string("evaluation result: bad header: ") +
                      e.what());
  }
}

// Adds the path record `p` and its NAR from `in` to `batch` (unless valid).
// The sources (`sources`, the header's) are skipped when over their bound.
void importPath(const json& p, Source& in, store::LocalStore& store,
                store::LocalStore::Batch& batch, const EvalStreamLimits& limits,
                const std::string& sources) {
  std::string path;
  std::optional<store::ValidPathInfo> parsed;
  try {
    path = p.at("path").get<std::string>();
    parsed.emplace(store.parsePath(path));
    parsed->narHash =
        Hash::parse(p.at("narHash").get<std::string>(), HashAlgo::kSha256);
    parsed->narSize = p.at("narSize").get<uint64_t>();
    for (auto& r : p.at("references"))
      parsed->references.insert(store.parsePath(r.get<std::string>()));
    parsed->ca = p.at("ca").get<std::string>();
  } catch (const json::exception& e) {
    throw FormatError(std::string("evaluation result: bad path record: ") +
                      e.what());
  }
  store::ValidPathInfo& info = *parsed;
  if (info.narSize > limits.maxNarBytes)
    throw FormatError("evaluation result: " + path + " is too large");
  if (info.ca.empty())
    throw FormatError("evaluation result: " + path +
                      " is not content-addressed; only derivations and "
                      "sources are accepted from an evaluator");
  BoundedSource nar(in, info.narSize);
  bool oversized = path == sources && info.narSize > limits.maxSourceBytes;
  if (oversized)
    logWarn("evaluation result: the evaluated sources " + path + " (" +
            std::to_string(info.narSize) + " bytes) are larger than " +
            std::to_string(limits.maxSourceBytes) + " bytes; not kept");
  if (!oversized && !store.isValid(info.path) && !batch.queued(info.path))
    batch.addFromNar(info, nar);
  nar.skip();
}

// `o.sources` if the header named them and they are now in `store` as a
// `source` path without references within the bound; else "".
std::string checkedSources(const EvalOutcome& o, store::LocalStore& store,
                           const EvalStreamLimits& limits) {
  if (o.sources.empty()) return "";
  try {
    auto path = store.parsePath(o.sources);
    auto info = store.queryPathInfo(path);
    if (info && path.name() == "source" && info->references.empty() &&
        info->ca.rfind("fixed:r:sha256:", 0) == 0 &&
        info->narSize <= limits.maxSourceBytes)
      return o.sources;
  } catch (const Error&) {
  }
  logWarn("evaluation result: its sources " + o.sources.substr(0, 300) +
          " did not arrive as a bounded `source` path; the evaluation "
          "stands without them");
  return "";
}

}  // namespace

EvalOutcome readEvalStream(Source& raw, store::LocalStore& store,
                           const EvalStreamLimits& limits) {
  auto in = store::makeDecompressionSource("zstd", raw);
  EvalOutcome o;
  Record r = getRecordHead(*in);
  if (r.tag != 'H') throw FormatError("evaluation result: no header first");
  readHeader(getJson(*in, r), o);
  store::LocalStore::Batch batch(store);
  // The `.drv`s the batch checks, parsed: prefetchDrvs takes them from
  // here instead of reading and checking each a second time.
  auto checked = std::make_shared<DrvMap>();
  batch.keepCheckedDerivations(
      [&](const store::StorePath& p, store::Derivation&& drv) {
        checked->insert_or_assign(
            store.printPath(p),
            std::make_shared<const store::Derivation>(std::move(drv)));
      });
  uint64_t paths = 0;
  for (r = getRecordHead(*in); r.tag == 'P'; r = getRecordHead(*in)) {
    if (++paths > limits.maxPaths)
      throw FormatError("evaluation result: too many store paths");
    importPath(getJson(*in, r), *in, store, batch, limits, o.sources);
    // Each commit syncs the file system once: few, large ones.
    if (batch.size() >= 25000) batch.commit();
  }
  batch.commit();
  o.drvs = std::move(checked);
  o.sources = checkedSources(o, store, limits);
  for (; r.tag == 'J'; r = getRecordHead(*in)) {
    if (o.jobs.size() >= limits.maxJobs)
      throw FormatError("evaluation result: too many jobs");
    o.jobs.push_back(parseJobLine(getJson(*in, r).dump()));
  }
  if (r.tag != 'E' || r.size != 0)
    throw FormatError("evaluation result: unexpected record '" +
                      std::string(1, r.tag) + "'");
  char extra;
  if (in->read(&extra, 1) != 0)
    throw FormatError("evaluation result: data after its end");
  return o;
}

}  // namespace kiln::scheduler

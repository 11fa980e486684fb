// `nix show-derivation` JSON, formatted as Nix 2.8 formats it. Written by
// hand rather than through nlohmann::json because derivation strings are
// arbitrary bytes (not necessarily UTF-8) and Nix passes them through raw.
#include "derivation_internal.h"
#include "kiln/common/encoding.h"
#include "kiln/store/derivation.h"

namespace kiln::store {
namespace {

/// Pretty printer for nested objects and arrays with Nix's layout:
/// two-space indent, `"key": value`, empty containers as `[]` / `{}`.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }

  /// Starts a member of the current object; the value follows.
  void key(std::string_view k) {
    element();
    appendJsonString(out_, k);
    out_ += ": ";
    afterKey_ = true;
  }
  void value(std::string_view v) {
    element();
    appendJsonString(out_, v);
  }
  void member(std::string_view k, std::string_view v) {
    key(k);
    value(v);
  }
  template <typename Range>
  void stringArray(std::string_view k, const Range& values,
                   std::string (*toString)(const typename Range::value_type&)) {
    key(k);
    beginArray();
    for (auto& v : values) value(toString(v));
    endArray();
  }

 private:
  void element() {
    if (afterKey_) {
      afterKey_ = false;
      return;
    }
    if (!counts_.empty()) {
      if (counts_.back()++ > 0) out_ += ',';
      newline();
    }
  }
  void open(char c) {
    element();
    out_ += c;
    counts_.push_back(0);
  }
  void close(char c) {
    size_t n = counts_.back();
    counts_.pop_back();
    if (n > 0) newline();
    out_ += c;
  }
  void newline() {
    out_ += '\n';
    out_.append(2 * counts_.size(), ' ');
  }

  std::string& out_;
  std::vector<size_t> counts_;
  bool afterKey_ = false;
};

std::string identity(const std::string& s) { return s; }

void writeDerivation(JsonWriter& w, const StoreDir& sd, const Derivation& drv) {
  w.beginObject();
  w.key("outputs");
  w.beginObject();
  for (auto& [name, o] : drv.outputs) {
    w.key(name);
    w.beginObject();
    if (o.path) w.member("path", sd.printPath(*o.path));
    if (!o.hashAlgo.empty()) w.member("hashAlgo", o.hashAlgo);
    if (!o.hash.empty()) w.member("hash", o.hash);
    w.endObject();
  }
  w.endObject();
  w.key("inputSrcs");
  w.beginArray();
  for (auto& p : drv.inputSrcs) w.value(sd.printPath(p));
  w.endArray();
  w.key("inputDrvs");
  w.beginObject();
  for (auto& [p, outs] : drv.inputDrvs)
    w.stringArray(sd.printPath(p), outs, identity);
  w.endObject();
  w.member("system", drv.platform);
  w.member("builder", drv.builder);
  w.stringArray("args", drv.args, identity);
  w.key("env");
  w.beginObject();
  for (auto& [k, v] : drv.env) w.member(k, v);
  w.endObject();
  w.endObject();
}

}  // namespace

std::string showDerivationJson(const StoreDir& storeDir,
                               const std::map<StorePath, Derivation>& drvs) {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  for (auto& [path, drv] : drvs) {
    w.key(storeDir.printPath(path));
    writeDerivation(w, storeDir, drv);
  }
  w.endObject();
  out += '\n';
  return out;
}

}  // namespace kiln::store

#include "kiln/store/content_address.h"

#include "kiln/common/error.h"

namespace kiln::store {

ContentAddress ContentAddress::parse(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return FormatError("content address '" + std::string(text) + "' " + why);
  };
  ContentAddress ca;
  std::string_view rest;
  if (text.starts_with("text:")) {
    ca.method = CaMethod::kText;
    rest = text.substr(5);
  } else if (text.starts_with("fixed:r:")) {
    ca.method = CaMethod::kRecursive;
    rest = text.substr(8);
  } else if (text.starts_with("fixed:")) {
    ca.method = CaMethod::kFlat;
    rest = text.substr(6);
  } else {
    throw bad("does not start with 'text:' or 'fixed:'");
  }
  auto colon = rest.find(':');
  if (colon == std::string_view::npos) throw bad("lacks '<algo>:<digest>'");
  auto algo = parseHashAlgo(rest.substr(0, colon));
  if (!algo) throw bad("has an unknown hash algorithm");
  if (ca.method == CaMethod::kText && *algo != HashAlgo::kSha256)
    throw bad("is a text hash that is not sha256");
  try {
    ca.hash = Hash::parseBare(rest.substr(colon + 1), *algo);
  } catch (const FormatError& e) {
    throw bad(std::string("has a bad digest: ") + e.what());
  }
  return ca;
}

std::string ContentAddress::render() const {
  if (method == CaMethod::kText) return makeTextCa(hash);
  return makeFixedCa(method == CaMethod::kRecursive, hash);
}

StorePath ContentAddress::makePath(const StoreDir& dir, std::string_view name,
                                   const StorePathSet& refs,
                                   bool selfRef) const {
  if (method == CaMethod::kText) {
    if (selfRef)
      throw FormatError("text object '" + std::string(name) +
                        "' cannot refer to itself");
    return dir.makeTextPath(name, hash, refs);
  }
  return dir.makeFixedOutputPath(name, method == CaMethod::kRecursive, hash,
                                 refs, selfRef);
}

}  // namespace kiln::store

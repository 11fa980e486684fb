// Printing derivations as ATerm (byte-identical to Nix 2.8), classifying
// them, fixed outputs and the `.drv` path (spec §3.1, §3.3, §3.5).
#include "kiln/store/derivation.h"

#include <array>
#include <cstring>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "derivation_internal.h"
#include "kiln/common/encoding.h"
#include "kiln/common/error.h"

namespace kiln::store {

namespace {

// For each byte printAtermString escapes, the letter after its backslash;
// 0 for the others.
constexpr const std::array<char, 256>& kAtermEscape = kNamedEscapes;

#ifdef __SSE2__
// Bit k set when s[k] (of 16) may be a byte printAtermString escapes: `"`,
// `\` or a byte up to CR (one unsigned min for TAB, LF and CR and the
// control bytes among them, which the caller drops by table: rare).
inline unsigned atermEscapeCandidates(const char* s) {
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                cr = _mm_set1_epi8('\r');
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(b, cr), b);  // b <= CR
  __m128i hit = _mm_or_si128(
      low, _mm_or_si128(_mm_cmpeq_epi8(b, quote), _mm_cmpeq_epi8(b, backslash)));
  return static_cast<unsigned>(_mm_movemask_epi8(hit));
}
#endif

// Calls `f(j)`, in order, for each j < n where s[j] is a byte
// printAtermString escapes, until `f` returns false. With SSE2 (every
// x86-64), 32 bytes per step while none is a candidate, then each block's
// candidates from one mask; the tail of a string of 16 bytes or more is its
// last 16 bytes, without the bits of those already looked at.
template <class F>
void forEachAtermEscape(const char* s, size_t n, F f) {
  size_t i = 0;
#ifdef __SSE2__
  // The escapes of the block whose bit 0 is s[at]; false once `f` stops.
  auto block = [&](size_t at, unsigned mask) {
    for (; mask; mask &= mask - 1) {
      size_t j = at + static_cast<size_t>(__builtin_ctz(mask));
      if (kAtermEscape[static_cast<unsigned char>(s[j])] && !f(j)) return false;
    }
    return true;
  };
  for (; i + 32 <= n; i += 32) {
    unsigned lo = atermEscapeCandidates(s + i);
    unsigned hi = atermEscapeCandidates(s + i + 16);
    if (!(lo | hi)) continue;
    if (!block(i, lo) || !block(i + 16, hi)) return;
  }
  for (; i + 16 <= n; i += 16)
    if (!block(i, atermEscapeCandidates(s + i))) return;
  if (i < n && n >= 16) {
    block(i, atermEscapeCandidates(s + n - 16) >> (i - (n - 16)));
    return;
  }
#endif
  for (; i < n; ++i)
    if (kAtermEscape[static_cast<unsigned char>(s[i])] && !f(i)) return;
}

// Writes s[0..n) escaped to `o` (room for 2n bytes); returns the end. The
// runs between escapes are copied whole.
char* writeAtermEscaped(char* o, const char* s, size_t n) {
  size_t run = 0;
  forEachAtermEscape(s, n, [&](size_t j) {
    std::memcpy(o, s + run, j - run);
    o += j - run;
    *o++ = '\\';
    *o++ = kAtermEscape[static_cast<unsigned char>(s[j])];
    run = j + 1;
    return true;
  });
  std::memcpy(o, s + run, n - run);
  return o + (n - run);
}

// Appends `s` escaped, without quotes.
void appendAtermEscaped(std::string& out, std::string_view s) {
  // Most strings have no escapes: appended in one go.
  size_t first = s.size();
  forEachAtermEscape(s.data(), s.size(), [&](size_t j) {
    first = j;
    return false;
  });
  if (first == s.size()) {
    out.append(s);
    return;
  }
  // Room for the worst case from the first escape on, trimmed after.
  size_t old = out.size();
  out.resize(old + first + 2 * (s.size() - first));
  char* o = out.data() + old;
  std::memcpy(o, s.data(), first);
  o = writeAtermEscaped(o + first, s.data() + first, s.size() - first);
  out.resize(static_cast<size_t>(o - out.data()));
}

// printAtermString(out, sd.printPath(p)) without making the path string
// (a base name never needs escaping).
void printAtermPath(std::string& out, const StoreDir& sd, const StorePath& p) {
  out += '"';
  appendAtermEscaped(out, sd.dir());
  out += '/';
  out += p.baseName();
  out += '"';
}

}  // namespace

void printAtermString(std::string& out, std::string_view s) {
  out += '"';
  appendAtermEscaped(out, s);
  out += '"';
}

namespace {

template <typename Range, typename F>
void printList(std::string& out, const Range& range, F&& elem) {
  out += '[';
  bool first = true;
  for (auto& x : range) {
    if (!first) out += ',';
    first = false;
    elem(x);
  }
  out += ']';
}

void printStrings(std::string& out, const auto& strings) {
  printList(out, strings,
            [&](const std::string& s) { printAtermString(out, s); });
}

}  // namespace

namespace detail {

void printAtermInputHashes(std::string& out, const InputHashes& inputs) {
  printList(out, inputs, [&](const auto& i) {
    out += "(\"";  // base16 digits never need escaping
    appendBase16(out, std::string_view(reinterpret_cast<const char*>(i.first.data()),
                                       i.first.size()));
    out += '"';
    out += ',';
    printStrings(out, i.second);
    out += ')';
  });
}

namespace {

void printAtermInputDrvs(std::string& out, const StoreDir& sd, const Derivation& drv) {
  printList(out, drv.inputDrvs, [&](const auto& i) {
    out += '(';
    printAtermPath(out, sd, i.first);
    out += ',';
    printStrings(out, i.second);
    out += ')';
  });
}

}  // namespace

void printAterm(std::string& out, const StoreDir& sd, const Derivation& drv,
                bool maskOutputs, const InputHashes* inputs,
                std::pair<size_t, size_t>* inputsSpan, OutputSlots* slots) {
  out += "Derive(";
  printList(out, drv.outputs, [&](const auto& o) {
    out += '(';
    printAtermString(out, o.first);
    out += ',';
    if (maskOutputs || !o.second.path) {
      if (maskOutputs && slots) slots->emplace_back(out.size(), &o.second);
      out += "\"\"";
    } else {
      printAtermPath(out, sd, *o.second.path);
    }
    out += ',';
    printAtermString(out, o.second.hashAlgo);
    out += ',';
    printAtermString(out, o.second.hash);
    out += ')';
  });
  out += ',';
  size_t inputsBegin = out.size();
  if (inputs)
    printAtermInputHashes(out, *inputs);
  else
    printAtermInputDrvs(out, sd, drv);
  if (inputsSpan) *inputsSpan = {inputsBegin, out.size()};
  out += ',';
  printList(out, drv.inputSrcs,
            [&](const StorePath& p) { printAtermPath(out, sd, p); });
  out += ',';
  printAtermString(out, drv.platform);
  out += ',';
  printAtermString(out, drv.builder);
  out += ',';
  printStrings(out, drv.args);
  out += ',';
  printList(out, drv.env, [&](const auto& kv) {
    out += '(';
    printAtermString(out, kv.first);
    out += ',';
    auto output = maskOutputs ? drv.outputs.find(kv.first) : drv.outputs.end();
    if (output == drv.outputs.end()) {
      printAtermString(out, kv.second);
    } else {
      if (slots) slots->emplace_back(out.size(), &output->second);
      out += "\"\"";
    }
    out += ')';
  });
  out += ')';
}

void atermFromMasked(std::string& out, std::string_view masked,
                     std::pair<size_t, size_t> maskedInputs,
                     const OutputSlots& slots, const StoreDir& sd,
                     const Derivation& drv,
                     std::pair<size_t, size_t>& inputsSpan) {
  size_t at = 0;  // what of `masked` is in `out`
  auto fill = [&](const std::pair<size_t, const DerivationOutput*>& slot) {
    out.append(masked.substr(at, slot.first - at));
    at = slot.first;
    if (!slot.second->path) return;  // deferred: stays ""
    printAtermPath(out, sd, *slot.second->path);
    at += 2;
  };
  auto slot = slots.begin();
  for (; slot != slots.end() && slot->first < maskedInputs.first; ++slot) fill(*slot);
  out.append(masked.substr(at, maskedInputs.first - at));
  inputsSpan.first = out.size();
  printAtermInputDrvs(out, sd, drv);
  inputsSpan.second = out.size();
  at = maskedInputs.second;
  for (; slot != slots.end(); ++slot) fill(*slot);
  out.append(masked.substr(at));
}

std::string printAterm(const StoreDir& sd, const Derivation& drv,
                       bool maskOutputs, const InputHashes* inputs) {
  std::string out;
  out.reserve(1024);
  printAterm(out, sd, drv, maskOutputs, inputs);
  return out;
}

}  // namespace detail

std::string printDerivation(const StoreDir& storeDir, const Derivation& drv,
                            bool maskOutputs) {
  return detail::printAterm(storeDir, drv, maskOutputs, nullptr);
}

DerivationType derivationType(const Derivation& drv) {
  if (drv.outputs.empty()) throw FormatError("derivation has no outputs");
  size_t fixed = 0, floating = 0, addressed = 0, deferred = 0;
  for (auto& [name, o] : drv.outputs) {
    if (!o.hash.empty())
      ++fixed;
    else if (!o.hashAlgo.empty())
      ++floating;
    else if (o.path)
      ++addressed;
    else
      ++deferred;
  }
  size_t n = drv.outputs.size();
  if (fixed) {
    if (n != 1)
      throw FormatError("derivation '" + drv.name +
                        "' has a fixed output among several outputs");
    if (drv.outputs.begin()->first != "out")
      throw FormatError("derivation '" + drv.name +
                        "': a single fixed output must be named 'out'");
    return DerivationType::kFixedOutput;
  }
  if (floating == n) return DerivationType::kFloatingCA;
  if (addressed == n) return DerivationType::kInputAddressed;
  if (deferred == n) return DerivationType::kDeferred;
  throw FormatError("derivation '" + drv.name + "' mixes output kinds");
}

bool isFixedOutput(const Derivation& drv) {
  return drv.outputs.size() == 1 && drv.outputs.begin()->first == "out" &&
         !drv.outputs.begin()->second.hash.empty();
}

DerivationOutput makeFixedOutput(std::string_view outputHash,
                                 std::string_view outputHashAlgo,
                                 std::string_view outputHashMode) {
  bool recursive;
  if (outputHashMode == "flat")
    recursive = false;
  else if (outputHashMode == "recursive")
    recursive = true;
  else
    throw FormatError("invalid value '" + std::string(outputHashMode) +
                      "' for 'outputHashMode' attribute");
  std::optional<HashAlgo> algo;
  if (!outputHashAlgo.empty()) {
    algo = parseHashAlgo(outputHashAlgo);
    if (!algo)
      throw FormatError("unknown hash algorithm '" +
                        std::string(outputHashAlgo) +
                        "' in 'outputHashAlgo' attribute");
  }
  Hash h;
  try {
    h = Hash::parse(outputHash, algo);
  } catch (const FormatError& e) {
    throw FormatError(std::string("invalid 'outputHash' attribute: ") +
                      e.what());
  }
  DerivationOutput o;
  o.hashAlgo =
      std::string(recursive ? "r:" : "") + std::string(hashAlgoName(h.algo()));
  o.hash = h.toHex();
  return o;
}

StorePath fixedOutputPath(const StoreDir& storeDir, std::string_view drvName,
                          const DerivationOutput& out) {
  std::string_view algoName = out.hashAlgo;
  bool recursive = algoName.starts_with("r:");
  if (recursive) algoName.remove_prefix(2);
  auto algo = parseHashAlgo(algoName);
  if (!algo)
    throw FormatError("fixed output of '" + std::string(drvName) +
                      "' has unknown hash algorithm '" + out.hashAlgo + "'");
  if (out.hash.size() != 2 * hashSize(*algo))
    throw FormatError("fixed output of '" + std::string(drvName) +
                      "' has a malformed hash '" + out.hash + "'");
  Hash h(*algo, base16Decode(out.hash));
  return storeDir.makeFixedOutputPath(drvName, recursive, h);
}

void checkDerivationName(std::string_view name) {
  checkStorePathName(name);
  if (name.ends_with(".drv"))
    throw FormatError("derivation name '" + std::string(name) +
                      "' must not end in '.drv'");
  // The .drv file is named <name>.drv, which must itself be a valid name:
  // given a valid `name`, only its length can make it invalid (211 bytes).
  if (name.size() + 4 > 211) checkStorePathName(std::string(name) + ".drv");
}

namespace detail {

StorePath derivationPathOf(const StoreDir& sd, const Derivation& drv,
                           std::string_view aterm) {
  checkDerivationName(drv.name);
  // The text path's type lists inputSrcs ∪ inputDrvs in order: merge the
  // two sorted sets instead of copying them into a third.
  // Reused (no buffer grown per derivation): a `.drv` with inputs has a
  // type of hundreds of bytes; per thread, as addDerivation's buffers.
  thread_local std::string type;
  type.assign("text");
  auto ref = [&](const StorePath& p) {
    type += ':';
    type += sd.dir();
    type += '/';
    type += p.baseName();
  };
  auto src = drv.inputSrcs.begin();
  auto in = drv.inputDrvs.begin();
  while (src != drv.inputSrcs.end() || in != drv.inputDrvs.end()) {
    if (in == drv.inputDrvs.end() ||
        (src != drv.inputSrcs.end() && *src < in->first)) {
      ref(*src++);
    } else {
      if (src != drv.inputSrcs.end() && *src == in->first) ++src;
      ref((in++)->first);
    }
  }
  return sd.makeStorePath(type, hashString(HashAlgo::kSha256, aterm),
                          drv.name + ".drv");
}

}  // namespace detail

StorePath derivationPath(const StoreDir& storeDir, const Derivation& drv) {
  return detail::derivationPathOf(storeDir, drv,
                                  printDerivation(storeDir, drv));
}

std::string hashPlaceholder(std::string_view outputName) {
  auto h =
      hashString(HashAlgo::kSha256, "nix-output:" + std::string(outputName));
  return "/" + h.to(HashFormat::kNix32, false);
}

}  // namespace kiln::store

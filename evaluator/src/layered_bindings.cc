// `//` on attribute sets and the layered sets it makes (value.h;
// docs/evaluator.md, "Layered sets").
#include <algorithm>

#include "eval_services.h"
#include "eval_parts.h"
#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

namespace {

// `left // right` makes a layer when the set under it has at least this
// many attributes...
constexpr uint32_t kMinLayerBase = 8;
// ... and the layer holds at most 1/kLayerRatio as many. Measured on the
// 50,000-package set: 2 keeps the least memory live (1 or 3 keep more:
// layers large enough to be worth flattening later are copied again).
constexpr uint32_t kLayerRatio = 2;

// Merges two sorted runs into `out`, the right one winning on equal names;
// returns how many attributes it wrote.
template <class I, class J>
uint32_t mergeInto(I i, I ie, J j, J je, Attr* out) {
  Attr* o = out;
  while (i != ie && j != je) {
    if (i->name == j->name) {
      *o++ = *j;
      ++j;
      ++i;
    } else if (i->name < j->name) {
      *o++ = *i;
      ++i;
    } else {
      *o++ = *j;
      ++j;
    }
  }
  for (; i != ie; ++i) *o++ = *i;
  for (; j != je; ++j) *o++ = *j;
  return static_cast<uint32_t>(o - out);
}

// The first attribute in [from, end) whose name is not before `name`,
// searched from `from` in doubling steps: the names asked for grow, so
// the answer is usually a few attributes on (a binary search over the
// whole rest costs ~log2 of a 50,000-attribute set's size each).
const Attr* gallop(const Attr* from, const Attr* end, Symbol name) {
  size_t step = 1;
  while (step < static_cast<size_t>(end - from) && from[step].name < name) {
    from += step;
    step <<= 1;
  }
  return std::lower_bound(from, from + std::min(step, static_cast<size_t>(end - from)), name,
                          [](const Attr& x, Symbol n) { return x.name < n; });
}

// How many of `b`'s own attributes `base` has too: one cursor per layer of
// `base` (its own attributes and each set under it), each moved forwards
// by gallop (both sides are sorted). An overlay's `//` onto the layered
// package set counted with a lookup through every layer per attribute:
// ~18 ms of gen-overrides 50,000's serial start.
uint32_t countHidden(const Bindings& b, const Bindings& base) {
  const Attr* cur[AttrIterator::kMaxRuns];
  const Attr* end[AttrIterator::kMaxRuns];
  int runs = 0;
  for (const Bindings* l = &base; l && runs < AttrIterator::kMaxRuns; l = l->base()) {
    cur[runs] = l->ownBegin();
    end[runs++] = l->ownEnd();
  }
  uint32_t hidden = 0;
  for (const Attr* a = b.ownBegin(); a != b.ownEnd(); ++a) {
    for (int r = 0; r < runs; ++r) {
      cur[r] = gallop(cur[r], end[r], a->name);
      if (cur[r] != end[r] && cur[r]->name == a->name) {
        ++hidden;
        break;
      }
    }
  }
  return hidden;
}

// A layer on `base` whose own attributes are [lo, loe) overlaid with the
// right side's.
template <class J>
Bindings* layer(EvalState& st, const Bindings& base, const Attr* lo,
                const Attr* loe, J r, J re, uint32_t rSize) {
  Bindings* b = st.heap().allocBindings(static_cast<uint32_t>(loe - lo) + rSize, true);
  b->size = mergeInto(lo, loe, r, re, b->own);
  st.heap().trimBindings(b);  // capacity = own count
  b->setBase(&base);
  b->size = base.size + b->capacity() - countHidden(*b, base);
  return b;
}

template <class J>
Bindings* update(EvalState& st, const Bindings& left, J r, J re,
                 uint32_t rSize) {
  const Bindings* leftBase = left.base();
  const uint32_t lOwn = leftBase ? left.capacity() : 0;
  const bool fitsBelow = leftBase && (lOwn + rSize) * uint64_t{kLayerRatio} <= leftBase->size;
  const bool newLayer = left.size >= kMinLayerBase &&
                        rSize * uint64_t{kLayerRatio} <= left.size &&
                        left.layers() < Bindings::kMaxLayers;
  // Into left's own layer when that layer is no larger than the right side
  // (a chain of small updates adds no layer) or no layer may be added;
  // else a new layer, which copies nothing of left (on gen-pkgset 50,000
  // this order keeps 20 MB less live than merging whenever it fits).
  if (fitsBelow && (lOwn <= rSize || !newLayer))
    return layer(st, *leftBase, left.ownBegin(), left.ownEnd(), r, re, rSize);
  if (newLayer)
    return layer(st, left, left.ownBegin(), left.ownBegin(), r, re, rSize);
  Bindings* b = st.heap().allocBindings(left.size + rSize);
  b->size = leftBase
                ? mergeInto(left.begin(), left.end(), r, re, b->own)
                : mergeInto(left.ownBegin(), left.ownEnd(), r, re, b->own);
  st.heap().trimBindings(b);  // names both sides have were counted twice
  return b;
}

}  // namespace

Bindings* updateBindings(EvalState& st, const Bindings& left,
                                    const Bindings& right) {
  if (right.layered())
    return update(st, left, right.begin(), right.end(), right.size);
  return update(st, left, right.ownBegin(), right.ownEnd(), right.size);
}

Bindings* updateBindings(EvalState& st, const Bindings& left, const Attr* right,
                                    const Attr* rightEnd) {
  return update(st, left, right, rightEnd,
                static_cast<uint32_t>(rightEnd - right));
}

Bindings* layerBindings(EvalState& st, const Bindings& base, const Attr* right,
                        const Attr* rightEnd) {
  const auto n = static_cast<uint32_t>(rightEnd - right);
  if (base.layers() >= Bindings::kMaxLayers || n == 0)
    return updateBindings(st, base, right, rightEnd);
  return layer(st, base, base.ownBegin(), base.ownBegin(), right, rightEnd, n);
}

}  // namespace kiln::eval

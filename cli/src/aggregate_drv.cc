// Rewriting aggregate derivations to depend on their named constituents
// (aggregate_drv.h).
#include "aggregate_drv.h"

#include "kiln/common/error.h"
#include "kiln/evaluator/eval_state.h"

namespace kiln::cli {

AggregateRewriter::AggregateRewriter(const store::StoreDir& storeDir,
                                     store::DrvLoader loader,
                                     eval::StoreWriter& writer)
    : storeDir_(storeDir),
      loader_(loader),
      hashes_(storeDir, std::move(loader)),
      writer_(writer) {}

RewrittenDrv AggregateRewriter::rewrite(
    const std::string& drvPath, const std::vector<std::string>& constituents) {
  store::StorePath path = storeDir_.parsePath(drvPath);
  store::Derivation drv = loader_(path);
  if (store::derivationType(drv) != store::DerivationType::kInputAddressed)
    throw FormatError("aggregate derivation '" + drvPath +
                      "' is not input-addressed: its constituents cannot be "
                      "added to it");
  RewrittenDrv r{drvPath, {}};
  bool changed = false;
  for (auto& c : constituents) {
    store::StorePath cp = storeDir_.parsePath(c);
    if (!cp.isDerivation())
      throw FormatError("constituent '" + c + "' is not a derivation");
    if (drv.inputDrvs.count(cp)) continue;
    changed = true;
    store::Derivation child = loader_(cp);
    auto& wanted = drv.inputDrvs[cp];
    for (auto& [name, out] : child.outputs) wanted.insert(name);
  }
  if (!changed) {
    for (auto& [name, out] : drv.outputs)
      if (out.path) r.outputs[name] = storeDir_.printPath(*out.path);
    return r;
  }
  // addDerivation computes the outputs again from the new inputs, as the
  // `derivation` builtin does.
  std::string aterm;
  store::StorePath newPath = hashes_.addDerivation(drv, aterm);
  std::set<std::string> refs;
  for (auto& p : drv.inputSrcs) refs.insert(storeDir_.printPath(p));
  for (auto& [p, outs] : drv.inputDrvs) refs.insert(storeDir_.printPath(p));
  r.drvPath = storeDir_.printPath(newPath);
  for (auto& [name, out] : drv.outputs)
    if (out.path) r.outputs[name] = storeDir_.printPath(*out.path);
  writer_.addDerivation(r.drvPath, aterm, refs, r.outputs);
  writer_.flush();
  return r;
}

}  // namespace kiln::cli

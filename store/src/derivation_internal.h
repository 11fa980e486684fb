#pragma once
// Private helpers shared by the derivation sources.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kiln/store/derivation.h"

namespace kiln::store::detail {

/// The ATerm printer; with `inputs`, they replace drv.inputDrvs.
std::string printAterm(const StoreDir& sd, const Derivation& drv,
                       bool maskOutputs, const InputHashes* inputs);
/// Where a masked ATerm has the empty string `""` standing for an output's
/// path: in the outputs list and as the value of the output's variable.
/// In increasing offset order.
using OutputSlots = std::vector<std::pair<size_t, const DerivationOutput*>>;
/// The same, appended to `out` (callers reuse one buffer). With
/// `inputsSpan`, sets it to where the list of inputs is in `out`; with
/// `slots` (and maskOutputs), appends where the masked paths are.
void printAterm(std::string& out, const StoreDir& sd, const Derivation& drv,
                bool maskOutputs, const InputHashes* inputs,
                std::pair<size_t, size_t>* inputsSpan = nullptr,
                OutputSlots* slots = nullptr);
/// The `.drv` ATerm of `drv` made from its masked modulo ATerm (printed
/// with `slots` and its input hashes at `maskedInputs`) once its outputs
/// have their paths (or stay deferred): each slot gets its output's path,
/// and the input hashes make way for drv.inputDrvs. Appended to `out`;
/// `inputsSpan` is set to where the inputs list is in `out`.
void atermFromMasked(std::string& out, std::string_view masked,
                     std::pair<size_t, size_t> maskedInputs,
                     const OutputSlots& slots, const StoreDir& sd,
                     const Derivation& drv,
                     std::pair<size_t, size_t>& inputsSpan);
/// The list of input hashes as printAterm prints it with `inputs`.
void printAtermInputHashes(std::string& out, const InputHashes& inputs);

/// The `.drv` path of `drv` whose printed ATerm is `aterm` (spec §3.5
/// step 5); checks the name. Throws FormatError for an invalid name.
StorePath derivationPathOf(const StoreDir& sd, const Derivation& drv,
                           std::string_view aterm);

}  // namespace kiln::store::detail

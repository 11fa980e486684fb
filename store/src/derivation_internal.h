#pragma once
// Private helpers shared by the derivation sources.

#include <map>
#include <set>
#include <string>
#include <utility>

#include "kiln/store/derivation.h"

namespace kiln::store::detail {

/// The ATerm printer; with `inputs`, they replace drv.inputDrvs.
std::string printAterm(const StoreDir& sd, const Derivation& drv,
                       bool maskOutputs, const InputHashes* inputs);
/// The same, appended to `out` (callers reuse one buffer). With
/// `inputsSpan`, sets it to where the list of inputs is in `out`.
void printAterm(std::string& out, const StoreDir& sd, const Derivation& drv,
                bool maskOutputs, const InputHashes* inputs,
                std::pair<size_t, size_t>* inputsSpan = nullptr);
/// The list of input hashes as printAterm prints it with `inputs`.
void printAtermInputHashes(std::string& out, const InputHashes& inputs);

/// The `.drv` path of `drv` whose printed ATerm is `aterm` (spec §3.5
/// step 5); checks the name. Throws FormatError for an invalid name.
StorePath derivationPathOf(const StoreDir& sd, const Derivation& drv,
                           std::string_view aterm);

}  // namespace kiln::store::detail

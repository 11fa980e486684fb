#pragma once
// Private helpers shared by the derivation sources.

#include <map>
#include <set>
#include <string>

#include "kiln/store/derivation.h"

namespace kiln::store::detail {

/// inputDrvs after hashDerivationModulo: base16 hash -> output names.
using InputHashes = std::map<std::string, std::set<std::string>>;

/// The ATerm printer; with `inputs`, they replace drv.inputDrvs.
std::string printAterm(const StoreDir& sd, const Derivation& drv,
                       bool maskOutputs, const InputHashes* inputs);

/// Appends the escape Nix uses for `"`, `\`, LF, CR or TAB and returns
/// true; returns false (appending nothing) for any other byte. The ATerm
/// and JSON printers share these.
bool appendNamedEscape(std::string& out, char c);

}  // namespace kiln::store::detail

// Built-in Nix files reachable as <nix/...> (Nix's "corepkgs").
#include "corepkgs.h"

namespace kiln::eval {

namespace {

// <nix/fetchurl.nix>: a fixed-output derivation using the builtin fetcher.
constexpr const char* kFetchurlNix = R"NIX(
{ system ? ""
, url
, hash ? ""
, sha256 ? ""
, sha1 ? ""
, sha512 ? ""
, outputHash ?
    if hash != "" then hash
    else if sha512 != "" then sha512
    else if sha1 != "" then sha1
    else sha256
, outputHashAlgo ?
    if hash != "" then ""
    else if sha512 != "" then "sha512"
    else if sha1 != "" then "sha1"
    else "sha256"
, executable ? false
, unpack ? false
, name ? baseNameOf (toString url)
}:

derivation {
  builder = "builtin:fetchurl";
  outputHashMode = if unpack || executable then "recursive" else "flat";
  inherit name url executable unpack outputHash outputHashAlgo;
  system = "builtin";
  urls = [ url ];
  impureEnvVars = [ "http_proxy" "https_proxy" "ftp_proxy" "all_proxy" "no_proxy" ];
  preferLocalBuild = true;
}
)NIX";

}  // namespace

const char* corepkgsFile(std::string_view path) {
  // Compared in place: every file parsed asks (no string built per call).
  constexpr std::string_view kPrefix = kCorepkgsPrefix, kName = "fetchurl.nix";
  if (path.size() == kPrefix.size() + kName.size() && path.starts_with(kPrefix) &&
      path.ends_with(kName))
    return kFetchurlNix;
  return nullptr;
}

}  // namespace kiln::eval

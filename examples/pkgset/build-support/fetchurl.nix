# `fetchurl`, as nixpkgs has it: a fixed-output derivation that downloads
# `url` with curl (from the host, like the compiler) and whose content must
# have the declared hash, so the download may use the network and the
# result is still pure. A file:// URL names a file the building machine
# must see inside its sandbox (host.nix).
{ host, system }:
{ url, sha256, name ? baseNameOf url }:
derivation {
  inherit name system url;
  builder = host.shell;
  args = [ "-c" ''
    set -eu
    echo "fetching $url"
    curl --fail --silent --show-error --location --proto '=file,http,https' --output "$out" "$url"
  '' ];
  PATH = host.PATH;
  outputHashMode = "flat";
  outputHashAlgo = "sha256";
  outputHash = sha256;
  preferLocalBuild = true;
}

#!/bin/bash
# Regenerates fod.tsv and the NARs beside it with real Nix 2.8 (Debian
# nix-bin) in a chroot store: for each input and hash type, the path and CA
# field `nix-store --add-fixed` registers (as `nix path-info --json` shows
# them), the NAR hash (`nix-store --query --hash`) and the content hash in
# every encoding (`nix-hash`, `nix hash to-sri`, `nix hash to-base64`). Run from this folder.
set -euo pipefail
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
export NIX_CONF_DIR=$work/conf
mkdir -p "$NIX_CONF_DIR" && echo "build-users-group =" >"$NIX_CONF_DIR/nix.conf"
in=$work/in
mkdir -p "$in/tree/sub"
printf 'hello\n' >"$in/hello.txt"
printf '#!/bin/sh\necho hi\n' >"$in/tool.sh" && chmod +x "$in/tool.sh"
printf 'a' >"$in/tree/a"
printf '#!/bin/sh\n' >"$in/tree/sub/x.sh" && chmod +x "$in/tree/sub/x.sh"
ln -s ../a "$in/tree/sub/link"
store=$work/store
printf 'name\tmode\talgo\tbase16\tnix32\tbase64\tsri\tpath\tca\tnarHash\n' >fod.tsv
for name in hello.txt tool.sh tree; do
  nix-store --dump "$in/$name" >"$name.nar"
  for mode in flat recursive; do
    [ "$name" = tree ] && [ "$mode" = flat ] && continue
    for algo in md5 sha1 sha256 sha512; do
      flag=--flat; rflag=
      [ "$mode" = recursive ] && flag= && rflag=--recursive
      b16=$(nix-hash --type $algo $flag "$in/$name")
      b32=$(nix-hash --type $algo --base32 $flag "$in/$name")
      sri=$(nix hash to-sri --type $algo "$b16" --extra-experimental-features nix-command)
      b64=$(nix hash to-base64 --type $algo "$b16" --extra-experimental-features nix-command)
      p=$(nix-store --store "$store" --add-fixed $rflag $algo "$in/$name")
      info=$(nix path-info --json --store "$store" "$p" --extra-experimental-features nix-command)
      ca=$(python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ca"])' <<<"$info")
      nh=$(nix-store --store "$store" --query --hash "$p")
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" $mode $algo "$b16" "$b32" "$b64" "$sri" "$p" "$ca" "$nh" >>fod.tsv
    done
  done
done

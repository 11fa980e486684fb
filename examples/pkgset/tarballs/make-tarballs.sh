#!/usr/bin/env bash
# Recreates the release tarballs from their trees under ../src, byte for
# byte (sorted names, zero times and owners, gzip without a name or time),
# and prints the sha256 that pkgs/*.nix must declare.
set -euo pipefail
cd "$(dirname "$0")"
for tree in hello-2.0; do
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -C ../src -cf - "$tree" | gzip -n9 > "$tree.tar.gz"
  echo "$tree.tar.gz sha256 $(nix-hash --type sha256 --flat --base32 "$tree.tar.gz" 2>/dev/null ||
    sha256sum "$tree.tar.gz" | cut -d' ' -f1)"
done

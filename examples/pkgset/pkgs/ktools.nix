# All kutils in one folder of symbolic links, like nixpkgs' symlinkJoin.
{ lib, stdenv, paths }:
stdenv.mkDerivation {
  pname = "ktools";
  version = "1.0";
  buildPhase = "true";
  checkPhase = "true";
  installPhase = ''
    mkdir -p $out/bin
    for p in ${lib.concatStringsSep " " (map toString paths)}; do
      for f in $p/bin/*; do ln -s "$f" $out/bin/; done
    done
  '';
  meta.description = "Every kutil on one PATH";
}

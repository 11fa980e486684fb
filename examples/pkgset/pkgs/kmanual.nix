# The kutils manual, generated from the programs themselves (their --help
# and --version), so it cannot drift from what they do.
{ lib, stdenv, programs }:
stdenv.mkDerivation {
  pname = "kutils-manual";
  version = "1.0";
  src = ../src/kmanual;
  buildInputs = programs;
  buildPhase = "true";
  checkPhase = "true";
  installPhase = ''
    bash mkmanual.sh $out/share/doc/kutils ${lib.concatMapStrings (p: " ${p}/bin/${p.meta.mainProgram}") programs}
  '';
  meta.description = "HTML manual of the kutils, generated from their --help";
}

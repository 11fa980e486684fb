{ lib, stdenv, kupper, kgrep, ksort, kuniq }:
stdenv.mkDerivation {
  pname = "ktally";
  version = "1.0";
  src = ../src/ktally;
  buildInputs = [ kupper kgrep ksort kuniq ];
  meta = {
    description = "Shell tool printing the most frequent words of its input";
    license = lib.licenses.publicDomain;
    mainProgram = "ktally";
  };
}

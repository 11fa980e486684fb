# hello's own test suite, run against the installed program.
{ stdenv, hello }:
stdenv.mkDerivation {
  pname = "hello-tests";
  inherit (hello) version;
  src = ../src/hello-2.0/tests;
  buildPhase = "true";
  checkPhase = "sh run.sh ${hello}/bin/hello | tee result";
  installPhase = "mkdir -p $out && cp result $out/";
  meta.description = "The test suite of hello, against the installed program";
}

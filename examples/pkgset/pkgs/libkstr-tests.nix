# libkstr's test suite, run against the installed library (headers from
# `dev`, the shared library from `out`), as a derivation of its own.
{ lib, stdenv, libkstr }:
stdenv.mkDerivation {
  pname = "libkstr-tests";
  version = libkstr.version;
  src = ../src/libkstr/tests;
  buildInputs = [ libkstr ];
  buildPhase = ''
    $CC $CFLAGS $CPPFLAGS -o test_kstr test_kstr.c $LDFLAGS -lkstr
  '';
  checkPhase = "./test_kstr | tee result";
  installPhase = "mkdir -p $out && cp result $out/";
  meta.description = "The test suite of libkstr, against its installed outputs";
}

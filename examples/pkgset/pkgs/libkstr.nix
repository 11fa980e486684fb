{ lib, stdenv, callPackage }:
stdenv.mkDerivation rec {
  pname = "libkstr";
  version = "1.2.0";
  src = ../src/libkstr;
  outputs = [ "out" "dev" "doc" ];
  # The pkg-config file and headers go to `dev`, the API reference to `doc`.
  makeFlags = "DEVPREFIX=${placeholder "dev"} DOCPREFIX=${placeholder "doc"}";
  passthru.tests.unit = callPackage ./libkstr-tests.nix { };
  meta = {
    description = "Growable strings and small text helpers for C";
    license = lib.licenses.mit;
    outputsToInstall = [ "out" ];
  };
}

# A program released as a tarball, fetched through a fixed-output
# derivation and built with its own configure script.
{ lib, stdenv, fetchurl, callPackage, greeting ? null }:
stdenv.mkDerivation rec {
  pname = "hello";
  version = "2.0";
  src = fetchurl {
    url = "file://${toString ../tarballs}/hello-${version}.tar.gz";
    sha256 = "1rxi13kqq2xvq9cb528wzg2bkgv9fgp9ysl1f9w1gmkch51sa513";
  };
  configureFlags = lib.optionalString (greeting != null) "--with-greeting=${greeting}";
  HELLO_CUSTOM = lib.optionalString (greeting != null) "1";
  passthru.tests.run = callPackage ./hello-tests.nix { };
  meta = {
    description = "Prints a friendly greeting";
    license = lib.licenses.gpl3Plus;
    mainProgram = "hello";
  };
}

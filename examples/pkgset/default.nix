# An example package set, written the way nixpkgs is: a fixed point of
# packages with overlays, `callPackage`, `stdenv.mkDerivation` with phases
# and several outputs, `meta`, `passthru.tests`, and a source tarball
# fetched by a fixed-output derivation. It builds real C software from
# the sources in ./src. Its one impurity, the host's compiler and tools,
# is declared in ./host.nix.
#
# Evaluated as a jobset, every derivation below (and each package's
# passthru.tests, under `tests`) is a job:
#   kiln instantiate examples/pkgset         nix-build examples/pkgset -A kwc
{ system ? builtins.currentSystem, overlays ? [ ] }:
let
  lib = import ./lib;
  host = import ./host.nix;

  # The packages, as a function of the final set (`self`).
  packages = self: {
    inherit lib host;
    stdenv = import ./stdenv { inherit lib host system; };
    callPackage = lib.callPackageWith self;
    fetchurl = import ./build-support/fetchurl.nix { inherit host system; };
    kutil = args: self.callPackage ./pkgs/kutil.nix args;

    libkstr = self.callPackage ./pkgs/libkstr.nix { };
    libkcfg = self.callPackage ./pkgs/libkcfg.nix { };

    kwc = self.kutil { pname = "kwc"; description = "Counts lines, words and bytes"; };
    krev = self.kutil { pname = "krev"; description = "Reverses the characters of each line"; };
    kupper = self.kutil { pname = "kupper"; description = "Upper-cases its input"; };
    kgrep = self.kutil { pname = "kgrep"; description = "Prints the lines containing a fixed string"; };
    kuniq = self.kutil { pname = "kuniq"; description = "Merges repeated adjacent lines"; };
    ksort = self.kutil { pname = "ksort"; description = "Sorts lines"; };
    kfmt = self.kutil { pname = "kfmt"; description = "Fills paragraphs to a width"; };
    kcalc = self.kutil { pname = "kcalc"; description = "Evaluates arithmetic expressions"; libs = "-lm"; };
    kcfg-get = self.kutil {
      pname = "kcfg-get";
      description = "Prints a value of a key = value file";
      extraInputs = [ self.libkcfg ];
      libs = "-lkcfg -lkstr";
    };
    ktally = self.callPackage ./pkgs/ktally.nix { };

    hello = self.callPackage ./pkgs/hello.nix { };

    kutils = [ self.kwc self.krev self.kupper self.kgrep self.kuniq self.ksort self.kfmt self.kcalc self.kcfg-get ];
    ktools = self.callPackage ./pkgs/ktools.nix { paths = self.kutils ++ [ self.ktally ]; };
    kmanual = self.callPackage ./pkgs/kmanual.nix { programs = self.kutils ++ [ self.ktally ]; };
    site = self.callPackage ./pkgs/site.nix {
      packages = [ self.libkstr self.libkcfg self.hello self.ktally ] ++ self.kutils;
    };
  };

  # Variants, added the way a user's overlay would: one package overridden,
  # one built differently.
  variants = self: super: {
    kwc-static = super.kwc.override { static = true; };
    hello-kiln = super.hello.override { greeting = "Hello,kiln!"; };
  };

  pkgs = lib.fix (lib.extends (lib.composeManyExtensions ([ variants ] ++ overlays)) packages);

  jobNames = [
    "libkstr" "libkcfg" "kwc" "krev" "kupper" "kgrep" "kuniq" "ksort" "kfmt"
    "kcalc" "kcfg-get" "ktally" "hello" "ktools" "kmanual" "site" "kwc-static"
    "hello-kiln"
  ];
in
lib.genAttrs jobNames (n: pkgs.${n}) // {
  # Each package's passthru.tests, as jobs of their own.
  tests = {
    recurseForDerivations = true;
    libkstr = pkgs.libkstr.tests.unit;
    hello = pkgs.hello.tests.run;
  };
}

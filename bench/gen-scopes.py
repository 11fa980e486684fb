#!/usr/bin/env python3
"""A package set of scopes (issue 36): most packages live in language
package sets built with `makeScope`/`newScope`, in several variants, as
nixpkgs' python, haskell and perl sets are.

Usage: gen-scopes.py N OUTDIR [--seed S]

OUTDIR/default.nix evaluates to a top level of N/10 packages and three
language scopes holding the rest:

- `scope.nix`: `makeScope newScope f` giving `callPackage`, `newScope`,
  `overrideScope` and `packages`, written for this set;
- `languages/<lang>.nix` (`python`, `haskell`, `perl`): `self: { ... }`
  with the language's packages, each `self.callPackage ({ buildLangPackage,
  dep1, ... }: buildLangPackage { ... }) { }` where dependencies are other
  packages of the same scope (up to 5 of the 100 before it) or of the top
  level; bodies use `with self;` and `with lib;` (nested `with` scopes);
- variants built over interpreter versions: two versions per language
  (`python310Packages`, `python311Packages`, ...), each the scope over its
  interpreter, so each language package is evaluated twice; each variant
  is a job set (`recurseForDerivations`) holding its packages and, for
  every 10th, a `withDocs` variant from the scope's `overrideScope`;
- the top level: `pkgs.callPackage` from `newScope` too, every package a job.

Output is deterministic for N and the seed; N packages give about
1.1 N jobs.
"""
import argparse
import os
import random

SCOPE = r'''# Scopes with their own callPackage, written for this set.
let
  b = builtins;
  callWith = auto: fn: args:
    let f = if b.isFunction fn then fn else import fn;
    in f (b.intersectAttrs (b.functionArgs f) auto // args);
  makeScope = newScope: f:
    let
      self = f self // {
        newScope = scope: newScope (self // scope);
        callPackage = self.newScope { };
        overrideScope = g: makeScope newScope (final: let prev = f final; in prev // g final prev);
        packages = f;
      };
    in self;
in { inherit callWith makeScope; }
'''

LIB = r'''{
  optional = c: x: if c then [ x ] else [ ];
  optionals = c: xs: if c then xs else [ ];
  optionalAttrs = c: s: if c then s else { };
  versionSuffix = v: builtins.replaceStrings [ "." ] [ "" ] v;
  mapNames = f: s: builtins.listToAttrs (map (n: { name = f n; value = s.${n}; }) (builtins.attrNames s));
}
'''

DEFAULT = r'''let
  b = builtins;
  scopes = import ./scope.nix;
  lib = import ./lib.nix;
  mkDrv = { pname, version, deps ? [ ], extra ? { } }: derivation ({
    name = "${pname}-${version}";
    system = "x86_64-linux";
    builder = "/bin/sh";
    args = [ "-c" "echo ${pname} > $out" ];
    deps = map toString deps;
  } // extra) // { inherit pname version; };
  pkgs = scopes.makeScope (extra: scopes.callWith (pkgs // extra)) (self:
    { inherit lib mkDrv; } // import ./top-level.nix self // languages self);
  interpreters = {
    python = [ "3.10" "3.11" ];
    haskell = [ "9.4" "9.6" ];
    perl = [ "5.36" "5.38" ];
  };
  languages = top: b.foldl' (acc: lang: acc // b.listToAttrs (map (v: {
      name = "${lang}${lib.versionSuffix v}Packages";
      value = top.callPackage ./languages/builder.nix { inherit top lang; version = v; };
    }) interpreters.${lang})) { } (b.attrNames interpreters);
  langNames = b.concatMap (lang: map (v: "${lang}${lib.versionSuffix v}Packages")
    interpreters.${lang}) (b.attrNames interpreters);
in removeAttrs pkgs ([ "lib" "mkDrv" "callPackage" "newScope" "overrideScope" "packages" ] ++ langNames)
  // b.listToAttrs (map (n: {
    name = n;
    value = pkgs.${n}.jobs // { recurseForDerivations = true; };
  }) langNames)
'''

BUILDER = r'''{ top, mkDrv, lib, lang, version }:
let
  b = builtins;
  scopes = import ../scope.nix;
  own = import (./. + "/${lang}.nix");
  interpreter = mkDrv { pname = lang; inherit version; };
  set = scopes.makeScope (extra: scopes.callWith (top // set // extra)) (self: {
    inherit interpreter;
    buildLangPackage = { pname, version, deps ? [ ], doc ? false }:
      mkDrv {
        pname = "${lang}${lib.versionSuffix interpreter.version}-${pname}";
        inherit version;
        deps = [ interpreter ] ++ deps;
        extra = lib.optionalAttrs doc { withDocs = "1"; };
      };
  } // own self);
  docs = set.overrideScope (final: prev: {
    buildLangPackage = a: prev.buildLangPackage (a // { doc = true; });
  });
  names = b.attrNames (own set);
in set // {
  jobs = b.listToAttrs (map (n: { name = n; value = set.${n}; }) names
    ++ map (n: { name = "${n}-withDocs"; value = docs.${n}; })
      (b.filter (n: b.match "p[0-9]*0" n != null) names));
}
'''


def lang_file(lang, count, top, rng, f):
    f.write("self: with self; {\n")
    for i in range(count):
        lo = max(0, i - 100)
        deps = sorted(set("p%d" % rng.randrange(lo, i) for _ in range(min(i, rng.randint(0, 5)))))
        tdeps = sorted(set("t%d" % rng.randrange(top) for _ in range(rng.randint(0, 2))))
        formals = "".join(", %s" % d for d in deps + tdeps)
        body = ("with lib; buildLangPackage { pname = \"p%d\"; version = \"%d.%d\";"
                " deps = [ %s ] ++ optional (%d > 3) %s; }"
                % (i, i % 5, i % 23, " ".join(deps + tdeps), i % 7,
                   deps[0] if deps else "interpreter"))
        f.write("  p%d = callPackage ({ buildLangPackage, lib, interpreter%s }: %s) { };\n"
                % (i, formals, body))
    f.write("}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=36)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(os.path.join(a.outdir, "languages"), exist_ok=True)
    for name, text in (("scope.nix", SCOPE), ("lib.nix", LIB), ("default.nix", DEFAULT),
                       ("languages/builder.nix", BUILDER)):
        with open(os.path.join(a.outdir, name), "w") as f:
            f.write(text)
    top = max(1, a.n // 10)
    with open(os.path.join(a.outdir, "top-level.nix"), "w") as f:
        f.write("self: with self; {\n")
        for i in range(top):
            deps = sorted(set("t%d" % rng.randrange(i) for _ in range(min(i, rng.randint(0, 3)))))
            f.write('  t%d = callPackage ({ mkDrv%s }: mkDrv { pname = "t%d"; version = "%d";'
                    ' deps = [ %s ]; }) { };\n'
                    % (i, "".join(", " + d for d in deps), i, i % 10, " ".join(deps)))
        f.write("}\n")
    # The languages hold the rest, python the largest as in nixpkgs.
    rest = a.n - top
    for lang, share in (("python", 0.5), ("haskell", 0.35), ("perl", 0.15)):
        with open(os.path.join(a.outdir, "languages", lang + ".nix"), "w") as f:
            # Each language package is evaluated in two interpreter variants.
            lang_file(lang, max(1, int(rest * share / 2)), top, rng, f)


if __name__ == "__main__":
    main()

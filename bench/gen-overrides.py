#!/usr/bin/env python3
"""An override-heavy package set (issue 36): every package is overridable
and the set is the base plus ten overlays, as a distribution's variants are.

Usage: gen-overrides.py N OUTDIR [--seed S] [--overlays K]

OUTDIR/default.nix evaluates to the fixed point of `base.nix` extended by K
overlays (default 10), each `final: prev: { ... }`:

- `fixpoint.nix` has its own `fix`, `extends`, `composeOverlays`, a
  `makeOverridable` that gives `.override` and keeps it through
  `.overrideAttrs`, and `mkDrv` whose result has `overrideAttrs` (a function
  of the previous attributes, or of `finalAttrs` and `prevAttrs`);
- `base.nix`: N packages, each `makeOverridable` of a function of its
  dependencies (up to 4 of the 150 before it) and flags;
- overlay k rewrites a different tenth of the packages: `.overrideAttrs`
  adding a patch or bumping the version, `.override` switching a flag or a
  dependency, or wrapping a package in a `symlinkJoin`-like derivation; a
  package is touched by several overlays, so chains of 3-6 overrides are
  common;
- the result's `extend` makes two variant sets (`static` and `debug`, each
  an overlay over the whole set changing every package's flags through
  `.override`), from which every 25th package is also a job (nested sets
  marked `recurseForDerivations`).

Output is deterministic for N, K and the seed.
"""
import argparse
import os
import random

FIXPOINT = r'''# A fixed point with overlays, written for this set.
let
  b = builtins;
in rec {
  fix = f: let x = f x; in x;
  extends = overlay: f: final: let prev = f final; in prev // overlay final prev;
  composeOverlays = overlays: f: b.foldl' (acc: o: extends o acc) f overlays;
  makeOverridable = f: args:
    let
      result = f args;
      override = newArgs:
        makeOverridable f (args // (if b.isFunction newArgs then newArgs args else newArgs));
    in if b.isAttrs result then result // {
      inherit override;
      overrideAttrs = g: let r = result.overrideAttrs g; in r // { inherit override; };
    } else result;
  mkDrv = attrs:
    let
      make = a:
        let
          drv = derivation (removeAttrs a [ "passthru" "meta" ]);
        in drv // {
          inherit (a) pname version;
          meta = a.meta or { };
          passthru = a.passthru or { };
          overrideAttrs = g:
            let
              step = if b.isFunction (g { }) then g drv a else g a;
            in make (a // step);
        };
    in make ({
      name = "${attrs.pname}-${attrs.version}";
      system = "x86_64-linux";
      builder = "/bin/sh";
      args = [ "-c" "echo $pname $version $flags > $out" ];
    } // attrs);
  setWithExtend = f:
    let self = fix f; in self // {
      extend = o: setWithExtend (extends o f);
    };
}
'''

DEFAULT = r'''let
  fp = import ./fixpoint.nix;
  base = import ./base.nix fp;
  overlays = map (i: import (./overlays + "/o${toString i}.nix") fp)
    (builtins.genList (i: i) %(k)d);
  pkgs = fp.setWithExtend (fp.composeOverlays overlays base);
  variant = name: flag: (pkgs.extend (final: prev:
    builtins.mapAttrs (n: p:
      if builtins.isAttrs p && p ? override then p.override (a: { flags = a.flags ++ [ flag ]; })
      else p) prev)).picked // { recurseForDerivations = true; };
in (removeAttrs pkgs [ "extend" "picked" ]) // {
  static = variant "static" "--enable-static";
  debug = variant "debug" "-g";
}
'''


def deps_of(i, rng):
    lo = max(0, i - 150)
    return sorted(set(rng.randrange(lo, i) for _ in range(min(i, rng.randint(0, 4)))))


def base(n, rng, f):
    f.write("fp: final:\nlet\n  inherit (fp) makeOverridable mkDrv;\nin {\n")
    for i in range(n):
        deps = deps_of(i, rng)
        formals = "".join(", p%d" % d for d in deps)
        dep_list = " ".join("p%d" % d for d in deps)
        args = "".join(" p%d = final.pkg%d;" % (d, d) for d in deps)
        f.write('  pkg%d = makeOverridable ({ flags%s }: mkDrv { pname = "pkg%d";'
                ' version = "1.%d"; flags = toString flags; buildInputs = [ %s ]; })'
                ' { flags = [ "--opt%d" ];%s };\n'
                % (i, formals, i, i % 17, dep_list, i % 3, args))
    picked = " ".join('pkg%d = final.pkg%d;' % (i, i) for i in range(0, n, 25))
    f.write("  picked = { %s };\n}\n" % picked)


def overlay(k, n, rng, f):
    f.write("fp: final: prev: {\n")
    for i in range(k % 10, n, 10):
        kind = rng.randrange(4)
        p = "prev.pkg%d" % i
        if kind == 0:
            body = ('%s.overrideAttrs (old: { patches = (old.patches or [ ]) ++ [ "fix-%d-%d.patch" ]; })'
                    % (p, k, i))
        elif kind == 1:
            body = ('%s.overrideAttrs (finalAttrs: prevAttrs: { version = prevAttrs.version + ".%d"; })'
                    % (p, k))
        elif kind == 2:
            body = '%s.override (a: { flags = a.flags ++ [ "--overlay%d" ]; })' % (p, k)
        else:
            body = ('fp.mkDrv { pname = "pkg%d-wrapped"; version = %s.version;'
                    ' paths = [ %s ]; passthru.unwrapped = %s; }' % (i, p, p, p))
            body = "(%s) // { override = %s.override; }" % (body, p)
        f.write("  pkg%d = %s;\n" % (i, body))
    f.write("}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--overlays", type=int, default=10)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(os.path.join(a.outdir, "overlays"), exist_ok=True)
    with open(os.path.join(a.outdir, "fixpoint.nix"), "w") as f:
        f.write(FIXPOINT)
    with open(os.path.join(a.outdir, "default.nix"), "w") as f:
        f.write(DEFAULT % {"k": a.overlays})
    with open(os.path.join(a.outdir, "base.nix"), "w") as f:
        base(a.n, rng, f)
    for k in range(a.overlays):
        with open(os.path.join(a.outdir, "overlays", "o%d.nix" % k), "w") as f:
            overlay(k, a.n, rng, f)


if __name__ == "__main__":
    main()

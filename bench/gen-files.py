#!/usr/bin/env python3
"""A package set of many files (issue 36): one directory per package, found
by `builtins.readDir`, as nixpkgs' `pkgs/by-name` is.

Usage: gen-files.py N OUTDIR [--seed S]

OUTDIR holds:

- `by-name/<2 letters>/<name>/package.nix`: one function per package,
  taking `mkPackage`, `fetchSource` and its dependencies as formals (up to
  4 of the packages before it);
- `by-name/<2 letters>/<name>/sources.json` for every third package, read
  with `fromJSON (readFile ./sources.json)`;
- `by-name/<2 letters>/<name>/meta.nix` for every fifth, `import`ed by its
  package;
- `top-level/by-name.nix`: walks `by-name` with `readDir` (shards, then
  package directories), `callPackage ./by-name/xx/name/package.nix { }` for
  each, `pathExists` checks as nixpkgs' check does;
- `top-level/aliases.nix` and `top-level/overrides.nix`: a handful of
  renames and per-package arguments given to `callPackage ... { arg = ...; }`
  beside the automatic ones;
- `default.nix`: `callPackage` with `functionArgs`/`intersectAttrs`, the
  fixed point, and every package a job.

Each package has a fixed-output source (`fetchSource`, its hash from the
package's name), so N packages give 2N derivations. Deterministic for N and
the seed.
"""
import argparse
import hashlib
import json
import os
import random

DEFAULT = r'''let
  b = builtins;
  callPackageWith = set: fn: extra:
    let
      f = if b.isFunction fn then fn else import fn;
      auto = b.intersectAttrs (b.functionArgs f) set;
    in f (auto // extra);
  pkgs = let
    self = {
      callPackage = callPackageWith self;
      mkPackage = import ./top-level/mk-package.nix;
      fetchSource = import ./top-level/fetch-source.nix;
    } // import ./top-level/by-name.nix { inherit (self) callPackage; root = ./by-name; }
      // import ./top-level/overrides.nix self;
  in self;
in removeAttrs pkgs [ "callPackage" "mkPackage" "fetchSource" ]
  // import ./top-level/aliases.nix pkgs
'''

BY_NAME = r'''{ callPackage, root }:
let
  b = builtins;
  dirsOf = dir: b.attrNames (b.removeAttrs (b.readDir dir) [ ]);
  shard = s:
    let
      names = b.filter (n: b.pathExists (root + "/${s}/${n}/package.nix")) (dirsOf (root + "/${s}"));
    in map (n: { name = n; value = callPackage (root + "/${s}/${n}/package.nix") { }; }) names;
in b.listToAttrs (b.concatLists (map shard (dirsOf root)))
'''

MK_PACKAGE = r'''{ pname, version, src, buildInputs ? [ ], meta ? { }, ... }@args:
derivation (removeAttrs args [ "meta" ] // {
  name = "${pname}-${version}";
  system = "x86_64-linux";
  builder = "/bin/sh";
  args = [ "-c" "echo ${pname} > $out" ];
  buildInputs = map toString buildInputs;
  description = meta.description or "";
}) // { inherit meta; }
'''

FETCH = r'''{ name, url, sha256 }:
derivation {
  inherit name url;
  system = "x86_64-linux";
  builder = "/bin/sh";
  args = [ "-c" "echo fetched > $out" ];
  outputHashMode = "flat";
  outputHashAlgo = "sha256";
  outputHash = sha256;
}
'''


def name_of(i):
    syll = ["ba", "ke", "lo", "mi", "nu", "ra", "so", "ti", "vo", "ze"]
    s, j = "", i
    while True:
        s += syll[j % 10]
        j //= 10
        if j == 0:
            break
    return s + str(i)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def package(i, n, rng, out):
    name = name_of(i)
    d = os.path.join(out, "by-name", name[:2], name)
    # Dependencies anywhere before it in the set (the fixed point sorts
    # out the order), so there is no cycle.
    deps = sorted(set(name_of(rng.randrange(i)) for _ in range(min(i, rng.randint(0, 4)))))
    formals = "".join(", %s" % x for x in deps)
    sha = hashlib.sha256(name.encode()).hexdigest()
    version = '"%d.%d"' % (i % 9, i % 31)
    lets = ""
    if i % 3 == 0:
        write(os.path.join(d, "sources.json"),
              json.dumps({"version": "%d.%d.%d" % (i % 4, i % 7, i % 11),
                          "url": "https://example.org/%s.tar.gz" % name,
                          "sha256": sha}))
        lets += "  sources = builtins.fromJSON (builtins.readFile ./sources.json);\n"
        version = "sources.version"
    meta = '{ description = "Package %s"; }' % name
    if i % 5 == 0:
        write(os.path.join(d, "meta.nix"),
              '{ description = "Package %s, with its own meta file";\n'
              '  homepage = "https://example.org/%s"; license = "mit"; }\n' % (name, name))
        meta = "import ./meta.nix"
    text = ("{ mkPackage, fetchSource%s }:\nlet\n%s  version = %s;\nin mkPackage {\n"
            '  pname = "%s";\n  inherit version;\n'
            '  src = fetchSource { name = "%s-src"; url = "https://example.org/%s.tar.gz";'
            ' sha256 = "%s"; };\n  buildInputs = [ %s ];\n  meta = %s;\n}\n'
            % (formals, lets, version, name, name, name, sha,
               " ".join(deps), meta))
    write(os.path.join(d, "package.nix"), text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=36)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    top = os.path.join(a.outdir, "top-level")
    write(os.path.join(a.outdir, "default.nix"), DEFAULT)
    write(os.path.join(top, "by-name.nix"), BY_NAME)
    write(os.path.join(top, "mk-package.nix"), MK_PACKAGE)
    write(os.path.join(top, "fetch-source.nix"), FETCH)
    for i in range(a.n):
        package(i, a.n, rng, a.outdir)
    # A few packages called again with arguments of their own, as nixpkgs'
    # all-packages.nix does beside by-name.
    with open(os.path.join(top, "overrides.nix"), "w") as f:
        f.write("self: {\n")
        for i in range(7, a.n, 97):
            f.write('  "%s-custom" = self.callPackage ./../by-name/%s/%s/package.nix { mkPackage = a: self.mkPackage (a // { custom = "yes"; }); };\n'
                    % (name_of(i), name_of(i)[:2], name_of(i)))
        f.write("}\n")
    with open(os.path.join(top, "aliases.nix"), "w") as f:
        f.write("pkgs: {\n")
        for i in range(3, a.n, 211):
            f.write('  "old-%s" = pkgs."%s";\n' % (name_of(i), name_of(i)))
        f.write("}\n")


if __name__ == "__main__":
    main()

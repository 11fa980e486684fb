#!/usr/bin/env python3
"""Generate a package set written the way nixpkgs is written (issue 12).

Usage: gen-pkgset.py N OUTDIR [--seed S] [--deps K] [--scope-every M]
                      [--shape window|layered] [--core C] [--layers L]

OUTDIR/default.nix evaluates (as `nix-instantiate OUTDIR/default.nix` or
`kiln eval OUTDIR/default.nix`) to the fixed point of a package set:

- `lib.nix`: helpers as nixpkgs' lib has them (fix, extends,
  composeExtensions, makeOverridable, callPackageWith, makeScope,
  extendDerivation, optionalAttrs, concatMapStrings, versionAtLeast through
  compareVersions, escapeShellArg through replaceStrings, unique, ...);
- `stdenv.nix`: a `stdenv` derivation with `mkDerivation` (phases, hooks,
  multiple outputs, removeAttrs of meta/passthru, meta checks, passthru,
  overrideAttrs) and `fetchurl` (fixed-output derivations);
- `all-packages.nix`: an overlay `self: super: with self; { ... }` calling
  every package through `callPackage` (functionArgs + intersectAttrs against
  the whole set, as nixpkgs does);
- `pkgs/<bucket>/pkgI.nix`: one function per package, with its
  dependencies as formals: with `--shape window` (the default) up to K of
  the 200 packages before it; with `--shape layered` a core of C packages
  (window-shaped among themselves, as a stdenv bootstrap and its base
  libraries are) and the others in L layers, each depending on 1-2 core
  packages and 1-3 packages of the layers below (see `layered_deps`);
- overlays composed with composeManyExtensions: the packages, then
  overrides (`.override`, `.overrideAttrs`);
- every M-th package lives in the `pythonPackages` scope (makeScope,
  `recurseIntoAttrs`), so job enumeration descends into a nested set.

N packages give about 2N derivations (each package's `src` is a
fetchurl fixed-output derivation). Top-level jobs are the packages, the
scope's packages (`pythonPackages.pkgI`) and `stdenv`; everything else at
the top (lib, callPackage, ...) is not a derivation and is skipped by both
tools. Output is deterministic for a given N, seed and options.
"""
import argparse
import hashlib
import os
import random
import sys

LIB_NIX = r'''# A lib written as nixpkgs' lib is: the helpers a package set needs.
let
  b = builtins;
  lib = rec {
    id = x: x;
    const = x: _: x;
    flip = f: a: c: f c a;
    inherit (b) foldl' elem filter length head tail attrNames attrValues
      concatStringsSep concatLists concatMap replaceStrings compareVersions
      removeAttrs intersectAttrs listToAttrs mapAttrs isAttrs isList isString
      genericClosure sort groupBy;

    fix = f: let x = f x; in x;
    extends = f: rattrs: self: let super = rattrs self; in super // f self super;
    composeExtensions = f: g: final: prev:
      let fApplied = f final prev;
          prev' = prev // fApplied;
      in fApplied // g final prev';
    composeManyExtensions = foldl' (x: y: composeExtensions x y) (final: prev: { });

    isFunction = f: b.isFunction f || (f ? __functor && isFunction (f.__functor f));
    functionArgs = f:
      if f ? __functor then f.__functionArgs or (functionArgs (f.__functor f))
      else b.functionArgs f;
    setFunctionArgs = f: args: { __functor = self: f; __functionArgs = args; };

    optional = cond: x: if cond then [ x ] else [ ];
    optionals = cond: xs: if cond then xs else [ ];
    optionalString = cond: s: if cond then s else "";
    optionalAttrs = cond: as: if cond then as else { };
    nameValuePair = name: value: { inherit name value; };
    genAttrs = names: f: listToAttrs (map (n: nameValuePair n (f n)) names);
    filterAttrs = pred: set:
      listToAttrs (concatMap (name: let v = set.${name}; in
        if pred name v then [ (nameValuePair name v) ] else [ ]) (attrNames set));
    mapAttrsToList = f: attrs: map (name: f name attrs.${name}) (attrNames attrs);
    attrByPath = path: default: set:
      if path == [ ] then set
      else if set ? ${head path} then attrByPath (tail path) default set.${head path}
      else default;
    recurseIntoAttrs = attrs: attrs // { recurseForDerivations = true; };

    concatMapStrings = f: list: concatStringsSep "" (map f list);
    concatMapStringsSep = sep: f: list: concatStringsSep sep (map f list);
    hasPrefix = pref: str: b.substring 0 (b.stringLength pref) str == pref;
    hasSuffix = suffix: content:
      let lc = b.stringLength content; ls = b.stringLength suffix;
      in lc >= ls && b.substring (lc - ls) lc content == suffix;
    escapeShellArg = arg: "'${replaceStrings [ "'" ] [ "'\\''" ] (toString arg)}'";
    escapeShellArgs = concatMapStringsSep " " escapeShellArg;
    toUpper = replaceStrings
      [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ]
      [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ];
    unique = foldl' (acc: e: if elem e acc then acc else acc ++ [ e ]) [ ];
    versionOlder = v1: v2: compareVersions v2 v1 == 1;
    versionAtLeast = v1: v2: !versionOlder v1 v2;

    getOutput = output: pkg:
      if !pkg ? outputSpecified || !pkg.outputSpecified
      then pkg.${output} or pkg.out or pkg
      else pkg;
    getDev = getOutput "dev";
    getLib = getOutput "lib";
    getBin = getOutput "bin";
    makeBinPath = concatMapStringsSep ":" (p: "${getBin p}/bin");

    makeOverridable = f: origArgs:
      let
        result = f origArgs;
        copyArgs = g: setFunctionArgs g (functionArgs f);
        overrideWith = newArgs:
          origArgs // (if isFunction newArgs then newArgs origArgs else newArgs);
        overrideResult = g: makeOverridable (copyArgs (args: g (f args))) origArgs;
      in
      if b.isAttrs result then
        result // {
          override = newArgs: makeOverridable f (overrideWith newArgs);
          ${if result ? overrideAttrs then "overrideAttrs" else null} =
            fdrv: overrideResult (x: x.overrideAttrs fdrv);
        }
      else result;

    callPackageWith = autoArgs: fn: args:
      let
        f = if isFunction fn then fn else import fn;
        fargs = functionArgs f;
        allArgs = intersectAttrs fargs autoArgs // args;
        missing = filterAttrs (name: hasDefault: !hasDefault)
          (removeAttrs fargs (attrNames allArgs));
      in
      if missing == { } then makeOverridable f allArgs
      else throw "callPackage: missing arguments ${concatStringsSep ", " (attrNames missing)}";

    makeScope = newScope: f:
      let self = f self // {
            newScope = scope: newScope (self // scope);
            callPackage = self.newScope { };
            packages = f;
          };
      in self;

    # A derivation with extra attributes, every output carrying them too.
    extendDerivation = condition: passthru: drv:
      let
        outputs = drv.outputs or [ "out" ];
        commonAttrs = drv // listToAttrs outputsList
          // { all = map (x: x.value) outputsList; } // passthru;
        outputToAttrListElement = outputName: {
          name = outputName;
          value = commonAttrs // {
            inherit (drv.${outputName}) type outputName;
            outputSpecified = true;
            drvPath = assert condition; drv.${outputName}.drvPath;
            outPath = assert condition; drv.${outputName}.outPath;
          };
        };
        outputsList = map outputToAttrListElement outputs;
      in
      commonAttrs // {
        drvPath = assert condition; drv.drvPath;
        outPath = assert condition; drv.outPath;
      };

    licenses = {
      mit = { spdxId = "MIT"; fullName = "MIT License"; free = true; };
      gpl3Plus = { spdxId = "GPL-3.0-or-later"; fullName = "GNU General Public License v3.0 or later"; free = true; };
      asl20 = { spdxId = "Apache-2.0"; fullName = "Apache License 2.0"; free = true; };
      bsd3 = { spdxId = "BSD-3-Clause"; fullName = "BSD 3-clause License"; free = true; };
      unfree = { fullName = "Unfree"; free = false; };
    };
    maintainers = genAttrs [ "alice" "bob" "carol" "dave" "erin" "frank" ] (n: {
      name = toUpper n;
      email = "${n}@example.org";
      github = n;
    });
    platforms = {
      linux = [ "x86_64-linux" "aarch64-linux" "i686-linux" "armv7l-linux" ];
      darwin = [ "x86_64-darwin" "aarch64-darwin" ];
      unix = platforms.linux ++ platforms.darwin;
    };
  };
in
lib
'''

STDENV_NIX = r'''# stdenv: a derivation with mkDerivation, as nixpkgs' stdenv is.
{ lib, system, config }:
let
  shell = "/bin/sh";
  stdenvDrv = derivation {
    name = "stdenv-linux";
    inherit system;
    builder = shell;
    args = [ "-c" "mkdir -p $out && echo 'runPhase() { :; }' > $out/setup" ];
  };

  defaultPhases = { doCheck, hasSrc, hasPatches }:
    lib.optional hasSrc "unpackPhase"
    ++ lib.optional hasPatches "patchPhase"
    ++ [ "configurePhase" "buildPhase" ]
    ++ lib.optional doCheck "checkPhase"
    ++ [ "installPhase" "fixupPhase" ];

  checkMeta = meta:
    if !(config.allowUnfree or false) && !(meta.license.free or true)
    then throw "package has an unfree license"
    else if meta.broken or false then throw "package is marked as broken"
    else true;

  mkDerivation = attrs@{ pname ? null, version ? null, outputs ? [ "out" ],
    buildInputs ? [ ], nativeBuildInputs ? [ ], propagatedBuildInputs ? [ ],
    patches ? [ ], configureFlags ? [ ], makeFlags ? [ ], doCheck ? false,
    meta ? { }, passthru ? { }, ... }:
    let
      name = attrs.name or "${pname}-${version}";
      phases = attrs.phases or (defaultPhases {
        inherit doCheck;
        hasSrc = attrs ? src;
        hasPatches = patches != [ ];
      });
      hooks = lib.filterAttrs (n: _: lib.hasPrefix "pre" n || lib.hasPrefix "post" n) attrs;
      script = lib.foldl' (acc: p: acc + "runPhase ${p}\n") "source $stdenv/setup\n" phases;
      deps = lib.unique (buildInputs ++ propagatedBuildInputs);
      derivationArgs = removeAttrs attrs [ "meta" "passthru" ] // {
        inherit name system outputs;
        builder = shell;
        args = [ "-e" "-c" script ];
        stdenv = stdenvDrv;
        buildInputs = map lib.getDev deps;
        nativeBuildInputs = map lib.getBin nativeBuildInputs;
        propagatedBuildInputs = map lib.getDev propagatedBuildInputs;
        configureFlags = [ "--prefix=${placeholder "out"}" ] ++ configureFlags
          ++ lib.optional (lib.elem "dev" outputs) "--includedir=${placeholder "dev"}/include";
        makeFlags = lib.escapeShellArgs makeFlags;
        phases = lib.concatStringsSep " " phases;
        hookNames = lib.concatStringsSep " " (lib.attrNames hooks);
        depsSummary = lib.concatMapStrings (d: "${d.name or "?"};") deps;
        versionTag = lib.replaceStrings [ "." "-" ] [ "_" "_" ] (toString version);
      } // lib.optionalAttrs (outputs != [ "out" ]) {
        outputDev = if lib.elem "dev" outputs then "dev" else "out";
      };
      drv = derivation derivationArgs;
      pos = builtins.unsafeGetAttrPos "pname" attrs;
      meta' = meta // {
        inherit name;
        outputsToInstall = lib.filter (o: o != "dev") outputs;
        available = checkMeta meta;
      } // lib.optionalAttrs (pos != null) {
        position = pos.file + ":" + toString pos.line;
      };
      overrideAttrs = f: mkDerivation (attrs // (if lib.isFunction f then f attrs else f));
    in
    lib.extendDerivation (checkMeta meta)
      (passthru // { meta = meta'; inherit passthru overrideAttrs; }) drv;

  fetchurlWith = { url, sha256 ? "", hash ? "", name ? baseNameOf url }:
    derivation ({
      inherit name system url;
      builder = shell;
      args = [ "-c" "echo fetched ${lib.escapeShellArg url} > $out" ];
      urls = [ url ];
      outputHashMode = "flat";
      preferLocalBuild = true;
    } // (if hash != "" then { outputHash = hash; outputHashAlgo = ""; }
          else { outputHash = sha256; outputHashAlgo = "sha256"; }));
in
{
  stdenv = stdenvDrv // { inherit mkDerivation shell; isLinux = true; };
  # A lambda without formals: job enumeration auto-calls the values it
  # visits (kiln eval, as Hydra does), and a required `url` would fail there.
  fetchurl = args: fetchurlWith args;
}
'''

DEFAULT_NIX = r'''# The package set: a fixed point of overlays, as nixpkgs' top level is.
{ system ? "x86_64-linux", overlays ? [ ], config ? { allowUnfree = true; } }:
let
  lib = import ./lib.nix;
  base = self: super: {
    inherit lib config;
    pkgs = self;
    newScope = extra: lib.callPackageWith (self // extra);
    callPackage = self.newScope { };
  } // import ./stdenv.nix { inherit lib system config; };
  allPackages = import ./all-packages.nix;
  overrides = import ./overrides.nix;
  composed = lib.composeManyExtensions ([ allPackages overrides ] ++ overlays);
in
lib.fix (lib.extends composed (self: base self { }))
'''

SHA_SRI = "sha256-"


def pkg_file(i, deps, rnd, in_scope):
    """One package function, as a pkgs/.../default.nix file is."""
    version = f"{1 + i % 3}.{i % 7}.{i % 13}"
    digest = hashlib.sha256(f"src-{i}".encode()).hexdigest()
    formals = ["lib", "stdenv", "fetchurl"] + [f"pkg{d}" for d in deps]
    if i % 5 == 0:
        formals.append("withDocs ? false")
    if i % 6 == 0:
        formals.append("enableTests ? true")
    multi = i % 4 == 0
    src_hash = (f'hash = "{SHA_SRI}{__import__("base64").b64encode(bytes.fromhex(digest)).decode()}";'
                if i % 2 else f'sha256 = "{digest}";')
    native = [f"pkg{d}" for d in deps[:1]]
    build = [f"pkg{d}" for d in deps[1:]]
    lic = ["mit", "gpl3Plus", "asl20", "bsd3"][i % 4]
    mnt = ["alice", "bob", "carol", "dave", "erin", "frank"]
    maint = " ".join(mnt[(i + k) % 6] for k in range(1 + i % 2))
    L = []
    L.append("{ " + ", ".join(formals) + " }:")
    L.append("")
    L.append("stdenv.mkDerivation rec {")
    L.append(f'  pname = "{"py-" if in_scope else ""}pkg{i}";')
    L.append(f'  version = "{version}";')
    L.append("")
    L.append("  src = fetchurl {")
    L.append(f'    url = "https://example.org/releases/${{pname}}/${{pname}}-${{version}}.tar.gz";')
    L.append(f"    {src_hash}")
    L.append("  };")
    if multi:
        L.append('  outputs = [ "out" "dev" "lib" ];')
    if i % 25 == 0:
        L.append(f"  patches = [ ../../patches/fix-{i % 3}.patch ];")
    L.append(f"  nativeBuildInputs = [ {' '.join(native)} ];")
    L.append(f"  buildInputs = [ {' '.join(build)} ]"
             + (" ++ lib.optional withDocs pkg" + str(deps[0]) if i % 5 == 0 and deps else "")
             + ";")
    L.append("  configureFlags = [")
    L.append('    "--enable-shared"')
    L.append(f'  ] ++ lib.optionals (lib.versionAtLeast version "1.3") [ "--with-feature-{i % 11}" ]')
    if i % 5 == 0:
        L.append('    ++ lib.optional withDocs "--enable-docs";')
    else:
        L.append("    ;")
    L.append('  makeFlags = [ "PREFIX=$(out)" "CFLAGS=-O2 -g" ];')
    if i % 6 == 0:
        L.append("  doCheck = enableTests;")
    if i % 3 == 0:
        L.append("  postPatch = ''")
        L.append(f"    substituteInPlace Makefile --replace /usr/local $out")
        L.append(f"    echo ${{lib.escapeShellArg pname}} >> VERSION")
        L.append("  '';")
    L.append("  installPhase = ''")
    L.append("    mkdir -p $out/bin")
    L.append(f'    cp {pkg_name(i)} $out/bin/{pkg_name(i)}')
    L.append("  '' + lib.concatMapStrings (d: \"ln -s ${d} $out/share/deps\\n\") buildInputs;")
    L.append("")
    L.append("  passthru = {")
    L.append(f'    updateScript = [ "update-source-version" pname ];')
    L.append(f"    isPython = {'true' if in_scope else 'false'};")
    L.append("  };")
    L.append("")
    L.append("  meta = with lib; {")
    L.append(f'    description = "Synthetic package number {i} of a nixpkgs-shaped set";')
    L.append(f'    homepage = "https://example.org/${{pname}}";')
    L.append(f"    license = licenses.{lic};")
    L.append(f"    maintainers = with maintainers; [ {maint} ];")
    L.append("    platforms = platforms.linux;")
    L.append("  };")
    L.append("}")
    return "\n".join(L) + "\n"


def pkg_name(i):
    return f"pkg{i}"


def window_deps(i, k, rnd, in_scope, scope_every, lo=0):
    """Up to k of the 200 packages before i (not below lo); no scope
    packages for a top-level package (the scope is not in its fixed point)."""
    cands = [j for j in range(max(lo, i - 200), i)
             if in_scope or not (scope_every > 0 and j % scope_every == scope_every - 1)]
    return sorted(set(rnd.choice(cands) for _ in range(k))) if cands and k else []


def layered_deps(i, n, a, rnd, in_scope):
    """Dependencies with nixpkgs' shape: the first `core` packages depend on
    each other as in the window shape; every other package is in one of
    `layers` layers (by index) and depends on 1-2 core packages and on 1-3
    packages drawn from all the layers below its own. The closure of a leaf
    is then the core's closure plus at most about 2^layers packages, and
    chains are at most core depth + layers long, as in nixpkgs, where a
    leaf's closure is a few hundred derivations of ~80,000 and dependency
    chains are tens long (the window shape makes both grow with N)."""
    core = min(a.core, n)
    if i < core:
        return window_deps(i, min(i, rnd.randint(0, a.deps)), rnd, in_scope, a.scope_every)
    per = max(1, -(-(n - core) // a.layers))
    layer_start = core + ((i - core) // per) * per
    deps = window_deps(core, rnd.randint(1, 2), rnd, in_scope, a.scope_every,
                       lo=max(0, core - 200))
    if layer_start > core:
        for _ in range(rnd.randint(1, 3)):
            j = rnd.randrange(core, layer_start)
            if in_scope or not (a.scope_every > 0 and j % a.scope_every == a.scope_every - 1):
                deps.append(j)
    return sorted(set(deps))


def print_stats(graph):
    """The graph's shape on stderr: dependency chain depth and closure
    sizes (packages, itself included) of every 100th package."""
    depth = []
    for deps in graph:
        depth.append(1 + max((depth[d] for d in deps), default=0))
    sizes = []
    for i in range(0, len(graph), max(1, len(graph) // 100)):
        seen, todo = set(), [i]
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(graph[x])
        sizes.append(len(seen))
    sizes.sort()
    print(f"packages {len(graph)}: chain depth max {max(depth)} median "
          f"{sorted(depth)[len(depth) // 2]}; closure (packages) median "
          f"{sizes[len(sizes) // 2]} max {sizes[-1]}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--deps", type=int, default=4)
    ap.add_argument("--scope-every", type=int, default=10)
    ap.add_argument("--shape", choices=("window", "layered"), default="window")
    ap.add_argument("--core", type=int, default=300)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--stats", action="store_true",
                    help="print chain depth and closure sizes on stderr")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    os.makedirs(os.path.join(a.out, "patches"), exist_ok=True)
    for k in range(3):
        with open(os.path.join(a.out, "patches", f"fix-{k}.patch"), "w") as f:
            f.write(f"--- a/Makefile\n+++ b/Makefile\n@@ -1 +1 @@\n-CC=cc\n+CC=cc{k}\n")
    for name, text in (("lib.nix", LIB_NIX), ("stdenv.nix", STDENV_NIX),
                       ("default.nix", DEFAULT_NIX)):
        with open(os.path.join(a.out, name), "w") as f:
            f.write(text)
    top, scope, overrides, graph = [], [], [], []
    for i in range(a.n):
        in_scope = a.scope_every > 0 and i % a.scope_every == a.scope_every - 1
        if a.shape == "layered":
            deps = layered_deps(i, a.n, a, rnd, in_scope)
        else:
            deps = window_deps(i, min(i, rnd.randint(0, a.deps)), rnd, in_scope, a.scope_every)
        graph.append(deps)
        bucket = f"b{i // 1000}"
        d = os.path.join(a.out, "pkgs", bucket)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"pkg{i}.nix"), "w") as f:
            f.write(pkg_file(i, deps, rnd, in_scope))
        args = "{ }"
        if i % 5 == 0 and i % 2 == 1:
            args = "{ withDocs = true; }"
        line = f"  pkg{i} = callPackage ./pkgs/{bucket}/pkg{i}.nix {args};"
        (scope if in_scope else top).append(line)
        if not in_scope and i % 37 == 0 and i % 5 == 0:
            overrides.append(f"  pkg{i} = super.pkg{i}.override {{ withDocs = true; }};")
        elif not in_scope and i % 41 == 0:
            overrides.append(f"  pkg{i} = super.pkg{i}.overrideAttrs (old: {{")
            overrides.append(f'    postFixup = "echo overridden ${{old.pname}}";')
            overrides.append("  });")
    L = ["# Every package, called with its dependencies from the fixed point.",
         "self: super: with self; {"]
    L += top
    L.append("")
    L.append("  pythonPackages = lib.recurseIntoAttrs (lib.makeScope newScope (self: with self; {")
    L += ["  " + s for s in scope]
    L.append("  }));")
    L.append("}")
    with open(os.path.join(a.out, "all-packages.nix"), "w") as f:
        f.write("\n".join(L) + "\n")
    O = ["# Overrides applied on top of the package set.", "self: super: {"] + overrides + ["}"]
    with open(os.path.join(a.out, "overrides.nix"), "w") as f:
        f.write("\n".join(O) + "\n")
    if a.stats:
        print_stats(graph)


if __name__ == "__main__":
    main()

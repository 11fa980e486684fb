#!/usr/bin/env python3
"""A package set in nixpkgs' newer style (issue 36): packages found by
directory (`pkgs/by-name/<2 letters>/<name>/package.nix`, as nixpkgs'
by-name tree), `mkDerivation (finalAttrs: { ... })` fixed points, split
outputs, `passthru.tests` derivations and a library written in Nix, the
way nixpkgs' `lib` is (list, string, attribute-set and version helpers,
`licenses`, `maintainers` and `platforms` tables).

Usage: gen-byname.py N OUTDIR [--seed S]

OUTDIR/default.nix evaluates to the top level: N packages, each a job,
and a `tests` job set (`recurseForDerivations`) with every 4th package's
`passthru.tests`. What each package evaluates:

- `lib.nix`: `fix`, `extends`, `makeExtensible`, `callPackageWith` (through
  `functionArgs`/`intersectAttrs`), `optional(s)`, `optionalString`,
  `concatMapStringsSep`, `splitString`, `versionAtLeast`, `mapAttrs'`,
  `filterAttrs`, `recursiveUpdate`, `unique`, `flatten`,
  `cmakeBool`/`cmakeFeature`/`mesonOption`, `licenses` (60 sets),
  `maintainers` (200 sets), `platforms` (lists of 30-60 systems);
- `stdenv.nix`: `mkDerivation` taking a function of its own final
  attributes (`finalAttrs.version` in `src`), `outputs` split into
  `out`/`dev`/`lib`/`man`, `env` attributes, `meta` checked against the
  platform and license, `overrideAttrs` through the fixed point;
- `fetchFromGitHub` and `fetchurl` (fixed-output), `runCommand` and
  `writeShellScript` (trivial builders the tests use);
- `by-name.nix`: the package list made with `readDir` over the tree and
  `mapAttrs'`, then overlays: an aliases overlay and an overlay that
  overrides every 9th package with `overrideAttrs`.

Output is deterministic for N and the seed; N packages give about
1.25 N jobs.
"""
import argparse
import os
import random

LIB = r'''# A library in the manner of nixpkgs' lib, written for this set.
let
  b = builtins;
  lib = rec {
    fix = f: let x = f x; in x;
    extends = overlay: f: self: let super = f self; in super // overlay self super;
    composeExtensions = f: g: self: super:
      let fApplied = f self super; super' = super // fApplied;
      in fApplied // g self super';
    makeExtensible = rattrs:
      let self = rattrs self // { extend = f: makeExtensible (extends f rattrs); };
      in self;
    callPackageWith = auto: fn: args:
      let
        f = if b.isFunction fn then fn else import fn;
        fargs = b.functionArgs f;
        given = b.intersectAttrs fargs auto // args;
        missing = b.removeAttrs fargs (b.attrNames given);
        required = b.filter (n: !fargs.${n}) (b.attrNames missing);
      in if required != [ ] then throw "callPackage: missing ${b.head required}"
         else makeOverridable f given;
    makeOverridable = f: args:
      let r = f args;
      in if b.isAttrs r then r // { override = a: makeOverridable f (args // a); } else r;
    id = x: x;
    optional = c: x: if c then [ x ] else [ ];
    optionals = c: xs: if c then xs else [ ];
    optionalString = c: s: if c then s else "";
    optionalAttrs = c: s: if c then s else { };
    flatten = x: if b.isList x then b.concatMap flatten x else [ x ];
    unique = b.foldl' (acc: e: if b.elem e acc then acc else acc ++ [ e ]) [ ];
    last = l: b.elemAt l (b.length l - 1);
    concatMapStringsSep = sep: f: l: b.concatStringsSep sep (map f l);
    concatStringsSep = b.concatStringsSep;
    splitString = sep: s: b.filter b.isString (b.split (b.replaceStrings [ "." ] [ "\\." ] sep) s);
    hasPrefix = p: s: b.substring 0 (b.stringLength p) s == p;
    removePrefix = p: s:
      if hasPrefix p s then b.substring (b.stringLength p) (b.stringLength s) s else s;
    escapeShellArg = s: "'${b.replaceStrings [ "'" ] [ "'\\''" ] (toString s)}'";
    escapeShellArgs = concatMapStringsSep " " escapeShellArg;
    versionAtLeast = v1: v2: b.compareVersions v1 v2 >= 0;
    versionOlder = v1: v2: b.compareVersions v2 v1 == 1;
    majorMinor = v: concatStringsSep "." (b.genList (b.elemAt (splitString "." v)) 2);
    nameValuePair = name: value: { inherit name value; };
    mapAttrs' = f: set: b.listToAttrs (map (n: f n set.${n}) (b.attrNames set));
    mapAttrs = b.mapAttrs;
    mapAttrsToList = f: set: map (n: f n set.${n}) (b.attrNames set);
    filterAttrs = pred: set:
      b.listToAttrs (b.concatMap (n: let v = set.${n}; in if pred n v then [ { name = n; value = v; } ] else [ ]) (b.attrNames set));
    recursiveUpdate = lhs: rhs:
      lhs // b.mapAttrs (n: v: if b.isAttrs v && lhs ? ${n} && b.isAttrs lhs.${n} && !(v ? type)
                               then recursiveUpdate lhs.${n} v else v) rhs;
    cmakeOptionType = type: feature: value: "-D${feature}:${type}=${value}";
    cmakeBool = f: v: cmakeOptionType "BOOL" f (if v then "TRUE" else "FALSE");
    cmakeFeature = f: v: cmakeOptionType "STRING" f v;
    mesonOption = f: v: "-D${f}=${v}";
    mesonBool = f: v: mesonOption f (if v then "true" else "false");
    getOutput = o: pkg: pkg.${o} or pkg.out or pkg;
    getDev = getOutput "dev";
    getLib = getOutput "lib";
    licenses = @LICENSES@;
    maintainers = @MAINTAINERS@;
    platforms = @PLATFORMS@;
    availableOn = platform: pkg:
      b.elem platform (pkg.meta.platforms or platforms.all)
      && !(b.elem platform (pkg.meta.badPlatforms or [ ]));
  };
in lib
'''

STDENV = r'''# mkDerivation over its own final attributes, as nixpkgs' newer packages use.
{ lib, system, config }:
let
  b = builtins;
  shell = "/bin/sh";
  bootstrap = derivation {
    name = "bootstrap-tools";
    inherit system;
    builder = shell;
    args = [ "-c" "mkdir -p $out/bin" ];
  };
  checkMeta = name: meta:
    let
      free = b.all (l: l.free or true) (lib.flatten [ (meta.license or [ ]) ]);
    in if !free && !(config.allowUnfree or false) then throw "${name}: unfree"
       else if !lib.availableOn system { inherit meta; } then throw "${name}: not on ${system}"
       else true;
  hookScript = attrs: lib.concatMapStringsSep "\n" (p: attrs.${p} or "")
    [ "preConfigure" "postConfigure" "preBuild" "postInstall" "postFixup" ];
  mkDerivation = fnOrAttrs:
    let
      attrsOf = self: if b.isFunction fnOrAttrs then fnOrAttrs self else fnOrAttrs;
    in mkDerivationFrom attrsOf;
  mkDerivationFrom = rattrs:
    let
      finalAttrs = rattrs finalAttrs;
      a = finalAttrs;
      name = a.name or "${a.pname}-${a.version}";
      outputs = a.outputs or [ "out" ];
      env = a.env or { };
      deps = lib.unique (lib.flatten [ (a.buildInputs or [ ]) (a.propagatedBuildInputs or [ ]) ]);
      drvAttrs = b.removeAttrs a [ "meta" "passthru" "env" "finalPackage" ] // env // {
        inherit name system outputs;
        builder = shell;
        args = [ "-e" "-c" "source ${bootstrap}/setup; genericBuild" ];
        stdenv = bootstrap;
        buildInputs = map lib.getDev (a.buildInputs or [ ]);
        nativeBuildInputs = a.nativeBuildInputs or [ ];
        propagatedBuildInputs = map lib.getDev (a.propagatedBuildInputs or [ ]);
        cmakeFlags = lib.escapeShellArgs ([ "-DCMAKE_INSTALL_PREFIX=${placeholder "out"}" ] ++ (a.cmakeFlags or [ ]));
        mesonFlags = b.concatStringsSep " " (a.mesonFlags or [ ]);
        hooks = hookScript a;
        depNames = lib.concatMapStringsSep "," (d: d.pname or d.name) deps;
      } // lib.optionalAttrs (b.elem "dev" outputs) {
        outputDev = "dev";
        outputInclude = "dev";
      };
      drv = derivation drvAttrs;
      outputsSet = b.listToAttrs (map (o: { name = o; value = package // { outPath = drv.${o}.outPath; outputName = o; }; }) outputs);
      meta = (a.meta or { }) // {
        inherit name;
        outputsToInstall = lib.optionals (b.elem "bin" outputs) [ "bin" ] ++ [ "out" ];
        available = checkMeta name (a.meta or { });
      };
      package = (a.passthru or { }) // outputsSet // {
        inherit (drv) drvPath outPath;
        inherit name outputs meta;
        pname = a.pname or name;
        version = a.version or "";
        type = "derivation";
        outputName = b.head outputs;
        passthru = a.passthru or { };
        overrideAttrs = f: mkDerivationFrom (lib.extends
          (final: prev: if b.isFunction (f prev) then f final prev else f prev) rattrs);
        inherit finalAttrs;
      };
    in package;
  fetchurl = { url, hash, name ? b.baseNameOf url }:
    derivation {
      inherit name system url;
      builder = shell;
      args = [ "-c" "echo ${lib.escapeShellArg url} > $out" ];
      outputHash = hash;
      outputHashAlgo = "";
      outputHashMode = "flat";
    };
  fetchFromGitHub = { owner, repo, rev, hash }:
    derivation {
      name = "source";
      inherit system;
      builder = shell;
      args = [ "-c" "mkdir $out" ];
      url = "https://github.com/${owner}/${repo}/archive/${rev}.tar.gz";
      outputHash = hash;
      outputHashAlgo = "";
      outputHashMode = "recursive";
    };
  runCommand = name: env: script:
    derivation (env // {
      inherit name system;
      builder = shell;
      args = [ "-e" "-c" script ];
    });
  writeShellScript = name: text:
    runCommand name { inherit text; passAsFile = [ "text" ]; }
      "echo '#!${shell}' > $out; cat $textPath >> $out";
in { inherit mkDerivation fetchurl fetchFromGitHub runCommand writeShellScript; }
'''

BYNAME = r'''# Packages by directory, as nixpkgs' pkgs/by-name tree.
{ lib }:
self: super:
let
  b = builtins;
  shards = b.readDir ./pkgs/by-name;
  inShard = shard: lib.mapAttrs' (name: _: lib.nameValuePair name
    (self.callPackage (./pkgs/by-name + "/${shard}/${name}/package.nix") { }))
    (b.readDir (./pkgs/by-name + "/${shard}"));
in b.foldl' (acc: shard: acc // inShard shard) { } (b.attrNames shards)
'''

DEFAULT = r'''# The top level: the package set as an extensible fixed point.
{ system ? "x86_64-linux", config ? { allowUnfree = false; } }:
let
  lib = import ./lib.nix;
  stdenv = import ./stdenv.nix { inherit lib system config; };
  base = self: {
    inherit lib config system stdenv;
    inherit (stdenv) mkDerivation fetchurl fetchFromGitHub runCommand writeShellScript;
    callPackage = lib.callPackageWith self;
    recurseIntoAttrs = s: s // { recurseForDerivations = true; };
  };
  byName = import ./by-name.nix { inherit lib; };
  pkgs = (lib.makeExtensible base).extend (lib.composeExtensions byName (import ./overlays.nix));
  tested = lib.filterAttrs (n: v: b.isAttrs v && v ? passthru && v.passthru ? tests) pkgs;
  b = builtins;
  jobs = lib.filterAttrs (n: v: b.isAttrs v && v.type or "" == "derivation") pkgs;
in jobs // {
  tests = pkgs.recurseIntoAttrs (lib.mapAttrs (n: p: pkgs.recurseIntoAttrs p.passthru.tests) tested);
}
'''

PACKAGE = r'''{{ lib, stdenv, mkDerivation, fetchFromGitHub, fetchurl, runCommand, writeShellScript{args} }}:

mkDerivation (finalAttrs: {{
  pname = "{name}";
  version = "{version}";
{outputs}
  src = {src};

  nativeBuildInputs = [ {native} ];
  buildInputs = [ {build} ];
{cmake}
  env.NIX_CFLAGS_COMPILE = toString ([ "-O2" "-DVERSION=${{finalAttrs.version}}" ]
    ++ lib.optional (lib.versionAtLeast finalAttrs.version "2.0") "-DNEW_API");

  postInstall = ''
    mkdir -p $out/share/doc/${{finalAttrs.pname}}
  '' + lib.optionalString (lib.versionOlder finalAttrs.version "1.5") ''
    ln -s ${{finalAttrs.pname}} $out/bin/{name}-compat
  '';
{passthru}
  meta = {{
    description = "{description}";
    homepage = "https://{name}.example.org/";
    changelog = "https://github.com/{owner}/{name}/releases/tag/v${{finalAttrs.version}}";
    license = {license};
    maintainers = with lib.maintainers; [ {maintainers} ];
    platforms = lib.platforms.{platforms};
    mainProgram = "{name}";
  }};
}})
'''

OVERLAYS = r'''# Aliases, and overrides of some packages through overrideAttrs.
self: super:
{aliases}
// builtins.mapAttrs (n: p: p.overrideAttrs (prev: {{
  postFixup = (prev.postFixup or "") + "echo fixed ${{prev.pname}}";
  version = prev.version + "-r1";
}})) {{ {overridden} }}
'''

WORDS = ("fast small secure portable modern classic library tool daemon client "
         "parser codec archive stream image audio video network shell compiler "
         "linker debugger profiler formatter cache database markup protocol").split()
SYSTEMS = ["x86_64-linux", "aarch64-linux", "i686-linux", "armv7l-linux", "riscv64-linux",
           "x86_64-darwin", "aarch64-darwin", "x86_64-freebsd", "aarch64-freebsd",
           "x86_64-netbsd", "x86_64-openbsd", "powerpc64le-linux", "mipsel-linux",
           "s390x-linux", "loongarch64-linux", "wasm32-wasi", "x86_64-solaris",
           "x86_64-cygwin", "i686-cygwin", "x86_64-windows"]


def name_of(i):
    # Names that spread over two-letter shards, as nixpkgs' do.
    letters = "abcdefghijklmnopqrstuvwxyz"
    return letters[i % 26] + letters[(i // 26) % 26] + "lib" + str(i)


def library_tables(rng):
    lic = []
    for i in range(60):
        free = "false" if i % 17 == 5 else "true"
        lic.append(f'l{i} = {{ spdxId = "L-{i}"; fullName = "License {i}"; '
                   f'url = "https://spdx.org/licenses/L-{i}.html"; free = {free}; redistributable = true; }};')
    lic.append("mit = l0; bsd3 = l1; gpl3Plus = l2; asl20 = l3; unfree = l5;")
    mnt = []
    for i in range(200):
        mnt.append(f'm{i} = {{ name = "Maintainer {i}"; email = "m{i}@example.org"; '
                   f'github = "m{i}"; githubId = {1000 + i}; }};')
    linux = [s for s in SYSTEMS if s.endswith("-linux")]
    plat = [
        "all = [ " + " ".join(f'"{s}"' for s in SYSTEMS * 3) + " ];",
        "linux = [ " + " ".join(f'"{s}"' for s in linux * 4) + " ];",
        "unix = linux ++ [ " + " ".join(f'"{s}"' for s in SYSTEMS if "darwin" in s or "bsd" in s) + " ];",
        'darwin = [ "x86_64-darwin" "aarch64-darwin" ];',
    ]
    return ("rec {\n      " + "\n      ".join(lic) + "\n    }",
            "{\n      " + "\n      ".join(mnt) + "\n    }",
            "rec {\n      " + "\n      ".join(plat) + "\n    }")


def package(i, rng, names):
    name = names[i]
    major = rng.randint(0, 3)
    version = f"{major}.{rng.randint(0, 9)}.{rng.randint(0, 20)}"
    deps = sorted({names[rng.randrange(i)] for _ in range(rng.randint(0, 5))}) if i else []
    native = [names[rng.randrange(min(i, 20))] for _ in range(rng.randint(0, 2))] if i >= 20 else []
    native = sorted(set(native) - set(deps))
    args = "".join(", " + d for d in sorted(set(deps) | set(native)))
    outputs = ""
    if i % 3 == 0:
        outputs = '  outputs = [ "out" "dev" ' + ('"lib" ' if i % 6 == 0 else "") + ('"man" ' if i % 9 == 0 else "") + "];\n"
    hash = "sha256-" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
                               for _ in range(43)) + "="
    owner = f"org{i % 97}"
    if i % 2:
        src = (f'fetchFromGitHub {{\n    owner = "{owner}";\n    repo = "{name}";\n'
               f'    rev = "v${{finalAttrs.version}}";\n    hash = "{hash}";\n  }}')
    else:
        src = (f'fetchurl {{\n    url = "https://download.example.org/{name}/${{finalAttrs.pname}}-'
               f'${{finalAttrs.version}}.tar.xz";\n    hash = "{hash}";\n  }}')
    cmake = ""
    if i % 4 == 1:
        cmake = ('  cmakeFlags = [\n    (lib.cmakeBool "BUILD_TESTING" finalAttrs.doCheck)\n'
                 f'    (lib.cmakeFeature "PROJECT_VERSION" (lib.majorMinor finalAttrs.version))\n  ];\n'
                 '  doCheck = true;\n')
    elif i % 4 == 3:
        cmake = ('  mesonFlags = [ (lib.mesonBool "docs" false) (lib.mesonOption "backend" "ninja") ];\n')
    passthru = ""
    if i % 4 == 0:
        passthru = ('  passthru.tests = {\n'
                    '    version = runCommand "${finalAttrs.pname}-version-test" { } ' "''\n"
                    '      ${finalAttrs.finalPackage or "true"} --version | grep ${finalAttrs.version}\n'
                    "      touch $out\n    '';\n"
                    '    script = writeShellScript "${finalAttrs.pname}-smoke" ' "''\n"
                    '      echo ${lib.escapeShellArg finalAttrs.pname}\n' "    '';\n  };\n")
    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
    description = " ".join(words).capitalize()
    license = "lib.licenses.mit" if i % 5 else f"[ lib.licenses.l{i % 60} lib.licenses.asl20 ]"
    if i % 53 == 7:
        license = "lib.licenses.unfree"  # evaluates but is not a job (throws on access)
    maintainers = " ".join(f"m{(i * 7 + k) % 200}" for k in range(rng.randint(0, 3)))
    platforms = ["unix", "linux", "all"][i % 3]
    return name, PACKAGE.format(args=args, name=name, version=version, outputs=outputs, src=src,
                                native=" ".join(native), build=" ".join(deps), cmake=cmake,
                                passthru=passthru, description=description, owner=owner,
                                license=license, maintainers=maintainers, platforms=platforms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=36)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.outdir, exist_ok=True)
    lic, mnt, plat = library_tables(rng)
    with open(os.path.join(a.outdir, "lib.nix"), "w") as f:
        f.write(LIB.replace("@LICENSES@", lic).replace("@MAINTAINERS@", mnt).replace("@PLATFORMS@", plat))
    for fname, text in (("stdenv.nix", STDENV), ("by-name.nix", BYNAME), ("default.nix", DEFAULT)):
        with open(os.path.join(a.outdir, fname), "w") as f:
            f.write(text)
    names = [name_of(i) for i in range(a.n)]
    unfree = set()
    for i in range(a.n):
        name, text = package(i, rng, names)
        if "licenses.unfree" in text:
            unfree.add(name)
        d = os.path.join(a.outdir, "pkgs", "by-name", name[:2], name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "package.nix"), "w") as f:
            f.write(text)
    aliases = "{ " + " ".join(f"{names[i]}-old = self.{names[i]};" for i in range(0, a.n, 97)) + " }"
    overridden = " ".join(f"inherit (super) {names[i]};" for i in range(5, a.n, 9)
                          if names[i] not in unfree)
    with open(os.path.join(a.outdir, "overlays.nix"), "w") as f:
        f.write(OVERLAYS.format(aliases=aliases, overridden=overridden))


if __name__ == "__main__":
    main()

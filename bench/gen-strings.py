#!/usr/bin/env python3
"""A string-heavy package set (issue 36): the evaluator's strings, contexts
and JSON, not its attribute sets, carry the weight.

Usage: gen-strings.py N OUTDIR [--seed S]

OUTDIR/default.nix evaluates (`nix-instantiate OUTDIR/default.nix`,
`kiln eval OUTDIR/default.nix`) to a set of N packages, each a derivation
built by `mkPackage` in `build-support.nix`:

- long descriptions assembled from word lists with `concatStringsSep`,
  `concatMapStringsSep`, `toUpper`-style `replaceStrings` chains and
  `substring`;
- a `configureFlags` list and a `makeFlags` string built from the
  dependencies' store paths (`"--with-${d.pname}=${d}"`), so every package
  carries its dependencies' string contexts through three layers
  (flags → script → environment);
- `toJSON` of an attribute set (`passthruJson`, `buildConfig`) holding
  store paths, lists and nested sets, and `fromJSON` back for one field;
- a `setupHook` text built by `builtins.foldl'` over the dependencies,
  with `escapeShellArg`-style quoting through `replaceStrings`;
- `builtins.hashString` of each package's metadata as its `version` suffix
  and `builtins.toFile` for a small patch file per 20th package.

Packages live in one recursive set (`self:` fixed point); each depends on
up to 5 of the 300 packages before it. Output is deterministic for N and
the seed. N packages give N + N/20 derivations (no fixed-output sources).
"""
import argparse
import os
import random

SUPPORT = r'''# Helpers, written for strings: quoting, flags, descriptions.
let
  b = builtins;
in rec {
  join = b.concatStringsSep;
  joinMap = sep: f: xs: join sep (map f xs);
  upperFirst = s:
    let h = b.substring 0 1 s; t = b.substring 1 (b.stringLength s) s;
    in (b.replaceStrings
          [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ]
          [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ]
          h) + t;
  shellQuote = s: "'" + b.replaceStrings [ "'" ] [ "'\\''" ] s + "'";
  slug = s: b.replaceStrings [ " " "." "," "(" ")" "/" ] [ "-" "" "" "" "" "_" ] s;
  sentence = words: upperFirst (join " " words) + ".";
  paragraph = sentences: join " " (map sentence sentences);
  withFlag = name: dep: "--with-${name}=${dep}";
  envLine = name: value: "export ${name}=${shellQuote value}";
  mkPackage = { pname, version, deps, words, extra ? { } }:
    let
      flags = map (d: withFlag d.pname d) deps
        ++ [ "--prefix=$out" "--enable-${slug pname}" ];
      makeFlags = joinMap " " (d: "${b.replaceStrings [ "-" ] [ "_" ] d.pname}_DIR=${d}/lib") deps;
      hook = b.foldl' (acc: d: acc + "\n" + envLine "PATH" "${d}/bin:$PATH") "# setup hook for ${pname}" deps;
      description = paragraph words;
      meta = {
        inherit description;
        longDescription = join "\n\n" [ description (paragraph (b.tail words)) ];
        homepage = "https://example.org/${slug pname}/${version}";
        license = if b.stringLength pname > 9 then "mit" else "gpl3Plus";
      };
      config = {
        inherit pname version;
        inputs = map (d: { name = d.pname; path = "${d}"; }) deps;
        features = map slug (b.head words);
        tuning = { level = b.stringLength description; tag = b.substring 0 8 (b.hashString "sha256" description); };
      };
      configJson = b.toJSON config;
      fullVersion = "${version}+${b.substring 0 7 (b.hashString "sha1" configJson)}";
    in derivation ({
      name = "${pname}-${fullVersion}";
      inherit pname;
      version = fullVersion;
      system = "x86_64-linux";
      builder = "/bin/sh";
      args = [ "-c" ". $setupHookPath; echo ${shellQuote pname} > $out" ];
      configureFlags = join " " flags;
      inherit makeFlags;
      setupHook = hook;
      setupHookPath = b.toFile "${pname}-hook.sh" (b.unsafeDiscardStringContext hook);
      buildConfig = configJson;
      passthruJson = b.toJSON { inherit meta; deps = map (d: d.pname) deps; };
      tag = (b.fromJSON (b.unsafeDiscardStringContext configJson)).tuning.tag;
      description = meta.description;
      longDescription = meta.longDescription;
    } // extra) // { inherit pname meta; passthru = { inherit config; }; };
}
'''

DEFAULT = r'''let
  support = import ./build-support.nix;
  self = import ./packages.nix { inherit support self; };
in self
'''

WORDS = ("fast small portable library tool parser network stream codec "
         "image audio video text markup crypto hash compress archive shell "
         "database cache server client protocol engine runtime compiler "
         "linker debugger profiler formatter linter bindings wrapper "
         "toolkit framework daemon utility collection reference modern "
         "classic extensible embeddable secure robust simple").split()


def words(rng):
    return [[rng.choice(WORDS) for _ in range(rng.randint(5, 12))]
            for _ in range(rng.randint(2, 4))]


def nix_words(ws):
    return "[ " + " ".join(
        "[ " + " ".join('"%s"' % w for w in s) + " ]" for s in ws) + " ]"


def package(i, rng):
    name = "pkg%d" % i
    lo = max(0, i - 300)
    deps = sorted(set(rng.randrange(lo, i) for _ in range(min(i, rng.randint(0, 5)))))
    dep_list = " ".join("self.pkg%d" % d for d in deps)
    extra = ""
    if i % 20 == 0:
        extra = (' extra = { patches = [ (builtins.toFile "%s.patch" '
                 '"--- a\\n+++ b\\n@@ -1 +1 @@\\n-old %d\\n+new %d\\n") ]; };'
                 % (name, i, i + 1))
    return ('  %s = support.mkPackage { pname = "%s"; version = "%d.%d.%d";'
            ' deps = [ %s ]; words = %s;%s };\n'
            % (name, name, i % 7, i % 13, i % 5, dep_list, nix_words(words(rng)),
               extra))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=36)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.outdir, exist_ok=True)
    with open(os.path.join(a.outdir, "build-support.nix"), "w") as f:
        f.write(SUPPORT)
    with open(os.path.join(a.outdir, "default.nix"), "w") as f:
        f.write(DEFAULT)
    with open(os.path.join(a.outdir, "packages.nix"), "w") as f:
        f.write("{ support, self }:\n{\n")
        for i in range(a.n):
            f.write(package(i, rng))
        f.write("}\n")


if __name__ == "__main__":
    main()

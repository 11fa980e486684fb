# A small `lib`, written the way nixpkgs' is: fixed points and overlays,
# callPackage through functionArgs + intersectAttrs, makeOverridable, and
# the list, attribute-set and string helpers the packages use.
rec {
  # Fixed point of `f`: `f` applied to its own result.
  fix = f: let x = f x; in x;

  # An overlay `g` on top of the fixed-point function `f`.
  extends = g: f: self: let super = f self; in super // g self super;

  # Two overlays as one.
  composeExtensions = f: g: self: super:
    let fApplied = f self super;
    in fApplied // g self (super // fApplied);

  # Many overlays as one, applied left to right.
  composeManyExtensions = builtins.foldl' composeExtensions (self: super: { });

  optionalAttrs = cond: as: if cond then as else { };
  # An attribute set with one attribute per name, valued `f name`.
  genAttrs = names: f: builtins.listToAttrs (map (name: { inherit name; value = f name; }) names);

  optionalString = cond: s: if cond then s else "";
  optional = cond: x: if cond then [ x ] else [ ];
  optionals = cond: xs: if cond then xs else [ ];
  concatMapStrings = f: list: builtins.concatStringsSep "" (map f list);
  concatStringsSep = builtins.concatStringsSep;
  mapAttrs = builtins.mapAttrs;
  attrValues = builtins.attrValues;
  filterAttrs = pred: set: builtins.listToAttrs (builtins.concatMap
    (name: let v = set.${name}; in if pred name v then [{ inherit name; value = v; }] else [ ])
    (builtins.attrNames set));
  isDerivation = x: builtins.isAttrs x && (x.type or null) == "derivation";
  versionAtLeast = v: min: builtins.compareVersions v min >= 0;
  getOutput = output: pkg: pkg.${output} or pkg;
  getDev = getOutput "dev";
  getLib = getOutput "out";

  # `f` called with the packages it names (its formal arguments) from
  # `autoArgs`, overridden by `args`; the result can be `override`n.
  callPackageWith = autoArgs: fn: args:
    let
      f = if builtins.isFunction fn then fn else import fn;
      auto = builtins.intersectAttrs (builtins.functionArgs f) autoArgs;
    in makeOverridable f (auto // args);

  # `f args`, plus `override` to call it again with changed arguments.
  makeOverridable = f: origArgs:
    let
      result = f origArgs;
      overrideWith = newArgs: origArgs // (if builtins.isFunction newArgs then newArgs origArgs else newArgs);
    in
    if builtins.isAttrs result then
      result // { override = newArgs: makeOverridable f (overrideWith newArgs); }
    else result;

  # Licenses, as nixpkgs names them.
  licenses = {
    mit = { spdxId = "MIT"; fullName = "MIT License"; free = true; };
    bsd2 = { spdxId = "BSD-2-Clause"; fullName = "BSD 2-clause \"Simplified\" License"; free = true; };
    gpl3Plus = { spdxId = "GPL-3.0-or-later"; fullName = "GNU General Public License v3.0 or later"; free = true; };
    publicDomain = { fullName = "Public Domain"; free = true; };
  };
}

# The generic builder of `stdenv.mkDerivation`: runs the phases in order,
# each replaceable by an attribute of the same name (`buildPhase = "...";`)
# and wrapped in pre/post hooks (`preInstall`, `postInstall`, ...).
# Dependencies in $buildInputs are added to the compiler's search paths,
# with their `nix-support/propagated-build-inputs` followed.
set -eu -o pipefail
export PATH="$hostPath"
export CC="${CC:-gcc}" AR="${AR:-ar}"
export CFLAGS="-O2 -Wall -Wextra -ffile-prefix-map=$NIX_BUILD_TOP=/build"
export CPPFLAGS="" LDFLAGS=""
jobs="${NIX_BUILD_CORES:-1}"; [ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

declare -A seenInput=()
addInput() {
  local p="$1"
  [ -n "${seenInput[$p]:-}" ] && return 0
  seenInput[$p]=1
  [ -d "$p/include" ] && CPPFLAGS+=" -I$p/include"
  if [ -d "$p/lib" ]; then
    LDFLAGS+=" -L$p/lib"
    # Only folders with shared libraries go into the run-time search path,
    # so that a program does not keep a `dev` output alive.
    compgen -G "$p/lib/*.so*" > /dev/null && LDFLAGS+=" -Wl,-rpath,$p/lib"
  fi
  [ -d "$p/bin" ] && PATH="$p/bin:$PATH"
  if [ -f "$p/nix-support/propagated-build-inputs" ]; then
    local q
    for q in $(cat "$p/nix-support/propagated-build-inputs"); do addInput "$q"; done
  fi
  return 0
}
for p in ${buildInputs:-}; do addInput "$p"; done

runHook() { local h="$1"; [ -n "${!h:-}" ] && eval "${!h}"; return 0; }
runPhase() {
  local phase="$1" name="${1%Phase}"
  echo "@phase $phase"
  runHook "pre${name^}"
  if [ -n "${!phase:-}" ]; then eval "${!phase}"; else "default${phase^}"; fi
  runHook "post${name^}"
}

defaultUnpackPhase() {
  if [ -z "${src:-}" ]; then
    mkdir source
  elif [ -d "$src" ]; then
    cp -r --no-preserve=mode "$src" source
  else
    mkdir source
    tar -xf "$src" -C source --strip-components="${stripComponents:-1}"
  fi
  chmod -R u+w source
  cd source
}
defaultPatchPhase() {
  local p
  for p in ${patches:-}; do echo "applying $p"; patch -p1 < "$p"; done
}
defaultConfigurePhase() {
  if [ -x ./configure ]; then ./configure --prefix="$out" ${configureFlags:-}; fi
}
defaultBuildPhase() {
  make -j"$jobs" CC="$CC" AR="$AR" CFLAGS="$CFLAGS" CPPFLAGS="$CPPFLAGS" \
    LDFLAGS="$LDFLAGS" PREFIX="$out" ${makeFlags:-}
}
defaultCheckPhase() {
  if [ "${doCheck:-}" = 1 ]; then
    make CC="$CC" CFLAGS="$CFLAGS" CPPFLAGS="$CPPFLAGS" LDFLAGS="$LDFLAGS" \
      ${makeFlags:-} check
  fi
}
defaultInstallPhase() {
  make PREFIX="$out" ${makeFlags:-} ${installFlags:-} install
}
defaultFixupPhase() {
  local o
  for o in $outputs; do
    [ -e "${!o}" ] || mkdir -p "${!o}"
  done
  if [ -n "${propagatedBuildInputs:-}" ]; then
    mkdir -p "${dev:-$out}/nix-support"
    echo $propagatedBuildInputs > "${dev:-$out}/nix-support/propagated-build-inputs"
  fi
  if grep -rlF "$NIX_BUILD_TOP" $(for o in $outputs; do echo "${!o}"; done) 2>/dev/null; then
    echo "error: the outputs above refer to the build directory" >&2
    exit 1
  fi
}

mkdir -p "$NIX_BUILD_TOP/tmp" && export TMPDIR="$NIX_BUILD_TOP/tmp"
cd "$NIX_BUILD_TOP"
for phase in ${phases:-unpackPhase patchPhase configurePhase buildPhase checkPhase installPhase fixupPhase}; do
  runPhase "$phase"
done

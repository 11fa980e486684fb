set -e
[ "$("$1" '1 + 2 * 3')" = 7 ] || exit 1
[ "$("$1" '(1+2)^2 / sqrt(9)')" = 3 ] || exit 1
if "$1" '1 +' 2>/dev/null; then exit 1; fi
echo "kcalc: ok"

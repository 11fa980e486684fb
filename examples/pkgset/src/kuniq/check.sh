set -e
[ "$(printf 'a\na\nb\na\n' | "$1")" = "$(printf 'a\nb\na')" ] || exit 1
[ "$(printf 'x\nx\n' | "$1" -c)" = "      2 x" ] || exit 1
echo "kuniq: ok"

set -e
[ "$(printf 'b\nc\na\n' | "$1")" = "$(printf 'a\nb\nc')" ] || exit 1
[ "$(printf '10\n9\n100\n' | "$1" -n -r)" = "$(printf '100\n10\n9')" ] || exit 1
echo "ksort: ok"

set -e
[ "$(printf 'abc\nxy\n' | "$1")" = "$(printf 'cba\nyx')" ] || exit 1
echo "krev: ok"

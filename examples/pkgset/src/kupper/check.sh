set -e
[ "$(echo 'Hello, World 1' | "$1")" = "HELLO, WORLD 1" ] || exit 1
echo "kupper: ok"

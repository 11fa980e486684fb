set -e
[ "$("$1")" = "Hello, world!" ] || [ -n "${HELLO_CUSTOM:-}" ]
[ "$("$1" -g hi)" = hi ]
"$1" --version | grep -q "hello 2.0"
echo "hello: all tests passed"

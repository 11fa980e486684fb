/* kuniq: writes standard input with repeated adjacent lines merged;
   -c prefixes each line with how many times it occurred. */
#include <stdio.h>
#include <string.h>

#include <kstr.h>

static void emit(const kstr *s, unsigned long n, int withCount) {
  if (withCount) printf("%7lu %s\n", n, s->data);
  else printf("%s\n", s->data);
}

int main(int argc, char **argv) {
  int withCount = argc > 1 && strcmp(argv[1], "-c") == 0;
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("Usage: kuniq [-c] < INPUT\nMerge repeated adjacent lines (-c: prefix counts).");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("kuniq 1.0 (libkstr %s)\n", kstr_version());
    return 0;
  }
  kstr prev, line;
  kstr_init(&prev);
  kstr_init(&line);
  unsigned long n = 0;
  while (kstr_getline(&line, stdin)) {
    if (n > 0 && strcmp(prev.data, line.data) == 0) { n++; continue; }
    if (n > 0) emit(&prev, n, withCount);
    prev.len = 0;
    kstr_append(&prev, line.data, line.len);
    n = 1;
  }
  if (n > 0) emit(&prev, n, withCount);
  kstr_free(&prev);
  kstr_free(&line);
  return 0;
}

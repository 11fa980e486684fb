/* ksort: sorts the lines of standard input bytewise; -r reverses, -n
   compares leading numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kstr.h>

static int numeric = 0, reverse = 0;

static int cmp(const void *a, const void *b) {
  const char *x = *(char *const *)a, *y = *(char *const *)b;
  int r;
  if (numeric) {
    double dx = strtod(x, NULL), dy = strtod(y, NULL);
    r = (dx > dy) - (dx < dy);
    if (r == 0) r = strcmp(x, y);
  } else {
    r = strcmp(x, y);
  }
  return reverse ? -r : r;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0) {
      puts("Usage: ksort [-r] [-n] < INPUT\nSort lines (-r: reversed; -n: by leading number).");
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("ksort 1.0 (libkstr %s)\n", kstr_version());
      return 0;
    }
    if (strcmp(argv[i], "-r") == 0) reverse = 1;
    else if (strcmp(argv[i], "-n") == 0) numeric = 1;
    else { fprintf(stderr, "ksort: unknown option %s\n", argv[i]); return 2; }
  }
  size_t n = 0, cap = 64;
  char **lines = malloc(cap * sizeof *lines);
  kstr line;
  kstr_init(&line);
  while (lines && kstr_getline(&line, stdin)) {
    if (n == cap) {
      char **more = realloc(lines, (cap *= 2) * sizeof *lines);
      if (!more) break;
      lines = more;
    }
    lines[n++] = strdup(line.data);
  }
  kstr_free(&line);
  if (!lines) { fputs("ksort: out of memory\n", stderr); return 1; }
  qsort(lines, n, sizeof *lines, cmp);
  for (size_t i = 0; i < n; i++) { puts(lines[i]); free(lines[i]); }
  free(lines);
  return 0;
}

/* kgrep: prints the lines of standard input that contain a fixed string;
   -v prints those that do not, -c only counts them. Exit status 1 when no
   line was selected, as grep. */
#include <stdio.h>
#include <string.h>

#include <kstr.h>

int main(int argc, char **argv) {
  int invert = 0, countOnly = 0, i = 1;
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("Usage: kgrep [-v] [-c] STRING < INPUT\n"
         "Print the lines containing STRING (-v: not containing it; -c: count them).");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("kgrep 1.0 (libkstr %s)\n", kstr_version());
    return 0;
  }
  for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
    if (strcmp(argv[i], "-v") == 0) invert = 1;
    else if (strcmp(argv[i], "-c") == 0) countOnly = 1;
    else { fprintf(stderr, "kgrep: unknown option %s\n", argv[i]); return 2; }
  }
  if (i + 1 != argc) { fputs("kgrep: give one STRING (see --help)\n", stderr); return 2; }
  kstr line;
  kstr_init(&line);
  unsigned long selected = 0;
  while (kstr_getline(&line, stdin)) {
    if (kstr_contains(line.data, argv[i]) == invert) continue;
    selected++;
    if (!countOnly) printf("%s\n", line.data);
  }
  if (countOnly) printf("%lu\n", selected);
  kstr_free(&line);
  return selected == 0;
}

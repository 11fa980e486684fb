/* krev: reverses the characters of each line. */
#include <stdio.h>
#include <string.h>

#include <kstr.h>

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("Usage: krev < INPUT\nWrite each line of standard input with its characters reversed.");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("krev 1.0 (libkstr %s)\n", kstr_version());
    return 0;
  }
  kstr line;
  kstr_init(&line);
  while (kstr_getline(&line, stdin)) {
    kstr_reverse(&line);
    fwrite(line.data, 1, line.len, stdout);
    putchar('\n');
  }
  kstr_free(&line);
  return 0;
}

/* kwc: counts lines, words and bytes of standard input or of files. */
#include <stdio.h>
#include <string.h>

#include <kstr.h>

static void count(FILE *f, size_t t[3]) {
  kstr line;
  kstr_init(&line);
  while (kstr_getline(&line, f)) {
    t[0]++;
    t[1] += kstr_count_words(line.data, line.len);
    t[2] += line.len + 1;
  }
  kstr_free(&line);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("Usage: kwc [FILE]...\nPrint line, word and byte counts of each FILE (or standard input).");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("kwc 1.0 (libkstr %s)\n", kstr_version());
    return 0;
  }
  size_t total[3] = {0, 0, 0};
  if (argc == 1) count(stdin, total);
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "r");
    if (!f) { perror(argv[i]); return 1; }
    count(f, total);
    fclose(f);
  }
  printf("%zu %zu %zu\n", total[0], total[1], total[2]);
  return 0;
}

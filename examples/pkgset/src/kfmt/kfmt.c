/* kfmt: fills the paragraphs of standard input to a width (default 72);
   blank lines separate paragraphs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kstr.h>

static void flush(kstr *para, size_t width) {
  size_t col = 0;
  char *save = NULL;
  for (char *w = strtok_r(para->data, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    size_t n = strlen(w);
    if (col > 0 && col + 1 + n > width) { putchar('\n'); col = 0; }
    if (col > 0) { putchar(' '); col++; }
    fputs(w, stdout);
    col += n;
  }
  if (col > 0) putchar('\n');
  para->len = 0;
  para->data[0] = '\0';
}

int main(int argc, char **argv) {
  size_t width = 72;
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("Usage: kfmt [-w WIDTH] < INPUT\nFill paragraphs to WIDTH columns (default 72).");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("kfmt 1.0 (libkstr %s)\n", kstr_version());
    return 0;
  }
  if (argc > 2 && strcmp(argv[1], "-w") == 0) width = strtoul(argv[2], NULL, 10);
  if (width < 1) { fputs("kfmt: the width must be at least 1\n", stderr); return 2; }
  kstr para, line;
  kstr_init(&para);
  kstr_init(&line);
  int first = 1;
  while (kstr_getline(&line, stdin)) {
    kstr_trim(&line);
    if (line.len == 0) {
      if (para.len > 0) { if (!first) putchar('\n'); flush(&para, width); first = 0; }
      continue;
    }
    if (para.len > 0) kstr_append(&para, " ", 1);
    kstr_append(&para, line.data, line.len);
  }
  if (para.len > 0) { if (!first) putchar('\n'); flush(&para, width); }
  kstr_free(&para);
  kstr_free(&line);
  return 0;
}

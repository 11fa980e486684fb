/* kcfg-get: prints the value of KEY in a key = value configuration FILE;
   exit status 1 when the key is absent, 2 on usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kcfg.h>

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("Usage: kcfg-get FILE KEY\nPrint the value of KEY in the key = value file FILE.");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts("kcfg-get 1.0"); return 0; }
  if (argc != 3) { fputs("kcfg-get: give FILE and KEY (see --help)\n", stderr); return 2; }
  FILE *f = fopen(argv[1], "r");
  if (!f) { perror(argv[1]); return 2; }
  char *v = kcfg_get(f, argv[2]);
  fclose(f);
  if (kcfg_errors() > 0) fprintf(stderr, "kcfg-get: %d malformed lines ignored\n", kcfg_errors());
  if (!v) return 1;
  puts(v);
  free(v);
  return 0;
}

#include "kcfg.h"

#include <stdlib.h>
#include <string.h>

#include <kstr.h>

static int errors;

int kcfg_errors(void) { return errors; }

char *kcfg_get(FILE *f, const char *key) {
  kstr line, k;
  char *found = NULL;
  kstr_init(&line);
  kstr_init(&k);
  errors = 0;
  while (kstr_getline(&line, f)) {
    char *hash = strchr(line.data, '#');
    if (hash) { *hash = '\0'; line.len = (size_t)(hash - line.data); }
    kstr_trim(&line);
    if (line.len == 0) continue;
    char *eq = strchr(line.data, '=');
    if (!eq) { errors++; continue; }
    k.len = 0;
    kstr_append(&k, line.data, (size_t)(eq - line.data));
    kstr_trim(&k);
    if (strcmp(k.data, key) != 0) continue;
    kstr v;
    kstr_init(&v);
    kstr_append(&v, eq + 1, strlen(eq + 1));
    kstr_trim(&v);
    free(found);
    found = v.data;
  }
  kstr_free(&line);
  kstr_free(&k);
  return found;
}

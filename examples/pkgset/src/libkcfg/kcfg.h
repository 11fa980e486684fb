#ifndef KCFG_H
#define KCFG_H
#include <stdio.h>

/// Looks `key` up in a `key = value` file read from `f` ('#' starts a
/// comment, blanks around keys and values are ignored). Returns a string
/// the caller frees, or NULL when the key is absent.
char *kcfg_get(FILE *f, const char *key);
/// The number of malformed lines met by the last kcfg_get.
int kcfg_errors(void);

#endif

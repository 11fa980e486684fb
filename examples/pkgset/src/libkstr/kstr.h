#ifndef KSTR_H
#define KSTR_H
#include <stddef.h>

/// A growable byte string; `data` is always NUL-terminated.
typedef struct {
  char *data;
  size_t len;
  size_t cap;
} kstr;

/// Initialises an empty string. Free it with kstr_free.
void kstr_init(kstr *s);
/// Releases the memory of `s` and leaves it empty.
void kstr_free(kstr *s);
/// Appends `n` bytes of `p`. Returns 0, or -1 when out of memory.
int kstr_append(kstr *s, const char *p, size_t n);
/// Reads a whole line (without its newline) from `f` into `s`.
/// Returns 1 for a line, 0 at end of file.
int kstr_getline(kstr *s, void *f);
/// Reverses the bytes of `s` in place.
void kstr_reverse(kstr *s);
/// Turns ASCII letters of `s` to upper case in place.
void kstr_upper(kstr *s);
/// Removes leading and trailing white space in place.
void kstr_trim(kstr *s);
/// Counts the words (runs of non-space bytes) of `p[0..n)`.
size_t kstr_count_words(const char *p, size_t n);
/// Returns 1 when `needle` occurs in `hay`, else 0.
int kstr_contains(const char *hay, const char *needle);
/// The library's version, e.g. "1.2.0".
const char *kstr_version(void);

#endif

/* The libkstr test suite: one check per function, a summary line, and a
   non-zero exit when anything fails. */
#include <stdio.h>
#include <string.h>

#include "kstr.h"

static int failures = 0, checks = 0;
#define CHECK(cond)                                             \
  do {                                                          \
    checks++;                                                   \
    if (!(cond)) {                                              \
      failures++;                                               \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, \
              #cond);                                           \
    }                                                           \
  } while (0)

int main(void) {
  kstr s;
  kstr_init(&s);
  CHECK(s.len == 0 && strcmp(s.data, "") == 0);
  for (int i = 0; i < 1000; i++) kstr_append(&s, "ab", 2);
  CHECK(s.len == 2000 && s.data[1999] == 'b' && s.data[2000] == '\0');
  kstr_free(&s);

  kstr_init(&s);
  kstr_append(&s, "hello", 5);
  kstr_reverse(&s);
  CHECK(strcmp(s.data, "olleh") == 0);
  kstr_upper(&s);
  CHECK(strcmp(s.data, "OLLEH") == 0);
  kstr_free(&s);

  kstr_init(&s);
  kstr_append(&s, "  \t padded \n", 12);
  kstr_trim(&s);
  CHECK(strcmp(s.data, "padded") == 0 && s.len == 6);
  kstr_free(&s);

  CHECK(kstr_count_words("", 0) == 0);
  CHECK(kstr_count_words("one two  three\n", 15) == 3);
  CHECK(kstr_contains("haystack", "st") == 1);
  CHECK(kstr_contains("haystack", "needle") == 0);
  CHECK(strlen(kstr_version()) > 0);

  printf("libkstr: %d checks, %d failures\n", checks, failures);
  return failures != 0;
}

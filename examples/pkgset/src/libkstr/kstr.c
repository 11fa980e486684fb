#include "kstr.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kstr_init(kstr *s) {
  s->data = NULL;
  s->len = 0;
  s->cap = 0;
  kstr_append(s, "", 0);
}

void kstr_free(kstr *s) {
  free(s->data);
  s->data = NULL;
  s->len = s->cap = 0;
}

int kstr_append(kstr *s, const char *p, size_t n) {
  if (s->len + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 16;
    while (cap < s->len + n + 1) cap *= 2;
    char *d = realloc(s->data, cap);
    if (!d) return -1;
    s->data = d;
    s->cap = cap;
  }
  memcpy(s->data + s->len, p, n);
  s->len += n;
  s->data[s->len] = '\0';
  return 0;
}

int kstr_getline(kstr *s, void *f) {
  int c;
  s->len = 0;
  s->data[0] = '\0';
  while ((c = fgetc((FILE *)f)) != EOF) {
    if (c == '\n') return 1;
    char ch = (char)c;
    if (kstr_append(s, &ch, 1) != 0) return 0;
  }
  return s->len > 0;
}

void kstr_reverse(kstr *s) {
  for (size_t i = 0, j = s->len; i + 1 < j; i++, j--) {
    char t = s->data[i];
    s->data[i] = s->data[j - 1];
    s->data[j - 1] = t;
  }
}

void kstr_upper(kstr *s) {
  for (size_t i = 0; i < s->len; i++)
    s->data[i] = (char)toupper((unsigned char)s->data[i]);
}

void kstr_trim(kstr *s) {
  size_t b = 0, e = s->len;
  while (b < e && isspace((unsigned char)s->data[b])) b++;
  while (e > b && isspace((unsigned char)s->data[e - 1])) e--;
  memmove(s->data, s->data + b, e - b);
  s->len = e - b;
  s->data[s->len] = '\0';
}

size_t kstr_count_words(const char *p, size_t n) {
  size_t words = 0;
  int in = 0;
  for (size_t i = 0; i < n; i++) {
    int sp = isspace((unsigned char)p[i]);
    if (!sp && !in) words++;
    in = !sp;
  }
  return words;
}

int kstr_contains(const char *hay, const char *needle) {
  return strstr(hay, needle) != NULL;
}

const char *kstr_version(void) { return KSTR_VERSION; }

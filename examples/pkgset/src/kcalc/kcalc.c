/* kcalc: evaluates arithmetic expressions, one per line of standard input
   or the command line: + - * / ^, parentheses, sqrt(), numbers. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *p;
static int bad;

static double expr(void);

static void skip(void) { while (isspace((unsigned char)*p)) p++; }

static double primary(void) {
  skip();
  if (*p == '(') {
    p++;
    double v = expr();
    skip();
    if (*p == ')') p++; else bad = 1;
    return v;
  }
  if (*p == '-') { p++; return -primary(); }
  if (strncmp(p, "sqrt", 4) == 0) { p += 4; return sqrt(primary()); }
  char *end;
  double v = strtod(p, &end);
  if (end == p) bad = 1;
  p = end;
  return v;
}

static double power(void) {
  double b = primary();
  skip();
  if (*p == '^') { p++; return pow(b, power()); }
  return b;
}

static double term(void) {
  double v = power();
  for (;;) {
    skip();
    if (*p == '*') { p++; v *= power(); }
    else if (*p == '/') { p++; v /= power(); }
    else return v;
  }
}

static double expr(void) {
  double v = term();
  for (;;) {
    skip();
    if (*p == '+') { p++; v += term(); }
    else if (*p == '-') { p++; v -= term(); }
    else return v;
  }
}

static int eval(const char *s) {
  p = s;
  bad = 0;
  double v = expr();
  skip();
  if (bad || *p) { fprintf(stderr, "kcalc: cannot read '%s'\n", s); return 1; }
  printf("%.10g\n", v);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    puts("Usage: kcalc [EXPRESSION]\nEvaluate EXPRESSION, or each line of standard input.");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts("kcalc 1.0"); return 0; }
  if (argc > 1) return eval(argv[1]);
  char line[4096];
  int rc = 0;
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = '\0';
    rc |= eval(line);
  }
  return rc;
}

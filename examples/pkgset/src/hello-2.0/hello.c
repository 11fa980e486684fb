/* GNU-hello-like greeter, shipped as a release tarball. */
#include <stdio.h>
#include <string.h>

#include "config.h"

int main(int argc, char **argv) {
  const char *greeting = DEFAULT_GREETING;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--version") == 0) { puts(PACKAGE_STRING); return 0; }
    if (strcmp(argv[i], "--help") == 0) {
      puts("Usage: hello [-g TEXT]\nPrint a friendly greeting.");
      return 0;
    }
    if (strcmp(argv[i], "-g") == 0 && i + 1 < argc) greeting = argv[++i];
    else { fprintf(stderr, "hello: unknown argument %s\n", argv[i]); return 1; }
  }
  puts(greeting);
  return 0;
}

/* A builder for another CPU, cross-compiled by the platform tests
 * (crossCompileAarch64) and run under qemu-user: writes the machine uname
 * reports, its argument 0 and its arguments to $out. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/utsname.h>

int main(int argc, char** argv) {
  const char* out = getenv("out");
  struct utsname u;
  if (!out || uname(&u) != 0) return 2;
  FILE* f = fopen(out, "w");
  if (!f) return 3;
  fprintf(f, "machine=%s\nargv0=%s\n", u.machine, argv[0]);
  for (int i = 1; i < argc; i++) fprintf(f, "arg=%s\n", argv[i]);
  return fclose(f) == 0 ? 0 : 4;
}

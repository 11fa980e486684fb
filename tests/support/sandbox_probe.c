/* Tries one escape from a build sandbox and reports it (the sandbox tests
 * run it as a builder's child). Exits 0 when the attempt SUCCEEDED (an
 * escape), 1 when it failed, 2 on bad usage; prints what happened.
 *
 *   read PATH          open and read a file or list a directory
 *   write PATH         create or append to a file
 *   connect PORT       TCP connect to 127.0.0.1:PORT
 *   fetch PORT FILE    connect, copy everything received into FILE
 *   kill PID           kill(PID, SIGKILL)
 *   killall            kill(-1, SIGKILL): everything this user may signal
 *   ptrace PID         PTRACE_ATTACH to PID
 *   daemon TOKEN       setsid + double fork; the grandchild (whose argv
 *                      holds TOKEN) waits forever; exits once it runs
 *   ns TYPE LINK       whether /proc/self/ns/TYPE reads LINK (the host's
 *                      namespace of that type, e.g. "ipc:[4026531839]")
 *   setid HOW MODE PATH  create PATH and give it the octal MODE through
 *                      HOW: chmod, fchmod, fchmodat or fchmodat2 (each
 *                      the raw system call); "escaped" when it worked and
 *                      MODE has a setuid/setgid bit, which a build must
 *                      not set
 *   xattr PATH         set the extended attribute user.kiln on PATH
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(int ok, const char* what, const char* arg) {
  if (ok)
    printf("ESCAPED: %s %s\n", what, arg);
  else
    printf("blocked: %s %s: %s\n", what, arg, strerror(errno));
  fflush(stdout);
  return ok ? 0 : 1;
}

static int doRead(const char* path) {
  DIR* d = opendir(path);
  if (d) {
    struct dirent* e;
    while ((e = readdir(d))) printf("  %s\n", e->d_name);
    closedir(d);
    return report(1, "list", path);
  }
  int fd = open(path, O_RDONLY);
  char buf[64];
  int ok = fd >= 0 && read(fd, buf, sizeof buf) >= 0;
  return report(ok, "read", path);
}

static int doWrite(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  int ok = fd >= 0 && write(fd, "pwned\n", 6) == 6;
  return report(ok, "write", path);
}

static int connectTo(const char* port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) < 0) return -1;
  return fd;
}

static int doFetch(const char* port, const char* file) {
  int fd = connectTo(port);
  if (fd < 0) return report(0, "connect", port);
  int out = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) return report(0, "write", file);
  return report(out >= 0 && n == 0, "fetch", port);
}

static int doDaemon(const char* token) {
  int p[2];
  if (pipe(p) < 0) return 2;
  pid_t a = fork();
  if (a == 0) {
    setsid();
    if (fork() == 0) {
      close(p[0]);
      if (write(p[1], "x", 1) != 1) _exit(1);
      close(p[1]);
      for (;;) pause();
    }
    _exit(0);
  }
  close(p[1]);
  char c;
  int ok = read(p[0], &c, 1) == 1;
  waitpid(a, NULL, 0);
  return report(ok, "daemon running", token);
}

static int doNamespace(const char* type, const char* hostLink) {
  char path[64], link[128];
  snprintf(path, sizeof path, "/proc/self/ns/%s", type);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n < 0) return 2;
  link[n] = 0;
  printf("%s: %s\n", type, link);
  errno = 0;
  return report(strcmp(link, hostLink) == 0, "shares the host's namespace",
                type);
}

static int doSetId(const char* how, const char* modeText, const char* path) {
  mode_t mode = (mode_t)strtol(modeText, NULL, 8);
  int fd = open(path, O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return report(0, "create", path);
  long rc = -1;
  if (!strcmp(how, "chmod")) rc = syscall(SYS_chmod, path, mode);
  if (!strcmp(how, "fchmod")) rc = syscall(SYS_fchmod, fd, mode);
  if (!strcmp(how, "fchmodat"))
    rc = syscall(SYS_fchmodat, AT_FDCWD, path, mode);
  if (!strcmp(how, "fchmodat2")) rc = syscall(452, AT_FDCWD, path, mode, 0);
  close(fd);
  struct stat st;
  int set = rc == 0 && stat(path, &st) == 0 &&
            (st.st_mode & 07777) == (mode & 07777);
  if (!(mode & (S_ISUID | S_ISGID))) {  /* a plain mode: must work */
    printf("%s: %s %s %s\n", set ? "allowed" : "REFUSED", how, modeText, path);
    return set ? 0 : 1;
  }
  return report(set, how, path);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* cmd = argv[1];
  const char* arg = argc > 2 ? argv[2] : "";
  if (!strcmp(cmd, "read")) return doRead(arg);
  if (!strcmp(cmd, "write")) return doWrite(arg);
  if (!strcmp(cmd, "connect")) return report(connectTo(arg) >= 0, cmd, arg);
  if (!strcmp(cmd, "fetch") && argc > 3) return doFetch(arg, argv[3]);
  if (!strcmp(cmd, "kill"))
    return report(kill(atoi(arg), SIGKILL) == 0, cmd, arg);
  if (!strcmp(cmd, "killall")) {
    int ok = kill(-1, SIGKILL) == 0;
    return report(ok, cmd, "-1");
  }
  if (!strcmp(cmd, "ptrace"))
    return report(ptrace(PTRACE_ATTACH, atoi(arg), 0, 0) == 0, cmd, arg);
  if (!strcmp(cmd, "daemon")) return doDaemon(arg);
  if (!strcmp(cmd, "ns") && argc > 3) return doNamespace(arg, argv[3]);
  if (!strcmp(cmd, "setid") && argc > 4) return doSetId(arg, argv[3], argv[4]);
  if (!strcmp(cmd, "xattr"))
    return report(setxattr(arg, "user.kiln", "x", 1, 0) == 0, cmd, arg);
  return 2;
}

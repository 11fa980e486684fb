# The collection's one impurity, declared in one place: the compiler and the
# basic tools come from the host that builds (Debian 12's gcc, binutils,
# make, coreutils, bash, curl), seen inside every build's sandbox at these
# paths, read-only. A farm building this collection gives its workers these
# paths as the sandbox's extra paths (kiln: `extra-paths`, see
# see README.md here; Nix: `sandbox-paths`). Nothing else of the host
# is visible to a build.
{
  # Host folders made visible in each build's sandbox: the tools, their
  # libraries and headers, Debian's alternatives (awk), and the folder of
  # release tarballs that fetchurl reads through file:// URLs.
  sandboxPaths = [ "/bin" "/usr/bin" "/lib" "/lib64" "/usr/lib" "/usr/include" "/etc/alternatives" (toString ./tarballs) ];
  # Where builders look for the host's tools.
  PATH = "/usr/bin:/bin";
  # The shell every builder runs.
  shell = "/bin/bash";
}

# Third-party dependencies, all from Debian packages (scripts/install-deps.sh);
# libgc from Debian's source package, built here (KilnLibgc.cmake).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenSSL 3 REQUIRED)
find_package(SQLite3 REQUIRED)
# S3 caches: libcurl signs requests (AWS SigV4). Debian: libcurl4-openssl-dev.
find_package(CURL 7.75 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(tomlplusplus 3 CONFIG REQUIRED)
# libzmq: neither linked nor its Cflags used: the protocol loads it on
# first use (protocol/src/zmq_lazy.cc, kiln/common/lazy_library.h). Its
# pkg-config Cflags name the headers of its own
# optional dependencies (pgm, libxml2, an `-isystem` for krb5), which
# zmq.h does not include; CMake files that `-isystem` under the include
# directories at the first configure and under the compile options at the
# next, so every file including zmq.h was compiled again whenever CMake
# ran again (the second run of scripts/run-example.sh rebuilt half the
# tree). zmq.h is in the default include path.
pkg_check_modules(ZMQ REQUIRED libzmq)
add_library(kiln_zmq INTERFACE IMPORTED)
pkg_check_modules(LZMA REQUIRED IMPORTED_TARGET liblzma)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
# The state layer's PostgreSQL client (Debian libpq-dev).
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
# libcurl and libpq: headers only. Their modules load them on first use
# (kiln/common/lazy_library.h), so that the processes that never call them
# do not map them and what they bring (gnutls, krb5, ldap: ~3.4 MB
# resident in every `kiln instantiate`).
add_library(kiln_curl_headers INTERFACE IMPORTED)
set_target_properties(kiln_curl_headers PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${CURL_INCLUDE_DIRS}")
add_library(kiln_libpq_headers INTERFACE IMPORTED)
set_target_properties(kiln_libpq_headers PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${LIBPQ_INCLUDE_DIRS}")
# The Boehm collector: Debian's source built in the build tree with mark
# bits (target kiln_libgc).
include(KilnLibgc)
# The linux sandbox's system-call filter (Debian: libseccomp-dev).
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
if(KILN_TCMALLOC AND NOT KILN_SANITIZE AND NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  pkg_check_modules(TCMALLOC IMPORTED_TARGET libtcmalloc_minimal)
  if(NOT TCMALLOC_FOUND)
    message(WARNING "tcmalloc_minimal not found (Debian: libgoogle-perftools-dev, "
      "scripts/install-deps.sh): kiln uses glibc's malloc and evaluates ~10 % slower")
  endif()
endif()
if(KILN_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(KILN_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()

# The shared reference material (spec vectors, conformance suite, bench
# generator) lives beside the repository by default.
set(_kiln_shared_default "${CMAKE_CURRENT_LIST_DIR}/../../shared")
if(NOT EXISTS "${_kiln_shared_default}/spec" AND EXISTS "/work/shared/spec")
  set(_kiln_shared_default "/work/shared")
endif()
set(KILN_SHARED_DIR "${_kiln_shared_default}" CACHE PATH
    "Folder holding spec/, conformance/ and bench/ reference material")
get_filename_component(KILN_SHARED_DIR "${KILN_SHARED_DIR}" ABSOLUTE)
if(NOT EXISTS "${KILN_SHARED_DIR}/spec/vectors")
  message(WARNING "KILN_SHARED_DIR=${KILN_SHARED_DIR} has no spec/vectors: "
    "the vector tests will fail. Pass -DKILN_SHARED_DIR=/path/to/shared.")
endif()

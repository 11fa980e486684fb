# The Boehm collector the evaluator links (target kiln_libgc): Debian's own
# libgc 8.2.2-3 source (scripts/install-deps.sh unpacks it into
# KILN_LIBGC_SOURCE_DIR) built once per build tree with Debian's
# configuration (debian/rules: pthreads, parallel marking, thread-local
# lists, C++ headers, compiler atomics, munmap, handle-fork: bdwgc's CMake
# defaults give the same definitions as its configure there) and three
# changes: INITIAL_MARK_STACK_SIZE (below), USE_MARK_BITS, and GC_allochblk
# skipping empty free lists (cmake/KilnLibgcSource.cmake). Debian's build
# marks with one byte per 16-byte granule
# (libgc picks USE_MARK_BYTES whenever PARALLEL_MARK is on), so each 4 KiB
# block's header is ~330 bytes; with bits (set atomically by the parallel
# markers) it is ~110: ~22 MB less peak RSS at gen-strings 50,000
# (docs/evaluator.md, "Garbage collection"). Static and position
# independent, so no process loads Debian's libgc.so.1 and the .deb no
# longer depends on libgc1.
include(ExternalProject)

set(KILN_LIBGC_SOURCE_DIR /usr/local/src/kiln-libgc-8.2.2-3 CACHE PATH
    "Debian's libgc 8.2.2-3 source, unpacked by scripts/install-deps.sh")
set(_kiln_libgc_version_h ${KILN_LIBGC_SOURCE_DIR}/include/gc_version.h)
if(NOT EXISTS ${KILN_LIBGC_SOURCE_DIR}/CMakeLists.txt OR NOT EXISTS ${_kiln_libgc_version_h})
  message(FATAL_ERROR "No libgc source in KILN_LIBGC_SOURCE_DIR=${KILN_LIBGC_SOURCE_DIR}: "
    "run scripts/install-deps.sh (it fetches Debian's libgc 8.2.2-3 source there), "
    "or pass -DKILN_LIBGC_SOURCE_DIR=/path/to/it.")
endif()
file(STRINGS ${_kiln_libgc_version_h} _kiln_libgc_v
  REGEX "^#define GC_TMP_VERSION_(MAJOR|MINOR|MICRO) [0-9]+")
string(REGEX REPLACE "#define GC_TMP_VERSION_[A-Z]+ ([0-9]+)[^;]*" "\\1" _kiln_libgc_v "${_kiln_libgc_v}")
if(NOT _kiln_libgc_v STREQUAL "8;2;2")
  message(FATAL_ERROR "${KILN_LIBGC_SOURCE_DIR} is not libgc 8.2.2 (${_kiln_libgc_v}): "
    "run scripts/install-deps.sh")
endif()

set(_kiln_libgc_prefix ${CMAKE_BINARY_DIR}/libgc)
set(_kiln_libgc_lib ${_kiln_libgc_prefix}/lib/libgc.a)
# The mark stack's initial size in entries (16 bytes each), and the size
# libgc keeps it at unless a marking overflows it: 1,048,576 (16 MiB of
# address space, resident only as deep as a marking goes). libgc's own
# default is 4,096 and it doubles only after an overflowing collection;
# package sets' deep graphs overflowed up to 262,144. libgc also derives
# from it the entries dropped on an overflow (an eighth: 131,072 of the
# shared stack; parallel markers' 4,096-entry local stacks never overflow
# in libgc's own marking, which pushes under half of one per step) and
# where thread stacks are scanned eagerly instead of pushed as one range
# (the last eighth). The evaluator reads the number too
# (KILN_GC_INITIAL_MARK_STACK, evaluator/CMakeLists.txt): mark_stack.cc
# grows the stack further only when asked for more, and gives back the
# pages of this much after each marking.
set(KILN_LIBGC_INITIAL_MARK_STACK 1048576)
# Debian's compiler flags (dpkg-buildflags: -O2, stack protector, fortify),
# without its -g.
set(_kiln_libgc_cflags "-fstack-protector-strong -D_FORTIFY_SOURCE=2 -DUSE_MARK_BITS")
string(APPEND _kiln_libgc_cflags " -DINITIAL_MARK_STACK_SIZE=${KILN_LIBGC_INITIAL_MARK_STACK}")
# bdwgc 8.2.2's feature checks link with `-c -Werror`, which clang rejects
# (unused linker input) where gcc only warns: every check, -fno-strict-aliasing
# among them, would fail silently under clang.
if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
  string(APPEND _kiln_libgc_cflags " -Wno-unused-command-line-argument")
endif()
# Built from a copy in the build tree with one change to GC_allochblk
# (cmake/KilnLibgcSource.cmake: empty free lists skipped without a call);
# KILN_LIBGC_SOURCE_DIR itself is left as Debian made it.
set(_kiln_libgc_source ${_kiln_libgc_prefix}/src)
ExternalProject_Add(kiln_libgc_build
  SOURCE_DIR ${_kiln_libgc_source}
  DOWNLOAD_COMMAND ${CMAKE_COMMAND} -DFROM=${KILN_LIBGC_SOURCE_DIR} -DTO=${_kiln_libgc_source}
    -P ${CMAKE_CURRENT_LIST_DIR}/KilnLibgcSource.cmake
  # Not .../build: that of a tree configured before the copy names the
  # unchanged source in its CMake cache.
  BINARY_DIR ${_kiln_libgc_prefix}/obj
  INSTALL_DIR ${_kiln_libgc_prefix}
  CMAKE_ARGS
    -G ${CMAKE_GENERATOR}
    -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
    -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER}
    -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
    -DCMAKE_C_FLAGS=${_kiln_libgc_cflags}
    -DCMAKE_C_FLAGS_RELEASE=-O2
    -DCMAKE_CXX_FLAGS_RELEASE=-O2
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON
    -DCMAKE_INSTALL_PREFIX=<INSTALL_DIR>
    -DCMAKE_INSTALL_LIBDIR=lib
    -DBUILD_SHARED_LIBS=OFF
    -Denable_cplusplus=ON
    -Denable_docs=OFF
    -Dbuild_cord=OFF
    -Dbuild_tests=OFF
  BUILD_BYPRODUCTS ${_kiln_libgc_lib}
  UPDATE_COMMAND ""
  USES_TERMINAL_BUILD OFF)

# A changed copy script copies and changes the source again.
ExternalProject_Add_StepDependencies(kiln_libgc_build download
  ${CMAKE_CURRENT_LIST_DIR}/KilnLibgcSource.cmake)

# The headers are installed into the prefix at build time; the folder must
# exist when CMake checks the imported target.
file(MAKE_DIRECTORY ${_kiln_libgc_prefix}/include)
add_library(kiln_libgc STATIC IMPORTED GLOBAL)
set_target_properties(kiln_libgc PROPERTIES
  IMPORTED_LOCATION ${_kiln_libgc_lib}
  INTERFACE_INCLUDE_DIRECTORIES ${_kiln_libgc_prefix}/include
  INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS}")
add_dependencies(kiln_libgc kiln_libgc_build)

# Shared build settings for kiln's own code.
#
# kiln_add_module(NAME DEPS ...): one static library per module, built from
#   <module>/src/*.cc, public headers under <module>/include, warnings on
#   (as errors with KILN_WERROR). Sources are globbed so that new files
#   need no CMake edit.
# kiln_add_unit_test(MODULE DEPS ...): one GoogleTest binary per module from
#   tests/unit/<module>/*.cc, registered with ctest test by test.

if(KILN_WERROR)
  set(KILN_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)
else()
  set(KILN_WARNINGS -Wall -Wextra -Wno-unused-parameter)
endif()
# GCC 12 at -O3 reports -Wrestrict false positives inside libstdc++'s own
# std::string concatenation ("x" + std::string&&; GCC bug 105329, fixed in
# 12.3 and 13). They are not in kiln's code, and -Werror turned them into a
# failed Release build, so that one check is off for those compilers.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 12.3)
  list(APPEND KILN_WARNINGS -Wno-restrict)
endif()
set(KILN_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/..)

if(KILN_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

function(kiln_add_module name)
  cmake_parse_arguments(ARG "" "" "DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cc)
  if(NOT _srcs)
    # A module not written yet: a header-only placeholder keeps links valid.
    add_library(kiln_${name} INTERFACE)
    add_library(kiln::${name} ALIAS kiln_${name})
    target_include_directories(kiln_${name} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(kiln_${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(kiln_${name} STATIC ${_srcs})
  add_library(kiln::${name} ALIAS kiln_${name})
  target_include_directories(kiln_${name}
    PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_compile_options(kiln_${name} PRIVATE ${KILN_WARNINGS})
  target_link_libraries(kiln_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

function(kiln_add_unit_test module)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  if(NOT _srcs)
    return()
  endif()
  add_executable(${module}_test ${_srcs})
  target_compile_options(${module}_test PRIVATE ${KILN_WARNINGS})
  target_include_directories(${module}_test PRIVATE ${KILN_SOURCE_DIR}/tests/support)
  target_link_libraries(${module}_test PRIVATE ${ARG_DEPS} kiln_test_support GTest::gtest GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${module}_test
    PROPERTIES LABELS "unit;${module}"
    DISCOVERY_TIMEOUT 60)
endfunction()

# kiln_require_links_only(TARGET ALLOWED ...): fails the configuration if
# TARGET declares a link dependency outside ALLOWED (a module boundary that
# must hold, e.g. the scheduler's pure core links only common). The unit
# test registered by kiln_check_undefined_symbols checks the built archive.
function(kiln_require_links_only target)
  cmake_parse_arguments(ARG "" "" "ALLOWED" ${ARGN})
  get_target_property(_libs ${target} LINK_LIBRARIES)
  if(NOT _libs)
    return()
  endif()
  foreach(_lib ${_libs})
    if(NOT _lib IN_LIST ARG_ALLOWED)
      message(FATAL_ERROR "${target} may link only ${ARG_ALLOWED}, but links "
        "${_lib} (see docs/architecture.md, \"Modules and dependencies\")")
    endif()
  endforeach()
endfunction()

# kiln_check_undefined_symbols(NAME TARGET FORBIDDEN regex...): a ctest
# (label unit) that fails if the archive of TARGET references a symbol
# matching one of the regexes (checks what the code uses, not only what
# CMake declares).
function(kiln_check_undefined_symbols name target)
  cmake_parse_arguments(ARG "" "" "FORBIDDEN" ${ARGN})
  if(NOT KILN_BUILD_TESTS)
    return()
  endif()
  string(JOIN "|" _re ${ARG_FORBIDDEN})
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DARCHIVE=$<TARGET_FILE:${target}>
            -DNM=${CMAKE_NM} "-DFORBIDDEN=${_re}"
            -P ${KILN_SOURCE_DIR}/cmake/check_symbols.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "unit")
endfunction()

# Shared build settings for kiln's own code.
#
# kiln_add_module(NAME DEPS ...): one static library per module, built from
#   <module>/src/*.cc, public headers under <module>/include, warnings as
#   errors. Sources are globbed so that new files need no CMake edit.
# kiln_add_unit_test(MODULE DEPS ...): one GoogleTest binary per module from
#   tests/unit/<module>/*.cc, registered with ctest test by test.

set(KILN_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)
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
  target_compile_definitions(${module}_test PRIVATE
    KILN_SHARED_DIR="${KILN_SHARED_DIR}"
    KILN_SOURCE_DIR="${KILN_SOURCE_DIR}"
    KILN_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gtest_discover_tests(${module}_test
    PROPERTIES LABELS "unit;${module}"
    DISCOVERY_TIMEOUT 60)
endfunction()

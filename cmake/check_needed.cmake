# cmake -DBINARY=kiln -DOBJDUMP=objdump -DFORBIDDEN=regex -P check_needed.cmake
# Fails if a shared library the executable needs at start (its NEEDED
# entries) matches FORBIDDEN: those are loaded on first use instead
# (kiln/common/lazy_library.h).
execute_process(COMMAND ${OBJDUMP} -p ${BINARY}
  OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${OBJDUMP} -p ${BINARY} failed (${_rc})")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(_bad "")
set(_needed 0)
foreach(_l ${_lines})
  if(_l MATCHES "^ *NEEDED +(.*)$")
    math(EXPR _needed "${_needed} + 1")
    if(CMAKE_MATCH_1 MATCHES "${FORBIDDEN}")
      string(APPEND _bad "  ${CMAKE_MATCH_1}\n")
    endif()
  endif()
endforeach()
if(_needed EQUAL 0)
  message(FATAL_ERROR "${BINARY}: no NEEDED entries read")
endif()
if(_bad)
  message(FATAL_ERROR "${BINARY} links what it must load on first use (${FORBIDDEN}):\n${_bad}")
endif()
message(STATUS "${BINARY}: ${_needed} libraries needed, none matches ${FORBIDDEN}")

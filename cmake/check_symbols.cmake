# cmake -DARCHIVE=lib.a -DNM=nm -DFORBIDDEN=regex -P check_symbols.cmake
# Fails if an undefined symbol of the archive (demangled) matches FORBIDDEN.
execute_process(COMMAND ${NM} -C -u ${ARCHIVE}
  OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -C -u ${ARCHIVE} failed (${_rc})")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(_bad "")
foreach(_l ${_lines})
  if(_l MATCHES "${FORBIDDEN}")
    string(APPEND _bad "  ${_l}\n")
  endif()
endforeach()
if(_bad)
  message(FATAL_ERROR "${ARCHIVE} uses symbols it must not (${FORBIDDEN}):\n${_bad}")
endif()
message(STATUS "${ARCHIVE}: no symbol matches ${FORBIDDEN}")

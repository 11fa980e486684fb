# Run at build time (cmake -P) by the `kiln_man` target: writes OUTDIR/kiln.1.gz
# from `KILN --help` and one OUTDIR/kiln-WORDS.1.gz per command that help
# lists (kiln-store-add.1.gz for `kiln store add`), each made by HELP2MAN
# from the command's own --help. Fails (so the build fails) if help2man does.
execute_process(COMMAND ${KILN} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${KILN} --help failed (${rc})")
endif()
execute_process(COMMAND ${KILN} --version OUTPUT_VARIABLE version_text)
string(REGEX MATCH "^kiln ([^\n]+)" _ "${version_text}")
set(version "${CMAKE_MATCH_1}")
file(REMOVE_RECURSE ${OUTDIR})
file(MAKE_DIRECTORY ${OUTDIR})

# page(NAME HELP_OPTION SUMMARY): OUTDIR/NAME.1.gz.
function(page name help_option summary)
  set(out ${OUTDIR}/${name}.1)
  execute_process(
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr
            "--version-string=${name} ${version}"
            "--help-option=${help_option}" "--name=${summary}"
            --section=1 --source=kiln --manual=kiln --output=${out} ${KILN}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "help2man for ${name}: ${err}")
  endif()
  execute_process(COMMAND gzip -n -9 -f ${out} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${out} failed")
  endif()
endfunction()

page(kiln --help "a build farm for Nix package collections")
string(REPLACE "\n" ";" lines "${help}")
set(in_commands OFF)
foreach(line IN LISTS lines)
  if(line STREQUAL "Commands:")
    set(in_commands ON)
  elseif(in_commands AND line STREQUAL "")
    break()
  elseif(in_commands AND line MATCHES "^  ([a-z][a-z0-9 -]*[a-z0-9])  +(.*)$")
    set(words "${CMAKE_MATCH_1}")
    set(summary "${CMAKE_MATCH_2}")
    string(REPLACE " " "-" name "kiln-${words}")
    page(${name} "${words} --help" "${summary}")
  endif()
endforeach()

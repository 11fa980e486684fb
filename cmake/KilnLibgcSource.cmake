# Copies Debian's libgc source (FROM) into the build tree (TO) and makes
# kiln's one change to it, run as a script (cmake -P) by the download step
# of cmake/KilnLibgc.cmake: FROM (scripts/install-deps.sh's unpacked
# source) is shared and stays as Debian made it.
#
# The change: GC_allochblk, looking for a free heap block for a new block of
# objects, calls GC_allochblk_nth on each of its 60 free lists in turn, and
# while the heap only grows every list but the last (one large free block)
# is empty: ~60 calls for every 4 KiB block (596,000 for 9,678 blocks at
# gen-pkgset 3,000: 1.4 % of kiln's instructions). It now skips an empty
# list without the call; which block it finds is unchanged.
if(NOT FROM OR NOT TO)
  message(FATAL_ERROR "KilnLibgcSource.cmake: pass -DFROM=<libgc source> -DTO=<copy>")
endif()
file(REMOVE_RECURSE ${TO})
file(COPY ${FROM}/ DESTINATION ${TO})
set(_file ${TO}/allchblk.c)
file(READ ${_file} _text)
set(_old "    for (; start_list <= split_limit; ++start_list) {\n        result = GC_allochblk_nth(sz, kind, flags, start_list, may_split);")
set(_new "    for (; start_list <= split_limit; ++start_list) {\n        if (NULL == GC_hblkfreelist[start_list]) continue; /* kiln */\n        result = GC_allochblk_nth(sz, kind, flags, start_list, may_split);")
string(FIND "${_text}" "${_old}" _at)
if(_at EQUAL -1)
  message(FATAL_ERROR "KilnLibgcSource.cmake: ${_file} is not libgc 8.2.2's (GC_allochblk's loop not found)")
endif()
string(REPLACE "${_old}" "${_new}" _text "${_text}")
file(WRITE ${_file} "${_text}")

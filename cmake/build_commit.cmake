# build_commit.cmake - run at every build (CMakeLists.txt, target zt_build_commit): writes OUT with
# ZT_BUILD_COMMIT, the source tree's git commit ("-dirty" with uncommitted changes to tracked files;
# "unknown" outside git), rewriting it only when it changed so nothing rebuilds needlessly. The
# build fingerprint the ranks compare at start-up carries it (src/comm/build_id.c).
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD OUTPUT_VARIABLE commit
                RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" diff --quiet HEAD -- RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty EQUAL 1)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "#define ZT_BUILD_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()

# Installs the built kiln into a fresh prefix, then configures, builds and runs
# examples/find_package_demo against it with find_package(kiln) — as a user's project would.
# Then checks that the installed AOT C ABI header (kiln/kiln_aot.h) is valid C11.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${KILN_BINARY_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${KILN_SOURCE_DIR}/examples/find_package_demo"
                  -B "${WORK_DIR}/build" -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                  -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the demo against the installed kiln failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the demo against the installed kiln failed (${rc})")
endif()
execute_process(COMMAND "${WORK_DIR}/build/find_package_demo" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "demo printed: ${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "sum = 6" OR NOT out MATCHES "compiled = 15 \\(replays: 1\\)")
  message(FATAL_ERROR "the demo built against the installed kiln failed (${rc}): ${out}")
endif()

# The AOT C ABI header is installed and is C11 (a C program includes nothing else of kiln).
file(WRITE "${WORK_DIR}/aot_abi.c" "#include <kiln/kiln_aot.h>
static int uses(const kiln_aot_api* api) {
  kiln_tensor t = {0, KILN_BOOL, 0, 0};
  (void)t;
  return api && api->abi_version == KILN_AOT_ABI_VERSION && KILN_AOT_MAX_RANK >= 4;
}
int main(void) { return uses(0); }
")
execute_process(COMMAND "${C_COMPILER}" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only
                  -I "${WORK_DIR}/prefix/include" "${WORK_DIR}/aot_abi.c"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed kiln/kiln_aot.h is not valid C11 (${rc}): ${err}")
endif()

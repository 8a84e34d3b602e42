# `kiln aot` from an installed kiln, as a user runs it: installs into a fresh prefix, compiles
# mlp and gpt into libraries with the installed kiln, builds examples/aot_c (C11, nothing of
# kiln but the kiln_aot.h copied beside each library), runs each library on the input
# `kiln run --save-input` writes, and checks its output with `kiln run --check-output` (eager,
# by the f64 reference rule). Each library needs nothing of kiln or LLVM (its NEEDED list).
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${KILN_BINARY_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
set(kiln "${WORK_DIR}/prefix/bin/kiln")

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run_checked("kiln aot mlp" "${kiln}" aot mlp -o "${WORK_DIR}/mlp")
run_checked("kiln aot gpt" "${kiln}" aot gpt -o "${WORK_DIR}/gpt")
run_checked("building examples/aot_c" "${C_COMPILER}" -std=c11 -Wall -Wextra -Wpedantic -Werror
            -I "${WORK_DIR}/mlp" "${KILN_SOURCE_DIR}/examples/aot_c/main.c" -ldl
            -o "${WORK_DIR}/aot_run")

foreach(model mlp gpt)
  set(lib "${WORK_DIR}/${model}/lib${model}.so")
  run_checked("readelf ${model}" readelf -d "${lib}")
  string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" needed "${last_output}")
  foreach(n IN LISTS needed)
    if(NOT n MATCHES "\\[(libc|libm|libgomp|libgcc_s|libstdc\\+\\+|libdnnl|ld-linux[-a-z0-9_]*)\\.so")
      message(FATAL_ERROR "lib${model}.so needs ${n}; a library needs only libc, libm, libgomp, "
                          "libgcc_s, libstdc++, libdnnl and the dynamic loader")
    endif()
  endforeach()
  message(STATUS "lib${model}.so needs: ${needed}")
  run_checked("kiln run ${model} --save-input" "${kiln}" run ${model} --mode eager
              --save-input "${WORK_DIR}/${model}.in")
  run_checked("aot_run ${model}" "${WORK_DIR}/aot_run" "${lib}" --input "${WORK_DIR}/${model}.in"
              --output "${WORK_DIR}/${model}.out")
  message(STATUS "aot_run ${model}: ${last_output}")
  run_checked("kiln run ${model} --check-output" "${kiln}" run ${model} --mode eager
              --check-output "${WORK_DIR}/${model}.out")
  if(NOT last_output MATCHES "file matches eager: yes")
    message(FATAL_ERROR "lib${model}.so's output does not match eager:\n${last_output}")
  endif()
endforeach()

# The check can fail: the library's output on another input (every element 0.5) is refused.
run_checked("aot_run mlp on 0.5s" "${WORK_DIR}/aot_run" "${WORK_DIR}/mlp/libmlp.so"
            --output "${WORK_DIR}/other.out")
execute_process(COMMAND "${kiln}" run mlp --mode eager --check-output "${WORK_DIR}/other.out"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT out MATCHES "file matches eager: no")
  message(FATAL_ERROR "kiln run --check-output accepted another input's output (${rc}):\n${out}")
endif()

# Two models linked into one C program, each through its own NAME_aot_entry (N.h).
file(WRITE "${WORK_DIR}/two_models.c" [=[
#include <stdio.h>
#include <string.h>
#include "mlp.h"
#include "gpt.h"
int main(void) {
  const char* a = mlp_aot_entry()->describe();
  const char* b = gpt_aot_entry()->describe();
  printf("%.60s\n%.60s\n", a, b);
  return MLP_NUM_INPUTS == 1 && GPT_NUM_OUTPUTS == 1 && strstr(a, "\"name\": \"mlp\"") &&
         strstr(b, "\"name\": \"gpt\"") ? 0 : 1;
}
]=])
run_checked("building two_models.c" "${C_COMPILER}" -std=c11 -Wall -Wextra -Werror
            -I "${WORK_DIR}/mlp" -I "${WORK_DIR}/gpt" "${WORK_DIR}/two_models.c"
            -L "${WORK_DIR}/mlp" -L "${WORK_DIR}/gpt" -lmlp -lgpt
            "-Wl,-rpath,${WORK_DIR}/mlp:${WORK_DIR}/gpt" -o "${WORK_DIR}/two_models")
run_checked("two_models" "${WORK_DIR}/two_models")
message(STATUS "two_models: ${last_output}")

# Third-party dependencies. oneDNN is an option with a plain fallback (loop GEMM and
# convolution); LLVM 22 and OpenMP are required; libbacktrace is used when GCC ships it.
find_package(OpenMP REQUIRED)
find_package(Threads REQUIRED)

set(KILN_HAVE_ONEDNN OFF)
if(KILN_WITH_ONEDNN)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(DNNL_LIBRARY NAMES dnnl)
  if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
    set(KILN_HAVE_ONEDNN ON)
    message(STATUS "kiln: oneDNN ${DNNL_LIBRARY}")
  else()
    message(WARNING "kiln: oneDNN not found (run scripts/setup); matmul/conv use plain loops")
  endif()
endif()

# libbacktrace (shipped with GCC) symbolises the user's call site in error messages and
# graph-break reports. Without it, call sites name the function only (dladdr).
execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libbacktrace.a
                OUTPUT_VARIABLE _kiln_bt OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT EXISTS "${_kiln_bt}")
  execute_process(COMMAND gcc -print-file-name=libbacktrace.a
                  OUTPUT_VARIABLE _kiln_bt OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
set(KILN_HAVE_BACKTRACE OFF)
if(EXISTS "${_kiln_bt}")
  get_filename_component(_kiln_bt_dir "${_kiln_bt}" DIRECTORY)
  if(EXISTS "${_kiln_bt_dir}/include/backtrace.h")
    set(KILN_HAVE_BACKTRACE ON)
    set(KILN_BACKTRACE_LIBRARY "${_kiln_bt}")
    set(KILN_BACKTRACE_INCLUDE "${_kiln_bt_dir}/include")
  endif()
endif()
message(STATUS "kiln: libbacktrace ${KILN_HAVE_BACKTRACE}")

# LLVM 22: the CPU JIT (ORC LLJIT). Linked as the one shared libLLVM, which links fast.
# KILN_WITH_LLVM=OFF (machines without LLVM 22, such as the GPU machines): no CPU kernels are
# generated; compiled CPU graphs run on the eager kernels (codegen/cpu/no_llvm.cpp).
set(KILN_HAVE_LLVM OFF)
if(KILN_WITH_LLVM)
  find_package(LLVM REQUIRED CONFIG HINTS /usr/lib/llvm-22/lib/cmake/llvm NO_DEFAULT_PATH)
  if(NOT LLVM_VERSION_MAJOR EQUAL 22)
    message(FATAL_ERROR "kiln: needs LLVM 22, found ${LLVM_PACKAGE_VERSION} (run scripts/setup)")
  endif()
  set(KILN_HAVE_LLVM ON)
  message(STATUS "kiln: LLVM ${LLVM_PACKAGE_VERSION} (${LLVM_DIR})")
  separate_arguments(KILN_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
  if(LLVM_LINK_LLVM_DYLIB)
    set(KILN_LLVM_LIBRARIES LLVM)
  else()
    llvm_map_components_to_libnames(KILN_LLVM_LIBRARIES core orcjit native passes target)
  endif()
else()
  message(STATUS "kiln: LLVM off: CPU graphs run on the eager kernels")
endif()

# CUDA 13 (the toolkit: NVRTC, cuBLAS; the driver is opened at run time): on when found.
set(KILN_HAVE_CUDA OFF)
if(KILN_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc)
    set(KILN_HAVE_CUDA ON)
    message(STATUS "kiln: CUDA ${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR}): NVRTC")
  else()
    message(STATUS "kiln: CUDA toolkit not found: no CUDA code generation")
  endif()
endif()

/* kiln_aot.h: the C ABI of a model compiled ahead of time by `kiln aot` (C11 and C++).
 *
 * A library built by `kiln aot` exports one symbol, kiln_aot_entry, which returns a table of
 * functions. Nothing else of kiln is needed to use it: a C program dlopen()s the library,
 * looks up kiln_aot_entry and runs the model through the table.
 *
 *   const kiln_aot_api* api = ((const kiln_aot_api* (*)(void))dlsym(lib, "kiln_aot_entry"))();
 *   char err[512];
 *   kiln_model* m = api->create(NULL, err, sizeof err);   NULL: the weights beside the library
 *   ... api->run(m, inputs, n_in, outputs, n_out, err, sizeof err) == 0 ...
 *   api->destroy(m);
 *
 * Inputs are contiguous, of the dtypes and sizes input_info gives; the caller allocates the
 * outputs from output_info (contiguous). Bad input (a wrong count, dtype, rank or size, a
 * NULL pointer; a weights file that is missing, truncated, of another graph, or with a wrong
 * tensor name, shape or dtype) gives a non-zero return (NULL from create) and a message in
 * err, never a crash. Several kiln_models of one library may run at the same time on
 * different threads; one kiln_model is not re-entrant (one run at a time).
 *
 * abi_version grows when the table does; fields are only ever appended. */
#ifndef KILN_AOT_H
#define KILN_AOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_AOT_ABI_VERSION 1u

typedef enum {
  KILN_F32 = 0,
  KILN_F64,
  KILN_F16,
  KILN_BF16,
  KILN_I8,
  KILN_U8,
  KILN_I32,
  KILN_I64,
  KILN_BOOL
} kiln_dtype;

/* A dense tensor the caller owns: `rank` sizes, contiguous (row-major) data. */
typedef struct {
  void* data;
  kiln_dtype dtype;
  int32_t rank;
  const int64_t* sizes;
} kiln_tensor;

/* One loaded model: its weights, plan and buffers. */
typedef struct kiln_model kiln_model;

typedef struct {
  /* KILN_AOT_ABI_VERSION of the library. */
  uint32_t abi_version;
  /* Loads the weights (NULL: embedded ones, or NAME.safetensors beside the library) and
   * prepares a model. NULL on failure, with the reason in err. */
  kiln_model* (*create)(const char* weights_path, char* err, size_t err_size);
  /* Runs the model on n_in inputs into n_out caller-allocated outputs. 0 on success. */
  int (*run)(kiln_model* model, const kiln_tensor* in, size_t n_in, kiln_tensor* out, size_t n_out,
             char* err, size_t err_size);
  void (*destroy)(kiln_model* model);
  size_t (*num_inputs)(const kiln_model* model);
  size_t (*num_outputs)(const kiln_model* model);
  /* The dtype, rank and sizes (at least KILN_AOT_MAX_RANK entries) of input or output i.
   * 0 on success, non-zero for an i out of range. */
  int (*input_info)(const kiln_model* model, size_t i, kiln_dtype* dtype, int32_t* rank,
                    int64_t* sizes);
  int (*output_info)(const kiln_model* model, size_t i, kiln_dtype* dtype, int32_t* rank,
                     int64_t* sizes);
  /* JSON: name, kiln version, graph hash, cpu, inputs, outputs. Static storage. */
  const char* (*describe)(void);
} kiln_aot_api;

/* The most dims an input or output of a library has (sizes arrays of input_info and
 * output_info hold this many). */
#define KILN_AOT_MAX_RANK 8

/* The one exported symbol of every library `kiln aot` builds. */
const kiln_aot_api* kiln_aot_entry(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_AOT_H */

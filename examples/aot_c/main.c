/* aot_c: runs a model that `kiln aot` compiled, from C, with nothing of kiln but kiln_aot.h.
 *
 *   aot_run LIB.so [--weights F.safetensors] [--input IN.bin] [--output OUT.bin] [--describe]
 *
 * Loads the library with dlopen, creates the model (its weights: F, or the library's own),
 * reads the inputs from IN.bin (each input's raw bytes, contiguous, one after another, as
 * `kiln run MODEL --save-input` writes them; without --input every element is 0.5 or 1),
 * runs the model, prints each output's dtype, sizes, sum and first values, and writes the
 * outputs' raw bytes to OUT.bin (what `kiln run MODEL --check-output` reads). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_aot.h"

static size_t dtype_size(kiln_dtype t) {
  switch (t) {
  case KILN_F64:
  case KILN_I64: return 8;
  case KILN_F32:
  case KILN_I32: return 4;
  case KILN_F16:
  case KILN_BF16: return 2;
  default: return 1;
  }
}

static const char* dtype_name(kiln_dtype t) {
  static const char* names[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64", "bool"};
  return (int)t >= 0 && (int)t <= KILN_BOOL ? names[t] : "?";
}

/* One input or output: its type, sizes and buffer. */
typedef struct {
  kiln_dtype dtype;
  int32_t rank;
  int64_t sizes[KILN_AOT_MAX_RANK];
  size_t bytes;
  void* data;
} buffer;

static int make_buffer(const kiln_aot_api* api, const kiln_model* m, int is_input, size_t i,
                       buffer* b) {
  int rc = is_input ? api->input_info(m, i, &b->dtype, &b->rank, b->sizes)
                    : api->output_info(m, i, &b->dtype, &b->rank, b->sizes);
  if (rc != 0) return rc;
  size_t n = 1;
  for (int32_t d = 0; d < b->rank; ++d)
    n *= (size_t)b->sizes[d];
  b->bytes = n * dtype_size(b->dtype);
  b->data = calloc(b->bytes ? b->bytes : 1, 1);
  return b->data == NULL;
}

static double element(const buffer* b, size_t k) {
  switch (b->dtype) {
  case KILN_F32: return ((const float*)b->data)[k];
  case KILN_F64: return ((const double*)b->data)[k];
  case KILN_I32: return ((const int32_t*)b->data)[k];
  case KILN_I64: return (double)((const int64_t*)b->data)[k];
  case KILN_I8: return ((const int8_t*)b->data)[k];
  case KILN_U8:
  case KILN_BOOL: return ((const uint8_t*)b->data)[k];
  default: return 0; /* f16 and bf16: printed as raw bytes only */
  }
}

/* Fills an input without a file: 0.5 in every floating element, 1 in every integer one. */
static void fill_default(buffer* b) {
  size_t n = b->bytes / dtype_size(b->dtype);
  for (size_t k = 0; k < n; ++k) {
    switch (b->dtype) {
    case KILN_F32: ((float*)b->data)[k] = 0.5f; break;
    case KILN_F64: ((double*)b->data)[k] = 0.5; break;
    case KILN_I32: ((int32_t*)b->data)[k] = 1; break;
    case KILN_I64: ((int64_t*)b->data)[k] = 1; break;
    default: ((uint8_t*)b->data)[k * dtype_size(b->dtype)] = 1; break;
    }
  }
}

int main(int argc, char** argv) {
  const char *lib_path = NULL, *weights = NULL, *in_path = NULL, *out_path = NULL;
  int describe = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--weights") == 0 && i + 1 < argc)
      weights = argv[++i];
    else if (strcmp(argv[i], "--input") == 0 && i + 1 < argc)
      in_path = argv[++i];
    else if (strcmp(argv[i], "--output") == 0 && i + 1 < argc)
      out_path = argv[++i];
    else if (strcmp(argv[i], "--describe") == 0)
      describe = 1;
    else if (lib_path == NULL && argv[i][0] != '-')
      lib_path = argv[i];
    else {
      fprintf(stderr,
              "usage: %s LIB.so [--weights F] [--input IN.bin] [--output OUT.bin] "
              "[--describe]\n",
              argv[0]);
      return 2;
    }
  }
  if (lib_path == NULL) {
    fprintf(stderr, "usage: %s LIB.so [--weights F] [--input IN.bin] [--output OUT.bin]\n",
            argv[0]);
    return 2;
  }
  void* lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "aot_run: %s\n", dlerror());
    return 1;
  }
  const kiln_aot_api* (*entry)(void);
  *(void**)&entry = dlsym(lib, "kiln_aot_entry");
  if (entry == NULL) {
    fprintf(stderr, "aot_run: %s has no kiln_aot_entry\n", lib_path);
    return 1;
  }
  const kiln_aot_api* api = entry();
  if (api->abi_version < KILN_AOT_ABI_VERSION) {
    fprintf(stderr, "aot_run: the library's ABI is version %u, this program needs %u\n",
            api->abi_version, KILN_AOT_ABI_VERSION);
    return 1;
  }
  if (describe) printf("%s", api->describe());

  char err[1024];
  kiln_model* m = api->create(weights, err, sizeof err);
  if (m == NULL) {
    fprintf(stderr, "aot_run: create: %s\n", err);
    return 1;
  }
  size_t n_in = api->num_inputs(m), n_out = api->num_outputs(m);
  buffer* in = calloc(n_in + 1, sizeof(buffer));
  buffer* out = calloc(n_out + 1, sizeof(buffer));
  kiln_tensor* tin = calloc(n_in + 1, sizeof(kiln_tensor));
  kiln_tensor* tout = calloc(n_out + 1, sizeof(kiln_tensor));
  FILE* f = in_path ? fopen(in_path, "rb") : NULL;
  if (in_path && f == NULL) {
    fprintf(stderr, "aot_run: can't open %s\n", in_path);
    return 1;
  }
  for (size_t i = 0; i < n_in; ++i) {
    if (make_buffer(api, m, 1, i, &in[i]) != 0) return 1;
    if (f == NULL)
      fill_default(&in[i]);
    else if (fread(in[i].data, 1, in[i].bytes, f) != in[i].bytes) {
      fprintf(stderr, "aot_run: %s is too short for input %zu (%zu bytes)\n", in_path, i,
              in[i].bytes);
      return 1;
    }
    tin[i] = (kiln_tensor){in[i].data, in[i].dtype, in[i].rank, in[i].sizes};
  }
  if (f != NULL) {
    if (fgetc(f) != EOF) {
      fprintf(stderr, "aot_run: %s is longer than the inputs\n", in_path);
      return 1;
    }
    fclose(f);
  }
  for (size_t i = 0; i < n_out; ++i) {
    if (make_buffer(api, m, 0, i, &out[i]) != 0) return 1;
    tout[i] = (kiln_tensor){out[i].data, out[i].dtype, out[i].rank, out[i].sizes};
  }
  if (api->run(m, tin, n_in, tout, n_out, err, sizeof err) != 0) {
    fprintf(stderr, "aot_run: run: %s\n", err);
    return 1;
  }
  FILE* o = out_path ? fopen(out_path, "wb") : NULL;
  for (size_t i = 0; i < n_out; ++i) {
    size_t n = out[i].bytes / dtype_size(out[i].dtype);
    double sum = 0;
    for (size_t k = 0; k < n; ++k)
      sum += element(&out[i], k);
    printf("output %zu: %s [", i, dtype_name(out[i].dtype));
    for (int32_t d = 0; d < out[i].rank; ++d)
      printf("%s%lld", d ? ", " : "", (long long)out[i].sizes[d]);
    printf("]  sum %.6g  first", sum);
    for (size_t k = 0; k < n && k < 4; ++k)
      printf(" %.6g", element(&out[i], k));
    printf("\n");
    if (o != NULL && fwrite(out[i].data, 1, out[i].bytes, o) != out[i].bytes) {
      fprintf(stderr, "aot_run: can't write %s\n", out_path);
      return 1;
    }
  }
  if (o != NULL && fclose(o) != 0) return 1;
  api->destroy(m);
  for (size_t i = 0; i < n_in; ++i)
    free(in[i].data);
  for (size_t i = 0; i < n_out; ++i)
    free(out[i].data);
  free(in);
  free(out);
  free(tin);
  free(tout);
  dlclose(lib);
  return 0;
}

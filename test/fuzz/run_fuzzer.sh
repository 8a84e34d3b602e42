#!/usr/bin/env bash
# Builds one of kiln's libFuzzer targets with clang (test/fuzz/CMakeLists.txt) and runs it for a
# bounded time.
# usage: run_fuzzer.sh SOURCE_DIR WORK_DIR RUNTIME_LIBRARY [CXX]
# KILN_FUZZ_TARGET picks the target: parser_fuzzer (default), kernel_parser_fuzzer,
# safetensors_fuzzer, cache_fuzzer.
# KILN_FUZZ_SECONDS (default 30) bounds the run; KILN_FUZZ_SEED (default 1) fixes libFuzzer's
# seed, so that a run explores the same inputs in the same order on every machine (a faster
# one goes further). Exits 77 (CTest's SKIP_RETURN_CODE) when no
# clang with libFuzzer is available, or when the main build is itself sanitized (its GCC ASan
# runtime and clang's cannot share a process).
set -euo pipefail
src=$1 work=$2 runtime=$3 cxx=${4:-clang++-14}
seconds=${KILN_FUZZ_SECONDS:-30}
seed=${KILN_FUZZ_SEED:-1}
target=${KILN_FUZZ_TARGET:-parser_fuzzer}

case "$target" in
  parser_fuzzer)
    seeds="$src/test/fuzz/corpus"
    options=(-max_len=4096 -dict="$src/test/fuzz/kir.dict") ;;
  kernel_parser_fuzzer)
    # The loop-IR lit tests are the seeds (libFuzzer reads the folder recursively).
    seeds="$src/test/ir/kernel"
    options=(-max_len=4096) ;;
  safetensors_fuzzer)
    seeds="$src/test/fuzz/corpus-safetensors"
    options=(-max_len=4096 -dict="$src/test/fuzz/safetensors.dict") ;;
  cache_fuzzer)
    seeds="$src/test/fuzz/corpus-cache"
    # Accepted objects are linked by the JIT; LLVM's JIT keeps some state per session, so
    # leaks are not checked. JITLink reports refused objects on stderr: closed (2), the
    # fuzzer's own report still comes out.
    export KILN_FUZZ_LINK=1
    options=(-max_len=16384 -detect_leaks=0 -close_fd_mask=2) ;;
  *)
    echo "fuzz: unknown target '$target' (parser_fuzzer, kernel_parser_fuzzer, safetensors_fuzzer,"
    echo "cache_fuzzer)"
    exit 2 ;;
esac

if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: $cxx not found (run scripts/setup); skipped"
  exit 77
fi
# (nm's output is read whole first: grep -q closing the pipe early fails nm under pipefail)
symbols=$(nm -D "$runtime" 2>/dev/null || true)
if grep -q ' __asan_init' <<<"$symbols"; then
  echo "fuzz: $runtime is built with GCC's sanitizers (KILN_SANITIZE), whose ASan runtime"
  echo "cannot share a process with clang's libFuzzer; skipped (run the fuzzers from a"
  echo "build without KILN_SANITIZE)"
  exit 77
fi
mkdir -p "$work"
probe="$work/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe" -o "$work/probe" 2>"$work/probe.log"; then
  echo "fuzz: $cxx cannot link -fsanitize=fuzzer (libclang-rt missing?); skipped"
  cat "$work/probe.log"
  exit 77
fi

cmake -S "$src/test/fuzz" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DKILN_SOURCE_DIR="$src" -DKILN_RUNTIME_LIBRARY="$runtime" >/dev/null
cmake --build "$work/build" --target "$target"

mkdir -p "$work/corpus" "$work/artifacts"
# New corpus entries go to $work/corpus; the seeds in the source tree are only read.
"$work/build/$target" -seed="$seed" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  "${options[@]}" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
  "$work/corpus" "$seeds"

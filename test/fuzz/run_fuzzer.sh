#!/usr/bin/env bash
# Builds the parser fuzzer with clang (test/fuzz/CMakeLists.txt) and runs it for a bounded time.
# usage: run_fuzzer.sh SOURCE_DIR WORK_DIR RUNTIME_LIBRARY [CXX]
# KILN_FUZZ_SECONDS (default 30) bounds the run. Exits 77 (CTest's SKIP_RETURN_CODE) when no
# clang with libFuzzer is available.
set -euo pipefail
src=$1 work=$2 runtime=$3 cxx=${4:-clang++-14}
seconds=${KILN_FUZZ_SECONDS:-30}

if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: $cxx not found (run scripts/setup); skipped"
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
cmake --build "$work/build"

mkdir -p "$work/corpus" "$work/artifacts"
# New corpus entries go to $work/corpus; the seeds in the source tree are only read.
"$work/build/parser_fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -dict="$src/test/fuzz/kir.dict" -artifact_prefix="$work/artifacts/" \
  -print_final_stats=1 "$work/corpus" "$src/test/fuzz/corpus"

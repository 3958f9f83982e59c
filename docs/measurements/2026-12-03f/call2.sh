#!/usr/bin/env bash
# Device call 2 of 2026-12-03f: call 1's fixes checked (the cuBLAS handle made before any
# capture: the compile from the plan cache; abandon_capture; the test fixes: test_native on the
# GPU); the first compile of a fresh machine against CUDA's JIT cache (call 1: ~/.nv/ComputeCache
# went from 0 to 5.8 MB during it): the same uncached compile with CUDA_CACHE_DISABLE=1 after it;
# bf16 DRUNet with the transposed products against cuDNN's dgrad, alternating, twice each, and
# one profile (call 1's bf16 run with the products had 2.7 ms between its kernels); the quick
# GPU check.
#   bash docs/measurements/2026-12-03f/call2.sh   (device machine, repository root; carry .deps)
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  build
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  du -sb ~/.nv/ComputeCache 2>/dev/null || echo "no ~/.nv/ComputeCache"
  nt 2_compile.log drunet 1 4096x4096
  du -sb ~/.nv/ComputeCache 2>/dev/null || echo "no ~/.nv/ComputeCache"
  stamp "CUDA_CACHE_DISABLE=1"
  CUDA_CACHE_DISABLE=1 nt 2_compile.log drunet 1 4096x4096
  nt 2_compile.log drunet 1 4096x4096
  rm -rf /tmp/pc
  for run in cold cached; do nt 2_compile.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc; done
  grep -E "compiled from the plan cache" "$OUT/2_compile.log" | tail -1 | cut -c1-400
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  stamp test_native
  timeout 150 "$PNP_CALL_BIN/test_native" >"$OUT/3_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/3_test_native.log" | head -30
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  for round in 1 2; do
    nt 4_bf16.log drunet 1 4096x4096 --dtype bfloat16
    nt 4_bf16.log drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGwd
  done
  nt 4_bf16.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  stamp gpu_check
  timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$OUT/5_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee -a "$OUT/0_summary.log"
stamp done

#!/usr/bin/env bash
# Device call 3 of 2026-12-04c: conv + residual graphs with a zero bias (cuDNN's precompiled
# engines) and the workspace cap, built and checked, then DRUNet 1 ch 4096² timed.
#   bash docs/measurements/2026-12-04c/call3.sh   (device machine, repository root; carry .deps)
# - the whole build, then the GPU check tier (scripts/gpu_check.sh: test_native with the new
#   workspace-cap case and the cuDNN graph cases against float64, the solver runs);
# - DRUNet 1 ch 4096² fp32: a cold compile that writes the plan cache, profiled, then a compile
#   from the cache; bf16: a cold compile, profiled; the GPU's clocks and power sampled meanwhile.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  stamp "gpu_check"
  timeout 360 scripts/gpu_check.sh --no-build --out /tmp/gc >/tmp/gc.out 2>&1
  echo "gpu_check rc=$?"
  cp /tmp/gc/gpu_check.log "$OUT/2_gpu_check.log"
  grep -E "FAIL|passed, " /tmp/gc/gpu_check.log | tail -8
  timeout 60 "$PNP_CALL_BIN/test_native" -tc="*workspace cap*" -s 2>&1 | grep -E "MESSAGE|workspace|no plan|test cases|assertions" |
    grep -v "^ *$" | cut -c1-200 | head -20
  clocks_start 5_clocks
  rm -rf /tmp/pc
  nt 3_nt_fp32.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc --profile 2
  nt 3_nt_fp32.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc
  nt 4_nt_bf16.log drunet 1 4096x4096 --dtype bfloat16 --profile 2
  clocks_stop
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 2 of 2026-12-04f: call 1 again after the fix. In call 1 the transposed
# convolutions as the tile kernel took 22.94 and 23.37 ms (3 calls, fp32) against cuBLAS's
# 5.28 and 5.29 ms: its store to the pixels spilled 616 bytes a thread (ptxas -v) in the one
# kernel. It is now a kernel of its own (wgmma_conv_kernel<T, true>: no spills, 156 registers;
# the plain kernel as before, 168).
#   bash docs/measurements/2026-12-04f/call2.sh   (device machine, repository root; carry .deps)
# - the whole build; test_native's Hopper cases;
# - A/B, cold compiles, profiled: DRUNet 1 ch 4096² fp32 Hopper / cuBLAS / Hopper / cuBLAS, then
#   bf16 Hopper / cuBLAS.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  test_hopper 1_test_native.log
  grep -E "rel err .*cuBLAS" "$OUT/1_test_native.log" | head -14
  for i in 1 2; do
    nt 2_ab.log drunet 1 4096x4096 --profile 3
    nt 2_ab.log drunet 1 4096x4096 --native cfagbeGwT --profile 3
  done
  nt 2_ab.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_ab.log drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGwT --profile 3
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 1 of 2026-12-04f: DRUNet's 2×2, stride-2 transposed convolutions as pnp's Hopper
# tile kernel (one 1x1 convolution to the four taps' 4 C_out channels, each product written to its
# pixel: NativeOptions::wgmma_transposed) against cuBLAS's two products each (nn_time's T letter:
# the option off), on one machine. At be8573b's profile the products took 2.996 ms (cutlass_80,
# the 128 -> 64 one at 2048² in and out, both parities) + 2.319 ms (the other two) in fp32.
#   bash docs/measurements/2026-12-04f/call1.sh   (device machine, repository root; carry .deps)
# - the whole build; test_native's Hopper cases (the new kernel against float64 and cuBLAS with
#   outputs poisoned, the executor with it on and off);
# - A/B, cold compiles, profiled: DRUNet 1 ch 4096² fp32 Hopper / cuBLAS / Hopper / cuBLAS, then
#   bf16 Hopper / cuBLAS;
# - scripts/gpu_check.sh (full).
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
  gpu_check 3_gpu_check.log
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

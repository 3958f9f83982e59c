#!/usr/bin/env bash
# Device call 4 of 2026-12-04d: the fp32 rows kernel with a residual on one consumer warpgroup and
# 128-pixel columns, so that the residual's row (128 pixels x 64 channels, 32 KiB) comes through
# the bulk copy engine into shared memory beside the weights, as in bf16; checked, A/B against
# aefb3c3's kernel file swapped in, then the GPU check tier.
#   git show aefb3c3:src/nn/native/wgmma_rows_kernels.cu > docs/measurements/2026-12-04d/ab/wgmma_rows_kernels_aefb3c3.cu
#   bash docs/measurements/2026-12-04d/call4.sh   (device machine, repository root; carry .deps)
# - test_native's Hopper case (the rows kernel against float64, outputs poisoned with NaN);
# - A/B, each a cold compile, profiled: DRUNet 1 ch 4096² fp32 new, old, new;
# - scripts/gpu_check.sh (full) at the new code.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  stamp test_native
  timeout 200 "$PNP_CALL_BIN/test_native" -tc="*Hopper implicit-GEMM*" >"$OUT/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/1_test_native.log" | head -20
  grep -E "Float (64->64 k3 (13x384|100x512|1x256)|32->64 k3 6x128|64->128 k3 5x512) variant 2 kernel 3" "$OUT/1_test_native.log" | head -6
  nt 2_new.log drunet 1 4096x4096 --profile 3
  swap_source src/nn/native/wgmma_rows_kernels.cu docs/measurements/2026-12-04d/ab/wgmma_rows_kernels_aefb3c3.cu nn_time
  nt 3_old.log drunet 1 4096x4096 --profile 3
  restore_source src/nn/native/wgmma_rows_kernels.cu nn_time
  nt 4_new2.log drunet 1 4096x4096 --profile 3
  gpu_check 5_gpu_check.log
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 4 of 2026-12-04e: the rows kernel's loader issues the residual's row before the
# step's input stages (a whole step ahead) instead of after them. Call 2 found the residual
# layers on one consumer 0.84 ms slower each than those without (5.01 against 4.17 ms), about
# what the residual's 4.3 GB take at full bandwidth; after the stages, the copy was issued only
# once the step's first products had freed a stage, just before row_start waits on it.
#   git show be8573b:src/nn/native/wgmma_rows_kernels.cu > docs/measurements/2026-12-04e/ab/wgmma_rows_kernels_be8573b.cu
#   bash docs/measurements/2026-12-04e/call4.sh   (device machine, repository root; carry .deps .whl)
# - the whole build; test_native (all cases: the kernels against float64 with outputs poisoned,
#   the networks against eager); scripts/gpu_check.sh --quick (the reconstructions, TF32 on too);
# - A/B, each a cold compile, profiled: DRUNet 1 ch 4096² fp32 and bf16, new / be8573b's kernel
#   file / new / old (the new nn_time kept);
# - pnp_bench with deepinv 0.5.0's modules under torch.compile at the new code: DRUNet 1 ch
#   4096² in bf16 and fp32 (eager, native, torch.compile).
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  mkdir -p /tmp/nt_new /tmp/nt_old
  cp "$PNP_CALL_BIN/nn_time" /tmp/nt_new/
  stamp test_native
  timeout 200 "$PNP_CALL_BIN/test_native" >"$OUT/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/1_test_native.log" | head -12
  grep -E "(Float|BFloat16) (64->64 k3 (13x384|100x512)|32->64 k3 6x128) variant 2 kernel [34]" "$OUT/1_test_native.log" | head -8
  gpu_check 2_gpu_check_quick.log --quick
  ab() {
    PNP_CALL_BIN=/tmp/nt_$1 nt 3_ab_$1.log drunet 1 4096x4096 --profile 3
    PNP_CALL_BIN=/tmp/nt_$1 nt 3_ab_$1.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  }
  ab new
  swap_source src/nn/native/wgmma_rows_kernels.cu docs/measurements/2026-12-04e/ab/wgmma_rows_kernels_be8573b.cu nn_time
  cp "$PNP_CALL_BIN/nn_time" /tmp/nt_old/
  ab old
  ab new
  ab old
  peer_env
  sweep 4_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
  sweep 4_drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

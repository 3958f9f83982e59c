#!/usr/bin/env bash
# Device call 2 of 2026-12-04 (at fa4c5ca): test_native on the GPU; DRUNet 4096² fp32 compiled
# three times from cold (no plan cache: each run times the rivals again, now interleaved), which
# kernel each run chose for the 64-channel residual layers and what the forward took; bf16 twice;
# the tail kernel with x2 in registers of its own (profiles); DnCNN and UNet 3 ch 2048²; the
# compile cold and from the plan cache.
#   bash docs/measurements/2026-12-04/call2.sh   (device machine, repository root; carry .deps .whl)
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  build
  stamp test_native
  timeout 200 "$PNP_CALL_BIN/test_native" >"$OUT/3_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/3_test_native.log" | head -30
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  for i in 1 2 3; do nt 2_nt.log drunet 1 4096x4096 --profile 2; done
  grep -oE "\[1, 64, 4096, 4096\]: eng4_k24=24[^;]*" "$OUT/2_nt.log"
  for i in 1 2; do nt 2_nt.log drunet 1 4096x4096 --dtype bfloat16 --profile 2; done
  nt 4_nt_dncnn_unet.log dncnn 3 2048x2048 --profile 2
  nt 4_nt_dncnn_unet.log unet 3 2048x2048 --profile 2
  rm -rf /tmp/pc
  for run in cold cached cached; do nt 5_nt_cache.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc; done
  grep -oE "compiled from the plan cache[^;]*" "$OUT/5_nt_cache.log" | tail -2
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

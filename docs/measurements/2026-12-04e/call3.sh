#!/usr/bin/env bash
# Device call 3 of 2026-12-04e: the side by side with the float32 residual on one consumer
# warpgroup as the default (be8573b's code; checked in call 2: GPU check tier 17 passed).
#   bash docs/measurements/2026-12-04e/call3.sh   (device machine, repository root; carry .deps .whl)
# - the whole build; DRUNet 1 ch 4096² fp32 cold compile writing the plan cache, then from it;
# - pnp_bench with deepinv 0.5.0's modules under torch.compile: DRUNet 1 ch 4096² in bf16 and
#   fp32, DnCNN and UNet 3 ch 2048² in fp32 (eager, native, torch.compile); the GPU's clocks and
#   power sampled every 20 ms through the timed runs.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  peer_env
  rm -rf /tmp/pc
  nt 1_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc --profile 2
  nt 1_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc
  clocks_start 3_clocks
  sweep 2_drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  sweep 2_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
  sweep 2_cnn2048_fp32 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"' float32
  clocks_stop
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

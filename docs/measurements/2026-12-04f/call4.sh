#!/usr/bin/env bash
# Device call 4 of 2026-12-04f: the final code (the transposed convolutions' Hopper kernel of
# calls 1-3 removed; kernels as at 47f39bb) checked and timed in one call.
#   bash docs/measurements/2026-12-04f/call4.sh   (device machine, repository root; carry .deps .whl)
# - the whole build; scripts/gpu_check.sh (full: every test binary on the GPU, the kernels against
#   float64 with outputs poisoned, the reconstructions);
# - DRUNet 1 ch 4096² fp32 cold compile writing the plan cache, then from it;
# - pnp_bench with deepinv 0.5.0's modules under torch.compile (side_by_side): DRUNet 1 ch 4096²
#   in bf16 and fp32, DnCNN and UNet 3 ch 2048² in fp32 (eager, native, torch.compile).
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  gpu_check 1_gpu_check.log
  peer_env
  rm -rf /tmp/pc
  nt 2_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc --profile 2
  nt 2_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc
  side_by_side 3
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

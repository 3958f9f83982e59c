#!/usr/bin/env bash
# Device call 6 of 2026-12-04e: the side by side at the final code (47f39bb), after call 5 on the
# same machine (its build stays there). NOT RUN (see call5.sh).
#   bash docs/measurements/2026-12-04e/call6.sh   (device machine, repository root; carry .deps .whl)
# - DRUNet 1 ch 4096² fp32 cold compile writing the plan cache, then from it;
# - pnp_bench with deepinv 0.5.0's modules under torch.compile (side_by_side): DRUNet 1 ch 4096²
#   in bf16 and fp32, DnCNN and UNet 3 ch 2048² in fp32 (eager, native, torch.compile).
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  peer_env
  rm -rf /tmp/pc
  nt 1_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc --profile 2
  nt 1_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc
  side_by_side 2
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

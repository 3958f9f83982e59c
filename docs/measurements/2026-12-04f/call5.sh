#!/usr/bin/env bash
# Device call 5 of 2026-12-04f: the side by side at the final code again, on a fresh machine
# (calls 2-4 ran on one machine that timed DRUNet fp32 at 226.4-228.8 ms; call 1's timed the
# same code path at 233.1 ms in nn_time): how far the fp32 figure moves between machines.
#   bash docs/measurements/2026-12-04f/call5.sh   (device machine, repository root; carry .deps .whl)
# - the whole build; DRUNet 1 ch 4096² fp32 cold compile writing the plan cache, then from it;
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

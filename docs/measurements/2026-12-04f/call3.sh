#!/usr/bin/env bash
# Device call 3 of 2026-12-04f, run as one command line right after call 2, on call 2's machine
# while it was still held (its build there; this is that line, as a script): the side by
# side at 212710c with NativeOptions::wgmma_transposed off in pnp_bench's sweep and nn_time's T,
# so the transposed convolutions ran as cuBLAS's products: the code path of the final code
# (the option and its kernel were then removed, having lost in calls 1 and 2).
#   bash docs/measurements/2026-12-04f/call3.sh   (device machine, repository root at 212710c; carry .deps .whl)
# - DRUNet 1 ch 4096² fp32 cold compile writing the plan cache, then from it;
# - pnp_bench with deepinv 0.5.0's modules under torch.compile (side_by_side): DRUNet 1 ch 4096²
#   in bf16 and fp32, DnCNN and UNet 3 ch 2048² in fp32 (eager, native, torch.compile).
sed -i '/^\[native\]/a wgmma_transposed = false' input/sweep.toml && . scripts/device_call.sh && {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  peer_env
  rm -rf /tmp/pc
  nt 1_nt.log drunet 1 4096x4096 --native cfagbeGwpT --cache /tmp/pc --profile 2
  nt 1_nt.log drunet 1 4096x4096 --native cfagbeGwpT --cache /tmp/pc
  side_by_side 2
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

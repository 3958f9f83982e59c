#!/usr/bin/env bash
# Device call 5 of 2026-12-04 (at 6d2df51): pnp_bench's native fp32 DRUNet 4096² with its new
# notes column (what the backend chose per layout), then nn_time on the same machine: is
# pnp_bench's 4-10 ms above nn_time (calls 3-4) a different choice or the way it times?
#   bash docs/measurements/2026-12-04/call5.sh   (device machine, repository root; carry .deps .whl)
. scripts/device_call.sh
{
  build nn_time pnp_bench
  sweep 6_native_fp32_a '"drunet"' 1 '[4096, 4096]' '"native"' float32
  nt 2_nt.log drunet 1 4096x4096
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

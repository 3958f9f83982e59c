#!/usr/bin/env bash
# Device call 5 of 2026-12-04e: the final code (47f39bb: the residual's row before the input
# stages in float32 only; call 4: fp32 2 ms faster with it, bf16 3 ms slower) checked and timed.
# NOT RUN: the session's device time (238 s left) was too little to start a machine. Run it
# first next session, then call6.sh on the same machine.
#   bash docs/measurements/2026-12-04e/call5.sh   (device machine, repository root; carry .deps)
# - the whole build; test_native's Hopper case; scripts/gpu_check.sh (full);
# - cold compiles, profiled: DRUNet 1 ch 4096² bf16 and fp32 (each dtype should time as its
#   code did in call 4: fp32 as "new", bf16 as be8573b).
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  test_hopper 1_test_native.log
  gpu_check 2_gpu_check.log
  nt 3_nt.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 3_nt.log drunet 1 4096x4096 --profile 3
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 2 of 2026-12-04e: the float32 residual on one consumer warpgroup as the default
# (call 1: correct and 8-9 ms faster on DRUNet 1 ch 4096² fp32): the GPU check tier at this
# code, the three networks timed, and whether one consumer also wins without a residual.
#   bash docs/measurements/2026-12-04e/call2.sh   (device machine, repository root; carry .deps)
# - the whole build, scripts/gpu_check.sh (full);
# - cold compiles, profiled: DRUNet 1 ch 4096² fp32 and bf16; DnCNN and UNet 3 ch 2048² fp32;
# - diagnosis: every float32 rows kernel on one consumer warpgroup (launch_wgmma_rows' condition
#   edited by sed), nn_time rebuilt: DRUNet fp32 and DnCNN again. If the 64-channel layers
#   without a residual take as long on one consumer as those with one, what the residual layers
#   cost beyond the others (about 1 ms each in call 1) is the one consumer, not the residual.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  gpu_check 1_gpu_check.log
  nt 2_nt.log drunet 1 4096x4096 --profile 3
  nt 2_nt.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_nt.log dncnn 3 2048x2048 --profile 3
  nt 2_nt.log unet 3 2048x2048 --profile 3
  K=src/nn/native/wgmma_rows_kernels.cu
  sed -i 's/if (a.z \&\& !a.two_consumers) {/if (true) {/' $K
  grep -c "if (true) {" $K
  build nn_time
  nt 3_all_one.log drunet 1 4096x4096 --profile 3
  nt 3_all_one.log dncnn 3 2048x2048 --profile 3
  git checkout $K
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

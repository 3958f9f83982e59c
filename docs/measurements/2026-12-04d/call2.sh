#!/usr/bin/env bash
# Device call 2 of 2026-12-04d: the warm-up waits (up to 0.5 s in all) for a layout's parallel plan
# builds where it meets it, so that the two ops' own outputs no longer raise a cold compile's peak
# memory (DRUNet 1 ch 4096² fp32: 22.01 GB with parallel builds, 17.88 GB serial: 2026-12-04c
# call 5); the GPU check tier at this code; an A/B of the rows kernel's residual loads past L1.
#   bash docs/measurements/2026-12-04d/call2.sh   (device machine, repository root; carry .deps)
# - the whole build, scripts/gpu_check.sh (full);
# - cold compiles, peak memory and compile time: DRUNet 1 ch 4096² fp32 and bf16, with the
#   defaults and with serial builds (s); DnCNN and UNet 3 ch 2048²; DRUNet fp32 writing the
#   plan cache, then from it;
# - A/B (DRUNet fp32, profiled): the fp32 rows kernel's residual loads as they are (the first
#   run above), through L2 only (__ldcg), streaming (__ldcs): row_start's load edited by sed.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  gpu_check 1_gpu_check.log
  nt 2_peak.log drunet 1 4096x4096 --profile 3
  nt 2_peak.log drunet 1 4096x4096 --native cfagbeGws
  nt 2_peak.log drunet 1 4096x4096 --dtype bfloat16
  nt 2_peak.log drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGws
  nt 2_peak.log dncnn 3 2048x2048
  nt 2_peak.log unet 3 2048x2048
  rm -rf /tmp/pc
  nt 3_cache.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc
  nt 3_cache.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc
  H=src/nn/native/wgmma_sm90.cuh
  cp $H /tmp/sm90_kept.cuh
  for v in cg cs; do
    sed "s/to_f(z\[q \* CO + 8 \* i\])/to_f(__ld$v(z + q * CO + 8 * i))/" /tmp/sm90_kept.cuh >$H
    grep -c "__ld$v" $H
    touch src/nn/native/wgmma_rows_kernels.cu
    build nn_time
    nt 4_ab_$v.log drunet 1 4096x4096 --profile 3
  done
  cp /tmp/sm90_kept.cuh $H
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

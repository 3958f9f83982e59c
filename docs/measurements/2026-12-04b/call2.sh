#!/usr/bin/env bash
# Device call 2 of 2026-12-04b: the fp32 rows kernel's stores through shared memory and the bulk
# copy engine (row_end_shared_f32), A/B against the stores from the registers (this tree's kernel
# file at a94b3ba's parent, d744f89, swapped in: the same build otherwise).
#   git show d744f89:src/nn/native/wgmma_rows_kernels.cu > /tmp/ab_rows_d744f89.cu   (made by the script)
#   bash docs/measurements/2026-12-04b/call2.sh   (device machine, repository root; carry .deps)
# - test_native, all cases (the rows kernel against float64 with poisoned outputs among them);
# - Nsight Compute (speed of light, warp states, per-instruction stall samples) on the new fp32
#   rows kernel's first two launches of DRUNet 4096² from the plan cache (no CUDA graph);
# - A/B, each a cold compile, profiled: DRUNet 1 ch 4096² fp32, DnCNN 3 ch 2048² fp32 and 4096²,
#   UNet 3 ch 2048² fp32.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build nn_time test_native
  stamp test_native
  timeout 200 "$PNP_CALL_BIN/test_native" >"$OUT/3_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/3_test_native.log" | head -20
  grep -E "float32 64->64 k3 (13x384|100x512) variant 2 kernel 3" "$OUT/3_test_native.log" | head -4
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  nt 2_nt_new.log drunet 1 4096x4096 --native cfagbeGwp --profile 3
  stamp "ncu new fp32 rows kernel"
  timeout 200 ncu --clock-control none -k regex:wgmma_rows_kernel --launch-count 2 --section SpeedOfLight \
    --section WarpStateStats --section SourceCounters --import-source no -o /tmp/rows_new -f \
    "$PNP_CALL_BIN/nn_time" drunet 1 4096x4096 --device cuda --backends native --native cfabeGwp --timed 5 >/tmp/ncu.log 2>&1
  echo "ncu rc=$?"
  ncu -i /tmp/rows_new.ncu-rep --page details >"$OUT/5_rows_new_details.txt" 2>&1
  ncu -i /tmp/rows_new.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >"$OUT/5_rows_new_sass.csv.gz"
  grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|SM Frequency|No Eligible" "$OUT/5_rows_new_details.txt" | head -12
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  for arm in new registers; do
    if [ $arm = registers ]; then
      git show d744f89:src/nn/native/wgmma_rows_kernels.cu >/tmp/ab_rows_d744f89.cu 2>/dev/null ||
        cp docs/measurements/2026-12-04b/ab_rows_d744f89.cu /tmp/ab_rows_d744f89.cu
      swap_source src/nn/native/wgmma_rows_kernels.cu /tmp/ab_rows_d744f89.cu nn_time
    fi
    nt 6_ab_$arm.log drunet 1 4096x4096 --profile 3
    nt 6_ab_$arm.log dncnn 3 2048x2048 --profile 3
    nt 6_ab_$arm.log dncnn 3 4096x4096 --profile 3
    nt 6_ab_$arm.log unet 3 2048x2048 --profile 3
  done
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 1 of 2026-12-04: the head kernel's longer bands (few_in_band: 32 rows a block at
# DRUNet 4096², the first window rows loaded together). The head and tail test cases on the GPU;
# DRUNet 4096² fp32 and bf16 profiled with the new head kernel and with dde4464's (swap_source,
# the same build otherwise); Nsight Compute on the head and the tail kernels.
#   git show dde4464:src/nn/native/narrow_conv_kernels.cu > docs/measurements/2026-12-04/ab_narrow_conv_kernels_dde4464.cu
#   bash docs/measurements/2026-12-04/call1.sh   (device machine, repository root; carry .deps .whl)
# Run with fa4c5ca's head change on dde4464 (the tail and timing changes came after); the A/B
# file is untracked, made as above, and was removed after the call.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  build
  stamp test_native head/tail
  timeout 120 "$PNP_CALL_BIN/test_native" -tc="*head and tail*" >"$OUT/3_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/3_test_native.log" | head -30
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  nt 2_nt.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_nt.log drunet 1 4096x4096 --profile 3
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  stamp "ncu head and tail kernels, bf16 and fp32"
  for dt in bfloat16 float32; do
    timeout 100 ncu --clock-control none -k regex:'few_in_kernel|few_out_rows_kernel' --launch-count 2 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats \
      "$PNP_CALL_BIN/nn_time" drunet 1 4096x4096 --device cuda --backends native --dtype $dt --timed 5 \
      >"$OUT/4_ncu_$dt.txt" 2>&1
    echo "ncu $dt rc=$?"
    grep -E "few_in_kernel|few_out_rows_kernel|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Stall|No Eligible" "$OUT/4_ncu_$dt.txt" | head -40
  done
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  swap_source src/nn/native/narrow_conv_kernels.cu docs/measurements/2026-12-04/ab_narrow_conv_kernels_dde4464.cu nn_time
  nt 5_nt_old_head.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 5_nt_old_head.log drunet 1 4096x4096 --profile 3
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

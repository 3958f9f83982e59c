#!/usr/bin/env bash
# Device call 1 of 2026-12-04d: the rows kernel's register epilogue on channel pairs (the weights
# loaded in the paired order, weight_map_pairs: one 8-byte residual load and store per pixel where
# there were two 4-byte ones), checked and timed, A/B against f46b7e5's kernel files swapped in.
# Ran at 0ee3fc4 (the pairs, reverted after this call), with the kernel files before them beside it:
#   git show f46b7e5:src/nn/native/wgmma_sm90.cuh > docs/measurements/2026-12-04d/ab/wgmma_sm90_f46b7e5.cuh
#   git show f46b7e5:src/nn/native/wgmma_rows_kernels.cu > docs/measurements/2026-12-04d/ab/wgmma_rows_kernels_f46b7e5.cu
#   bash docs/measurements/2026-12-04d/call1.sh   (device machine, repository root; carry .deps)
# - test_native's Hopper case (the rows kernel against float64, outputs poisoned with NaN);
# - A/B, each a cold compile, profiled: DRUNet 1 ch 4096² fp32, DnCNN 3 ch 2048² fp32, then the
#   old kernel files, then the new again (DRUNet);
# - Nsight Compute: the new fp32 rows kernel's first two launches (without, with a residual).
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  stamp test_native
  timeout 200 "$PNP_CALL_BIN/test_native" -tc="*Hopper implicit-GEMM*" >"$OUT/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/1_test_native.log" | head -20
  grep -E "float32 64->64 k3 (13x384|100x512) variant 2 kernel 3|bfloat16 128->64 k3 6x640 variant 2 kernel 3" "$OUT/1_test_native.log" | head -4
  nt 2_new.log drunet 1 4096x4096 --profile 3
  nt 2_new.log dncnn 3 2048x2048 --profile 3
  A=docs/measurements/2026-12-04d/ab
  cp src/nn/native/wgmma_sm90.cuh /tmp/new_sm90.cuh
  cp $A/wgmma_sm90_f46b7e5.cuh src/nn/native/wgmma_sm90.cuh
  swap_source src/nn/native/wgmma_rows_kernels.cu $A/wgmma_rows_kernels_f46b7e5.cu nn_time
  nt 3_old.log drunet 1 4096x4096 --profile 3
  nt 3_old.log dncnn 3 2048x2048 --profile 3
  cp /tmp/new_sm90.cuh src/nn/native/wgmma_sm90.cuh
  restore_source src/nn/native/wgmma_rows_kernels.cu nn_time
  nt 4_new2.log drunet 1 4096x4096 --profile 3
  stamp "ncu new fp32 rows kernel"
  timeout 200 ncu --clock-control none -k regex:wgmma_rows_kernel --launch-count 2 --section SpeedOfLight \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters --import-source no -o /tmp/rows_new -f \
    "$PNP_CALL_BIN/nn_time" drunet 1 4096x4096 --device cuda --backends native --native cfabeGwp --timed 5 >/tmp/ncu.log 2>&1
  echo "ncu rc=$?"
  ncu -i /tmp/rows_new.ncu-rep --page details >"$OUT/5_rows_details.txt" 2>&1
  ncu -i /tmp/rows_new.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >/tmp/rows_sass.csv.gz
  python3 scripts/ncu_stalls.py /tmp/rows_sass.csv.gz >"$OUT/5_rows_stalls.txt" 2>&1
  cat "$OUT/5_rows_stalls.txt"
  grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|SM Frequency|L1/TEX Cache" "$OUT/5_rows_details.txt" | head -12
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

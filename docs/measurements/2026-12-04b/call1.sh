#!/usr/bin/env bash
# Device call 1 of 2026-12-04b: where the rows kernel's fp32 time goes, its CTAs in bands, and
# the margin.
#   bash docs/measurements/2026-12-04b/call1.sh   (device machine, repository root; carry .deps)
# - test_native's margin and interleaving cases, and the Hopper kernels' float64 case (the rows
#   kernel with its band rule, bands of 7 rows and whole columns);
# - DRUNet 1 ch 4096² fp32, a cold compile (its choices in the notes) with the plan cache written,
#   profiled, the GPU's clocks and power sampled every 20 ms meanwhile (nvidia-smi);
# - Nsight Compute (full set, with per-instruction stall samples) on the rows kernel's first two
#   launches of a forward from that plan cache without a CUDA graph: DRUNet's first 64-channel
#   layer without a residual, then its first with one;
# - A/B of the rows kernel's CTAs in bands (this tree) against down whole columns (band = oh,
#   the order before; the kernel file edited by sed, rebuilt): DRUNet 1 ch 4096² fp32 and bf16,
#   DnCNN 3 ch 2048² and 4096² fp32, each a cold compile, profiled.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build nn_time test_native
  stamp test_native margin and interleaving
  timeout 200 "$PNP_CALL_BIN/test_native" -tc="*margin*,*interleaved*,*Hopper implicit-GEMM*" >"$OUT/3_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/3_test_native.log" | head -20
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv,noheader -lms 20 >"$OUT/4_clocks.csv" 2>&1 &
  smi=$!
  nt 2_nt.log drunet 1 4096x4096 --native cfagbeGwp --profile 3
  kill $smi
  stamp "clock samples: $(wc -l <"$OUT/4_clocks.csv")"
} 2>&1 | tee -a "$OUT/0_summary.log"
rows_ncu() {  # NAME ARCH CH SHAPE NATIVE COUNT
  stamp "ncu $1"
  timeout 240 ncu --clock-control none -k regex:wgmma_rows_kernel --launch-count "$6" --set full --import-source no \
    -o "/tmp/$1" -f "$PNP_CALL_BIN/nn_time" "$2" "$3" "$4" --device cuda --backends native --native "$5" --timed 5 \
    >"/tmp/$1.log" 2>&1
  echo "ncu rc=$?"
  tail -3 "/tmp/$1.log"
  ncu -i "/tmp/$1.ncu-rep" --page details >"$OUT/5_$1_details.txt" 2>&1
  ncu -i "/tmp/$1.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$OUT/5_$1_sass.csv.gz"
  grep -E "wgmma_rows_kernel|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|No Eligible|Executed Ipc A" \
    "$OUT/5_$1_details.txt" | head -40
}
{
  rows_ncu drunet_fp32 drunet 1 4096x4096 cfabeGwp 2
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  # A/B: the rows kernel down whole columns (band = oh, the order before this call), the same
  # build otherwise; DRUNet 4096² fp32 and bf16, DnCNN 3 ch 2048² and 4096², profiled
  for arm in bands columns; do
    if [ $arm = columns ]; then
      sed 's/^  if (a.rows_band > 0) p.share.band = std::min(a.rows_band, a.oh);/  p.share.band = a.oh;/' \
        src/nn/native/wgmma_rows_kernels.cu >/tmp/ab_rows_columns.cu
      grep -c "p.share.band = a.oh;" /tmp/ab_rows_columns.cu
      swap_source src/nn/native/wgmma_rows_kernels.cu /tmp/ab_rows_columns.cu nn_time
    fi
    nt 6_ab_$arm.log drunet 1 4096x4096 --profile 3
    nt 6_ab_$arm.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
    nt 6_ab_$arm.log dncnn 3 2048x2048 --profile 3
    nt 6_ab_$arm.log dncnn 3 4096x4096 --profile 3
  done
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 3 of 2026-12-03f: DRUNet's last skip add folded into its tail (add+conv: pnp's tail
# kernel sums x and x1 as it loads them) and cuBLAS's first-use work done beside the compile
# (stride2_transposed_warm): test_native on the GPU; DRUNet 4096² with profiles, its compile
# cold and from the plan cache; the side by side with deepinv's DRUNet under torch.compile in
# fp32 and bf16; the quick GPU check.
#   bash docs/measurements/2026-12-03f/call3.sh   (device machine, repository root; carry .deps .whl)
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  build
  stamp test_native
  timeout 150 "$PNP_CALL_BIN/test_native" >"$OUT/3_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/3_test_native.log" | head -30
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  nt 2_nt.log drunet 1 4096x4096 --profile 3
  nt 2_nt.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  rm -rf /tmp/pc
  for run in cold cached cached; do nt 2_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc; done
  grep -oE "compiled from the plan cache[^;]*" "$OUT/2_nt.log" | tail -2
  grep -oE "CUDA: the adds folded[^;]*" "$OUT/2_nt.log" | head -1
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  peer_env
  sweep 4_drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  sweep 4_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  stamp gpu_check
  timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$OUT/5_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

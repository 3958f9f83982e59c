#!/usr/bin/env bash
# Device call 1 of 2026-12-03f: DRUNet's 2×2, stride-2 transposed convolutions as two
# strided-batched cuBLAS products each, written straight into their output
# (src/nn/native/transposed_gemm.hpp), against cuDNN's dgrad (nhwc_kernels off: nn_time's d) on
# the same machine; the first DRUNet compile of a fresh machine after the shared libraries were
# read once (the candidate cause of its slowness: a cold page cache); test_native on the GPU;
# the side by side with deepinv's DRUNet under torch.compile in bf16 and fp32; the quick GPU
# check where time is left.
#   bash docs/measurements/2026-12-03f/call1.sh   (device machine, repository root; carry .deps .whl)
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  git log -1 --format=%h 2>/dev/null || true
  build
  # the shared libraries a DRUNet compile loads, read once (the page cache), timed; the driver's
  # JIT cache before and after the first compile
  libs=$(ls /opt/torch/.venv/lib/python3*/site-packages/torch/lib/*.so* /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib/*.so* 2>/dev/null)
  stamp "read $(echo "$libs" | wc -l) libraries, $(du -cb $libs 2>/dev/null | tail -1 | cut -f1) bytes"
  s=$(date +%s.%N); cat $libs >/dev/null; awk "BEGIN{print \"read in \", $(date +%s.%N) - $s, \" s\"}"
  du -sb ~/.nv/ComputeCache 2>/dev/null || echo "no ~/.nv/ComputeCache"
} 2>&1 | tee "$OUT/1_build.log"
{
  nt 2_drunet.log drunet 1 4096x4096 --profile 3
  du -sb ~/.nv/ComputeCache 2>/dev/null || echo "no ~/.nv/ComputeCache"
  nt 2_drunet.log drunet 1 4096x4096 --native cfagbeGwd --profile 3
  nt 2_drunet.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_drunet.log drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGwd --profile 3
  nt 2_drunet.log drunet 1 4096x4096
  rm -rf /tmp/pc
  for run in cold cached; do nt 2_drunet.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc; done
  grep -E "cuBLAS products" "$OUT/2_drunet.log" | head -1 | cut -c1-200
} 2>&1 | tee "$OUT/2_drunet_summary.log"
{
  stamp test_native
  timeout 150 "$PNP_CALL_BIN/test_native" >"$OUT/3_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/3_test_native.log" | head -30
} 2>&1 | tee "$OUT/3_test_summary.log"
{
  peer_env
  sweep 4_drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  sweep 4_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
} 2>&1 | tee "$OUT/4_peer.log"
if [ $(($(date +%s) - pnp_call_t0)) -lt 480 ]; then
  {
    stamp gpu_check
    timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
    cp /tmp/gc/gpu_check.log "$OUT/5_gpu_check_quick.log"
    tail -1 /tmp/gc/gpu_check.log
  } 2>&1 | tee "$OUT/5_gpu_check.log"
fi
stamp done

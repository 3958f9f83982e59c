#!/usr/bin/env bash
# Device call 4 of 2026-12-04c: the zero bias for every graph with an epilogue (ReLU ones too) and
# the workspace cap at a 16th of the output, checked and timed, then the side by side.
#   bash docs/measurements/2026-12-04c/call4.sh   (device machine, repository root; carry .deps .whl)
# - the whole build; test_native's cuDNN graph cases (float64 references, plan cache) and the
#   workspace-cap case;
# - DRUNet 1 ch 4096² fp32: a cold compile writing the plan cache (profiled), one from the cache;
#   bf16: a cold compile;
# - the side by side with deepinv's modules under torch.compile (pnp_bench): DRUNet 1 ch 4096² in
#   bf16 and fp32, DnCNN and UNet 3 ch 2048² in fp32 (eager, native, torch.compile); the GPU's
#   clocks and power sampled every 20 ms through the timed runs.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  peer_env
  stamp "test_native"
  timeout 240 "$PNP_CALL_BIN/test_native" -tc="*cuDNN graph*,*workspace cap*" >"$OUT/2_test_native.log" 2>&1
  echo "test_native rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/2_test_native.log" | head -20
  clocks_start 5_clocks
  rm -rf /tmp/pc
  nt 3_nt_fp32.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc --profile 2
  nt 3_nt_fp32.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc
  nt 4_nt_bf16.log drunet 1 4096x4096 --dtype bfloat16
  sweep 6_drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  stamp "drunet bf16 done"
  sweep 6_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
  stamp "drunet fp32 done"
  sweep 6_cnn2048_fp32 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"' float32
  clocks_stop
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

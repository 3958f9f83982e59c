#!/usr/bin/env bash
# Device call 3 of 2026-12-04 (the session's last code): the full GPU check tier; the side by
# side with deepinv's modules under torch.compile, in one call: DRUNet 1 ch 4096² in bf16 and
# fp32, DnCNN and UNet 3 ch 2048² in fp32 (eager, native, torch.compile).
#   bash docs/measurements/2026-12-04/call3.sh   (device machine, repository root; carry .deps .whl)
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  build
  stamp "gpu_check (full)"
  timeout 400 scripts/gpu_check.sh --no-build --out /tmp/gc >/dev/null 2>&1
  echo "rc=$?"
  cp /tmp/gc/gpu_check.log "$OUT/5_gpu_check.log"
  grep -E "FAIL|passed" /tmp/gc/gpu_check.log | tail -5
} 2>&1 | tee -a "$OUT/0_summary.log"
{
  peer_env
  sweep 4_drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  sweep 4_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
  sweep 4_cnn2048_fp32 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"' float32
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

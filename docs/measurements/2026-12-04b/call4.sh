#!/usr/bin/env bash
# Device call 4 of 2026-12-04b, on call 3's machine and build (built again when absent): the side
# by side with deepinv's modules under torch.compile, in one call: DRUNet 1 ch 4096² in bf16 and
# fp32, DnCNN and UNet 3 ch 2048² in fp32 (eager, native, torch.compile); the GPU's clocks and
# power sampled every 20 ms meanwhile (nvidia-smi).
#   bash docs/measurements/2026-12-04b/call4.sh   (device machine, repository root; carry .deps .whl)
. scripts/device_call.sh
{
  if [ -x "$PNP_CALL_BIN/pnp_bench" ]; then . scripts/device_env.sh; else build; fi  # (the carried libraries' path)
  peer_env
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv,noheader -lms 20 >"$OUT/4_clocks.csv" 2>&1 &
  smi=$!
  sweep 4_drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  stamp "drunet bf16 done"
  sweep 4_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
  stamp "drunet fp32 done"
  sweep 4_cnn2048_fp32 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"' float32
  kill $smi
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 4 of 2026-12-04 (at 50e5343, the code of call 3): why call 3's side by side gave
# native fp32 DRUNet 260.50 ms where call 2's nn_time runs gave 249.7-252.4 ms. The fp32 side
# by side again, then native alone in pnp_bench (fp32 and bf16), then nn_time's profile with
# its choices, all on one machine.
#   bash docs/measurements/2026-12-04/call4.sh   (device machine, repository root; carry .deps .whl)
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  build nn_time pnp_bench
  peer_env
  sweep 4_drunet4096_fp32 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' float32
  sweep 4_drunet4096_fp32_native '"drunet"' 1 '[4096, 4096]' '"native"' float32
  sweep 4_drunet4096_bf16_native '"drunet"' 1 '[4096, 4096]' '"native"' bfloat16
  nt 2_nt.log drunet 1 4096x4096 --profile 2
  grep -oE "\[1, 64, 4096, 4096\]: eng4[^;(]*" "$OUT/2_nt.log"
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

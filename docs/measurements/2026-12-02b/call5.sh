#!/usr/bin/env bash
# Device call 5 of 2026-12-02b (warm machine, call 4's build): DRUNet 1 ch 4096²'s cold native
# compile with the defaults (no plan cache), twice each in fp32 and bf16, for its spread.
#   bash docs/measurements/2026-12-02b/call5.sh   (device machine, repository root; carry .deps)
. scripts/device_env.sh
for dt in float32 bfloat16; do
  for i in 1 2; do
    echo "== nn_time drunet 1 4096x4096 $dt cfagbe cold $i"
    timeout 30 build/gpu/bin/nn_time drunet 1 4096x4096 --device cuda --dtype $dt --backends native --native cfagbe 2>&1 |
      grep -E "^nn_time|rror" | cut -c1-200
  done
done 2>&1 | tee "$OUT/6_cold_repeat.log"

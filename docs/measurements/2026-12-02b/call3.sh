#!/usr/bin/env bash
# Device call 3 of 2026-12-02b (warm machine, call 2's build): the full GPU check tier.
#   bash docs/measurements/2026-12-02b/call3.sh   (device machine, repository root; carry .deps)
. scripts/device_env.sh
timeout 570 scripts/gpu_check.sh --no-build --out "$OUT/gc" >/dev/null 2>&1
tail -25 "$OUT/gc/gpu_check.log"

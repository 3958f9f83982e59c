#!/usr/bin/env bash
# Device call 4 of 2026-12-03f (the session's last 337 s of device time): HEAD's test_native
# built alone and its CUDA cases for this session's paths run (the transposed products, the
# capture left after a failure, the head and tail kernels with the tail's second input).
#   bash docs/measurements/2026-12-03f/call4.sh   (device machine, repository root; carry .deps)
. scripts/device_call.sh
{
  build test_native
  stamp test_native
  timeout 60 "$PNP_CALL_BIN/test_native" -tc="*cuBLAS products*,*capture that failed*,*head and tail kernels*" \
    >"$OUT/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/1_test_native.log" | head -20
  stamp done
} 2>&1 | tee "$OUT/0_summary.log"

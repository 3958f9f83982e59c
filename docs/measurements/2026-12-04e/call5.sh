#!/usr/bin/env bash
# Device call 5 of 2026-12-04e: the residual's row before the input stages in float32 only
# (call 4: fp32 2 ms faster, bf16 3 ms slower): its check and timings. NOT RUN: the session's
# device time (238 s left) was too little to start a machine. Run it first next session.
#   bash docs/measurements/2026-12-04e/call5.sh   (device machine, repository root; carry .deps)
. scripts/device_call.sh
{
  build test_native nn_time
  stamp test_native
  timeout 100 "$PNP_CALL_BIN/test_native" -tc="*Hopper implicit-GEMM*" >"$OUT/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/1_test_native.log" | head -12
  nt 2_nt.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_nt.log drunet 1 4096x4096 --profile 3
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Device call 1 of 2026-12-04e: the fp32 rows kernel's residual on one consumer warpgroup
# (WgmmaConvArgs::one_consumer, fixed in 8f4a21d after 2026-12-04d's call 4) checked against
# float64, then A/B against the two-consumer kernel on one machine.
#   bash docs/measurements/2026-12-04e/call1.sh   (device machine, repository root; carry .deps)
# - the whole build at the tree (one_consumer opt-in); its nn_time kept as /tmp/nt_old;
# - test_native's Hopper case (kernel 4: the variant against float64, outputs poisoned with NaN);
# - the variant made the default for float32 with a residual (launch_wgmma_rows' condition edited
#   by sed), nn_time and test_native rebuilt, the Hopper case again (kernel 3 now on it too);
# - A/B, each a cold compile, profiled: DRUNet 1 ch 4096² fp32 old, new, old, new.
. scripts/device_call.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  build
  cp "$PNP_CALL_BIN/nn_time" /tmp/nt_old
  hopper() {
    stamp "test_native Hopper ($1)"
    timeout 200 "$PNP_CALL_BIN/test_native" -tc="*Hopper implicit-GEMM*" >"$OUT/$1" 2>&1
    echo "rc=$?"
    grep -E "ERROR|FAILED|test cases|assertions" "$OUT/$1" | head -12
    grep -E "Float (64->64 k3 (13x384|100x512|1x256)|32->64 k3 6x128|64->128 k3 5x512) variant 2 kernel [34]" "$OUT/$1" | head -12
  }
  hopper 1_test_native_optin.log
  K=src/nn/native/wgmma_rows_kernels.cu
  sed -i 's/if (a.z \&\& a.one_consumer) {/if (a.z) {/' $K
  grep -c "if (a.z) {" $K
  build nn_time test_native
  hopper 2_test_native_default.log
  for r in old new old new; do
    if [ $r = old ]; then PNP_CALL_BIN=/tmp/nt_dir_old; mkdir -p $PNP_CALL_BIN; cp /tmp/nt_old $PNP_CALL_BIN/nn_time;
    else PNP_CALL_BIN=build/gpu/bin; fi
    nt 3_ab_$r.log drunet 1 4096x4096 --profile 3
  done
  PNP_CALL_BIN=build/gpu/bin
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

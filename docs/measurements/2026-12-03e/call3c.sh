#!/usr/bin/env bash
# Device call 3c of 2026-12-03e, as run (the device tool's command line, on call 3b's machine):
# cedd8cf's kernel file touched so that the build recompiles it (call 3b's rebuild had found it
# older than its object), pnp_bench rebuilt, then call3b.sh without its DRUNet sweep and
# rebuild, then the DRUNet sweep file call3b.sh had written run by hand (outside call3b.sh's
# environment: no PYTHONPATH for the peer, so its torch.compile arm was skipped).
#   bash docs/measurements/2026-12-03e/call3c.sh   (device machine after call3b.sh; carry .whl)
touch src/nn/native/wgmma_rows_kernels.cu && grep -c "kSmemEpi" src/nn/native/wgmma_rows_kernels.cu &&
  (timeout 150 scripts/device_build.sh pnp_bench > /tmp/b.log 2>&1; grep -c "wgmma_rows_kernels" /tmp/b.log) &&
  sed -i 's/^sweep drunet4096_bf16.*$//' docs/measurements/2026-12-03e/call3b.sh &&
  sed -i 's/^  sweep drunet4096_bf16.*$//' docs/measurements/2026-12-03e/call3b.sh &&
  sed -i 's/^timeout 200 scripts\/device_build.sh pnp_bench.*$/true/' docs/measurements/2026-12-03e/call3b.sh &&
  bash docs/measurements/2026-12-03e/call3b.sh 2>&1 | tail -12
timeout 60 build/gpu/bin/pnp_bench /tmp/sweep_drunet4096_bf16.toml --output $OUT/3_drunet_native.h5 --force 2>&1 | tail -5

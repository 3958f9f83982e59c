#!/usr/bin/env bash
# Device call 5 of 2026-12-04b: the 64-channel fp32 residual layer's choice, A/B in the forward.
# A cold compile of DRUNet 1 ch 4096² fp32 writes the plan cache; then that layout's entry is
# set to the rows kernel ("pnp yes") and to cuDNN's graph ("pnp no", its plan as the compile
# stored it) in turn, and each forward runs compiled from the cache (no warm-up timing), four
# times alternating, profiled.
#   bash docs/measurements/2026-12-04b/call5.sh   (device machine, repository root; carry .deps)
. scripts/device_call.sh
{
  build nn_time
  rm -rf /tmp/pc
  nt 2_nt.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc --profile 2
  entry=$(grep -l -a "^layout \[1, 64, 4096, 4096\].*\[64, 64, 3, 3\]" /tmp/pc/native/*.plan | head -1)
  echo "entry: $entry"
  grep -a -E "^(layout|use|pnp|engine|graph_ms|generic_ms|pnp_ms) " "$entry" | cut -c1-160
  for arm in rows graph rows graph; do
    python3 - "$entry" $arm <<'PY'
import sys
p, arm = sys.argv[1], sys.argv[2]
b = open(p, "rb").read()
head, sep, plan = b.partition(b"\nplan_bytes ")  # the text header, then the plan's bytes
new, old = (b"\npnp yes\n", b"\npnp no\n") if arm == "rows" else (b"\npnp no\n", b"\npnp yes\n")
open(p, "wb").write(head.replace(old, new) + sep + plan)
PY
    stamp "arm $arm: $(grep -a '^pnp ' "$entry")"
    nt 3_ab_$arm.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc --profile 2
  done
  stamp done
} 2>&1 | tee -a "$OUT/0_summary.log"

#!/usr/bin/env bash
# Trains a shipped model on the GPU machine (device tool) and returns it through $OUT.
#   scripts/gpu_train.sh CONFIG.toml NAME [pnp_train options, e.g. --resume or --set k=v]...
# Builds pnp_train (scripts/device_build.sh; carry .deps), trains from CONFIG with its outputs
# in build/models/ (the checkpoint too, so that a later call on the same machine can --resume),
# and copies the sidecar, the log, the progress output and the weights to $OUT. The weights are
# split into 15 MiB parts (the tool returns files of at most 16 MiB); reassemble them here with
#   cat NAME.h5.part-* > models/NAME.h5
# Set PNP_GIT_COMMIT to the commit being trained (the device copy's .git may be stale), and
# PNP_TRAIN_DEADLINE=S to fit build + training into S seconds of this script (the time budget
# becomes what the build left, less 40 s for the final evaluation and the copies).
set -euo pipefail
out=${OUT:?set OUT to the folder that comes back}
config=${1:?usage: scripts/gpu_train.sh CONFIG.toml NAME [options]}
name=${2:?usage: scripts/gpu_train.sh CONFIG.toml NAME [options]}
shift 2
t0=$(date +%s)
scripts/device_build.sh pnp_train >"/tmp/${name}_build.log" 2>&1 || { tail -40 "/tmp/${name}_build.log"; exit 1; }
echo "built pnp_train in $(( $(date +%s) - t0 )) s"
dir=$PWD/build/models
mkdir -p "$dir"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/${name}_train.txt"
budget=()
if [ -n "${PNP_TRAIN_DEADLINE:-}" ]; then
  left=$(( PNP_TRAIN_DEADLINE - ($(date +%s) - t0) - 40 ))
  echo "time budget $left s (deadline $PNP_TRAIN_DEADLINE s from the start of this script)"
  budget=(--set "train.time_budget=$left")
fi
build/gpu/bin/pnp_train "$config" --force "${budget[@]}" \
  --set output.weights="\"$dir/$name.h5\"" --set output.log="\"$dir/${name}_log.h5\"" \
  --set output.checkpoint="\"$dir/${name}_checkpoint.h5\"" "$@" 2>&1 | tee -a "$out/${name}_train.txt"
cp "$dir/$name.json" "$dir/${name}_log.h5" "$out/"
split -b 15M -d "$dir/$name.h5" "$out/$name.h5.part-"
sha256sum "$dir/$name.h5" | tee "$out/$name.h5.sha256"
ls -l "$out"

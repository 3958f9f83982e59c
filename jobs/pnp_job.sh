# shellcheck shell=bash
# Shared body of the pnp Slurm jobs in jobs/*.sbatch; sourced, never run on its own.
# The variables it reads are explained in jobs/README.md and in each script's header.

# Prints the comment header of the calling script and its #SBATCH defaults.
pnp_help() {
  sed -n '2,/^#SBATCH/{/^#SBATCH/d;s/^# \{0,1\}//;p;}' "$1"
  echo "Defaults of this script (override on the sbatch command line):"
  sed -n 's/^#SBATCH /  /p' "$1"
}

pnp_log() { printf '[%(%Y-%m-%dT%H:%M:%S)T] %s\n' -1 "$*"; }

# Loads the software environment, finds the binaries, and records the provenance of the job
# (git commit of the source tree, binaries, GPUs) in the job log.
pnp_setup() {
  cd "$PNP_SOURCE" || { echo "error: cannot cd to PNP_SOURCE=$PNP_SOURCE" >&2; exit 2; }
  if [[ -n "${PNP_MODULES:-}" ]]; then
    if ! command -v module >/dev/null 2>&1; then
      echo "error: PNP_MODULES is set but the 'module' command is missing" >&2; exit 2
    fi
    module purge
    # shellcheck disable=SC2086  # a space-separated list of module names
    module load $PNP_MODULES || { echo "error: module load $PNP_MODULES failed" >&2; exit 2; }
  fi
  if [[ -n "${PNP_SPACK_ENV:-}" ]]; then
    if ! command -v spack >/dev/null 2>&1; then
      echo "error: PNP_SPACK_ENV is set but 'spack' is not on PATH (source spack/share/spack/setup-env.sh)" >&2
      exit 2
    fi
    eval "$(spack env activate --sh "$PNP_SPACK_ENV")"
  fi
  PNP_BIN=${PNP_BIN:-$PNP_SOURCE/build/$PNP_PRESET/bin}
  export PATH="$PNP_BIN:$PATH"
  export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  mkdir -p results

  local commit dirty=""
  commit=$(git -C "$PNP_SOURCE" rev-parse HEAD 2>/dev/null || echo unknown)
  if [[ $commit != unknown ]] && ! git -C "$PNP_SOURCE" diff --quiet HEAD 2>/dev/null; then
    dirty="-dirty"
  fi
  pnp_log "job ${SLURM_JOB_NAME:-local} ${SLURM_JOB_ID:-0} on ${SLURM_JOB_NODELIST:-$(hostname)}"
  pnp_log "git commit: ${commit}${dirty} (source tree $PNP_SOURCE; each output file records the commit of its build)"
  pnp_log "binaries: $PNP_BIN"
  pnp_log "tasks: ${SLURM_NTASKS:-1}, cpus per task: ${SLURM_CPUS_PER_TASK:-1}"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L || true
  fi
  local prog
  for prog in "$@"; do
    if ! command -v "$prog" >/dev/null 2>&1; then
      echo "error: $prog not found in $PNP_BIN; build with: cmake --preset $PNP_PRESET && cmake --build build/$PNP_PRESET" >&2
      exit 2
    fi
  done
}

# pnp_srun NTASKS NODES COMMAND...: one rank per GPU, bound to cores.
pnp_srun() {
  local ntasks=$1 nodes=$2
  shift 2
  pnp_log "srun -n $ntasks -N $nodes $*"
  # --kill-on-bad-exit: a rank that fails ends the step at once (no rank left waiting).
  srun --nodes="$nodes" --ntasks="$ntasks" --ntasks-per-node="$(( (ntasks + nodes - 1) / nodes ))" \
       --gpus-per-task=1 --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" --cpu-bind=cores --kill-on-bad-exit=1 "$@"
}

PNP_FAILED=0

# pnp_recon_run NTASKS NODES MODE OUTPUT: one pnp_recon run; a failure is logged and counted.
# Checkpoint/restart: the sbatch scripts ask Slurm for SIGUSR1 before the time limit
# (--signal=USR1@300) and allow a requeue. pnp_recon then writes a checkpoint and exits with 75;
# this job requeues itself, and the requeued job skips the runs whose output exists and resumes
# the interrupted one (--resume starts from the beginning when there is no checkpoint).
pnp_recon_run() {
  local ntasks=$1 nodes=$2 mode=$3 out=$4 rc
  if [[ -e $out ]]; then
    pnp_log "skipped: $out exists (finished before a requeue)"
    return
  fi
  pnp_srun "$ntasks" "$nodes" pnp_recon "$PNP_CONFIG" \
    --set compile.mode="$mode" --set compile.backend="$PNP_BACKEND" --output "$out" --resume
  rc=$?
  if (( rc == 0 )); then
    pnp_log "wrote $out"
  elif (( rc == 75 )); then
    pnp_log "checkpointed $out after a signal; requeueing job ${SLURM_JOB_ID:-?}"
    if [[ -n "${SLURM_JOB_ID:-}" ]] && command -v scontrol >/dev/null 2>&1; then scontrol requeue "$SLURM_JOB_ID"; fi
    exit 75
  else
    pnp_log "error: pnp_recon failed: $ntasks GPUs, mode $mode ($out)"
    PNP_FAILED=$((PNP_FAILED + 1))
  fi
}

# The 1- and 2-GPU PnP study: every mode in MODES, every count in RANKS_LIST, REPS times.
pnp_study() {
  local n mode rep
  for rep in $(seq 1 "$REPS"); do
    for n in $RANKS_LIST; do
      for mode in $MODES; do
        pnp_recon_run "$n" 1 "$mode" \
          "results/${SLURM_JOB_NAME}_${SLURM_JOB_ID}_${n}gpu_${mode}_${PNP_BACKEND}_r${rep}.h5"
      done
    done
  done
}

# Strong scaling: the same problem on each GPU count in RANKS_LIST, GPUS_PER_NODE per node.
pnp_scaling() {
  local n nodes mode rep
  for rep in $(seq 1 "$REPS"); do
    for n in $RANKS_LIST; do
      nodes=$(( (n + GPUS_PER_NODE - 1) / GPUS_PER_NODE ))
      for mode in $MODES; do
        pnp_recon_run "$n" "$nodes" "$mode" \
          "results/${SLURM_JOB_NAME}_${SLURM_JOB_ID}_${n}gpu_${mode}_${PNP_BACKEND}_r${rep}.h5"
      done
    done
  done
}

# The denoiser sweep on one GPU.
# A volume over every node of the job: one z-slab per GPU (SLURM_JOB_NUM_NODES x GPUS_PER_NODE
# ranks), each mode in MODES.
pnp_volume() {
  local nodes=${SLURM_JOB_NUM_NODES:-1} n mode
  n=$(( nodes * GPUS_PER_NODE ))
  for mode in $MODES; do
    pnp_recon_run "$n" "$nodes" "$mode" "results/${SLURM_JOB_NAME}_${SLURM_JOB_ID}_${n}gpu_${mode}_${PNP_BACKEND}.h5"
  done
}

pnp_sweep() {
  local out="results/${SLURM_JOB_NAME}_${SLURM_JOB_ID}.h5"
  if pnp_srun 1 1 pnp_bench "$PNP_SWEEP_CONFIG" --output "$out"; then
    pnp_log "wrote $out"
  else
    pnp_log "error: pnp_bench failed ($out)"
    PNP_FAILED=$((PNP_FAILED + 1))
  fi
}

pnp_finish() {
  pnp_log "results: results/${SLURM_JOB_NAME}_${SLURM_JOB_ID}*.h5"
  pnp_log "figures: PYTHONPATH=postprocess python3 -m pnp_postprocess all results/${SLURM_JOB_NAME}_${SLURM_JOB_ID}*.h5 --out figures/${SLURM_JOB_NAME}_${SLURM_JOB_ID}"
  if (( PNP_FAILED > 0 )); then
    pnp_log "error: $PNP_FAILED run(s) failed"
    exit 1
  fi
}

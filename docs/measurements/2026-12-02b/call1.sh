#!/usr/bin/env bash
# Device call 1 of 2026-12-02b: build; the quick GPU check; the plan cache and parallel plan
# builds (scripts/gpu_measure.sh plancache); MPI_Init of a singleton with OpenMPI's default
# components against pml ob1 + btl self (pnp_recon --dry-run: no CUDA); study_4096's first
# iteration (pre, 1 rank), twice with the defaults, once with ob1 + self.
#   bash docs/measurements/2026-12-02b/call1.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
} 2>&1 | tee "$out/1_build.log"
[ -x $b/pnp_recon ] && [ -x $b/nn_time ] || exit 1
stamp gpu_check | tee -a "$out/1_build.log"
timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
cp /tmp/gc/gpu_check.log "$out/2_gpu_check_quick.log"
tail -1 "$out/2_gpu_check_quick.log"
stamp plancache | tee "$out/3_plancache.log"
timeout 280 scripts/gpu_measure.sh plancache >/dev/null 2>&1
cat "$out/plancache.log" >>"$out/3_plancache.log" && rm "$out/plancache.log"
{
  stamp "MPI components"
  ompi_info 2>/dev/null | grep -E "MCA (pml|btl|mtl|osc|coll|ess)" | awk '{print $2, $3}' | tr '\n' ' '; echo
  for v in default ob1_self default ob1_self default ob1_self; do
    if [ $v = default ]; then env=(); else env=(OMPI_MCA_pml=ob1 OMPI_MCA_btl=self); fi
    s=$(date +%s.%N)
    env "${env[@]}" $b/pnp_recon input/study_4096.toml --dry-run >/dev/null 2>&1
    echo "dry-run $v: $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.3f", b - a}') s"
  done
  for v in default default ob1_self; do
    if [ $v = default ]; then env=(); else env=(OMPI_MCA_pml=ob1 OMPI_MCA_btl=self); fi
    stamp "study_4096 pre, $v"
    env "${env[@]}" timeout 60 $b/pnp_recon input/study_4096.toml --output /tmp/s.h5 --force --set compile.mode='"pre"' 2>&1 |
      grep -vE "^iteration " | tail -24
  done
  stamp done
} 2>&1 | tee "$out/4_study.log"

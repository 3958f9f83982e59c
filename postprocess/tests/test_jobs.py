"""The Slurm scripts in jobs/: their headers explain the variables, they place one rank per GPU
bound to cores, and -- run against a fake `srun` and fake pnp binaries that write
schema-exact files -- they write one result file per run, named after the job, log the git
commit, and their results go straight into the figures. (`bash -n` and shellcheck run as
their own ctest tests: test/postprocess/CMakeLists.txt.)"""
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from pnp_postprocess import make_figure, read_csv

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "jobs"
SCRIPTS = sorted(JOBS.glob("*.sbatch"))
TESTS = Path(__file__).resolve().parent


def test_there_is_a_script_per_job_and_gpu():
    names = {p.stem for p in SCRIPTS}
    for job in ("study", "scaling", "sweep"):
        for gpu in ("a100", "h100"):
            assert f"{job}_{gpu}" in names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_header_and_slurm_directives(script):
    text = script.read_text()
    sb = dict(re.findall(r"^#SBATCH --([\w-]+)=?(\S*)", text, re.M))
    assert sb["job-name"] == "pnp_" + script.stem
    assert sb["gpus-per-task"] == "1"
    assert int(sb["ntasks-per-node"]) >= 1 and int(sb["cpus-per-task"]) >= 1
    assert sb["constraint"] == script.stem.split("_")[1]
    assert sb["output"] == "%x_%j.log"
    help_text = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True,
                               timeout=30, cwd="/")
    assert help_text.returncode == 0
    for word in ("account", "partition", "constraint", "PNP_MODULES", "PNP_SPACK_ENV", "PNP_BIN",
                 "SBATCH_ACCOUNT", "SBATCH_PARTITION", "SBATCH_CONSTRAINT", "--gpus-per-task=1"):
        assert word in help_text.stdout, word
    # everything ahead of the first #SBATCH line is comments: sbatch reads directives only there
    before = text[:text.index("#SBATCH")].splitlines()
    assert before[0] == "#!/bin/bash" and all(l.startswith("#") for l in before)


def test_srun_binds_one_rank_per_gpu_to_cores():
    lib = (JOBS / "pnp_job.sh").read_text()
    srun = lib[lib.index("  srun "):].split("\n\n")[0]
    for flag in ("--gpus-per-task=1", "--cpu-bind=cores", "--ntasks-per-node=", "--cpus-per-task="):
        assert flag in srun
    assert 'pnp_recon "$PNP_CONFIG"' in lib and "--set compile.mode=" in lib
    assert '--output "$out"' in lib and "${SLURM_JOB_NAME}_${SLURM_JOB_ID}" in lib
    assert "rev-parse HEAD" in lib


FAKE_SRUN = """#!/bin/bash
# Fake srun: records its arguments, checks the rank-per-GPU binding, runs the program once.
echo "srun $*" >> "$FAKE_LOG"
ntasks=1
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in --ntasks=*) ntasks=${1#--ntasks=} ;; esac
  shift
done
export FAKE_NTASKS=$ntasks
exec "$@"
"""

FAKE_RECON = """#!{py}
# Fake pnp_recon: writes a schema-exact output for the requested mode and rank count.
import os, sys
sys.path.insert(0, {tests!r})
from conftest import write_recon, H100
args = sys.argv[1:]
assert args[0].endswith(".toml"), args
sets = dict(a.split("=", 1) for a in args[args.index("--set") + 1::2] if "=" in a)
mode = sets["compile.mode"]
if mode == os.environ.get("FAKE_FAIL"):
    print("error: fake failure", file=sys.stderr); sys.exit(1)
n = int(os.environ["FAKE_NTASKS"])
write_recon(args[args.index("--output") + 1], ranks=n, mode=mode, gpu=H100,
            backend=sets["compile.backend"], first=1.0 + 3 * (mode != "none"),
            stable=0.8 / n / (1.0 if mode == "none" else 1.5), n=16, seed=n)
"""

FAKE_BENCH = """#!{py}
import sys
sys.path.insert(0, {tests!r})
from conftest import write_bench, bench_rows, A100
args = sys.argv[1:]
assert args[0].endswith("sweep.toml"), args
write_bench(args[args.index("--output") + 1], bench_rows(A100), gpu=A100)
"""


@pytest.fixture
def cluster(tmp_path):
    """A source tree (jobs/ + a git commit), fake binaries, and the job environment."""
    src = tmp_path / "src"
    shutil.copytree(JOBS, src / "jobs")
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "jobs"], check=True)
    commit = subprocess.run(git[:3] + ["rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, body in (("srun", FAKE_SRUN), ("pnp_recon", FAKE_RECON), ("pnp_bench", FAKE_BENCH)):
        p = fake / name
        p.write_text(body.format(py=sys.executable, tests=str(TESTS)) if name != "srun" else body)
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PNP_"))}
    env.update(SLURM_JOB_ID="4242", SLURM_SUBMIT_DIR=str(src), SLURM_CPUS_PER_TASK="4",
               PNP_BIN=str(fake), PATH=f"{fake}{os.pathsep}{env['PATH']}",
               FAKE_LOG=str(tmp_path / "srun.log"), REPS="1")
    return src, env, commit, tmp_path / "srun.log"


def run_job(src, env, script, **extra):
    env = dict(env, SLURM_JOB_NAME="pnp_" + Path(script).stem, **extra)
    return subprocess.run(["bash", str(src / "jobs" / script)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_cwd(src))


def tmp_cwd(src):
    return str(src.parent)  # not the source tree: the job must cd there itself


def test_study_job_end_to_end(cluster, tmp_path):
    src, env, commit, srun_log = cluster
    r = run_job(src, env, "study_h100.sbatch")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"git commit: {commit}" in r.stdout
    files = sorted((src / "results").glob("*.h5"))
    assert [f.name for f in files] == sorted(
        f"pnp_study_h100_4242_{n}gpu_{m}_native_r1.h5" for n in (1, 2)
        for m in ("none", "pre", "post", "fused"))
    for f in files:
        with h5py.File(f, "r") as h:
            assert h.attrs["ranks"] == int(f.name.split("_")[4][0])
    calls = srun_log.read_text().splitlines()
    assert len(calls) == 8
    assert all("--gpus-per-task=1" in c and "--cpu-bind=cores" in c and "--cpus-per-task=4" in c
               for c in calls)
    assert all("input/study_4096.toml" in c and "--set compile.mode=" in c for c in calls)
    # from the job's files straight to the figure
    out = make_figure("compile-speedup", files, tmp_path / "fig")
    rows = {(r["ranks"], r["compile_mode"]): r for r in read_csv(out.csv)}
    assert float(rows[("2", "fused")]["speedup_stable"]) == pytest.approx(3.0, rel=0.1)


def test_scaling_job_spreads_ranks_over_nodes(cluster):
    src, env, _, srun_log = cluster
    r = run_job(src, env, "scaling_a100.sbatch", MODES="post")
    assert r.returncode == 0, r.stdout + r.stderr
    calls = srun_log.read_text().splitlines()
    layout = [re.search(r"--nodes=(\d+) --ntasks=(\d+) --ntasks-per-node=(\d+)", c).groups()
              for c in calls]
    assert layout == [("1", "1", "1"), ("1", "2", "2"), ("1", "4", "4"), ("2", "8", "4")]
    assert len(list((src / "results").glob("pnp_scaling_a100_4242_*gpu_post_native_r1.h5"))) == 4


def test_sweep_job_names_its_file_after_the_job(cluster):
    src, env, _, _ = cluster
    r = run_job(src, env, "sweep_a100.sbatch")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (src / "results" / "pnp_sweep_a100_4242.h5").exists()


def test_a_failed_run_fails_the_job_but_not_the_others(cluster):
    src, env, _, _ = cluster
    r = run_job(src, env, "study_a100.sbatch", FAKE_FAIL="post")
    assert r.returncode == 1
    assert "error: pnp_recon failed: 1 GPUs, mode post" in r.stdout
    assert "error: 2 run(s) failed" in r.stdout
    assert len(list((src / "results").glob("*.h5"))) == 6


def test_missing_binary_is_an_error(cluster, tmp_path):
    src, env, _, _ = cluster
    r = run_job(src, dict(env, PNP_BIN=str(tmp_path / "nowhere"),
                          PATH="/usr/bin:/bin"), "study_a100.sbatch")
    assert r.returncode == 2 and "pnp_recon not found" in r.stderr


def test_volume_job_runs_one_slab_per_gpu_of_every_node(cluster):
    src, env, _, srun_log = cluster
    r = run_job(src, env, "volume_h100.sbatch", SLURM_JOB_NUM_NODES="2")
    assert r.returncode == 0, r.stdout + r.stderr
    calls = srun_log.read_text().splitlines()
    assert len(calls) == 1 and "--nodes=2 --ntasks=8 --ntasks-per-node=4" in calls[0]
    assert "input/volume_2048.toml" in calls[0] and "--set compile.mode=pre" in calls[0]
    assert (src / "results" / "pnp_volume_h100_4242_8gpu_pre_native.h5").exists()

"""pnp_bench's inductor arm on the CPU: the sweep's packages are compiled in parallel before
timing (inductor.compile_jobs), every row runs, and a second run loads them from the cache.

usage: check_inductor_sweep.py PNP_BENCH CONFIG.toml WORKDIR
"""
import math
import os
import shutil
import subprocess
import sys
import time

import h5py


def fail(msg):
    print("check_inductor_sweep: FAIL:", msg)
    sys.exit(1)


def run(bench, config, out, cache):
    env = dict(os.environ, PNP_BENCH_INDUCTOR_CPU="1", PNP_CACHE_DIR=cache)
    t0 = time.monotonic()
    p = subprocess.run([bench, config, "--output", out, "--force"], env=env, capture_output=True, text=True)
    print(p.stdout + p.stderr)
    if p.returncode != 0:
        fail(f"pnp_bench exited {p.returncode}")
    with h5py.File(out, "r") as f:
        r = f["results"]
        rows = [{k: (r[k].asstr()[i] if h5py.check_string_dtype(r[k].dtype) else r[k][i]) for k in r}
                for i in range(r["backend"].shape[0])]
    return rows, p.stdout, time.monotonic() - t0


def main():
    bench, config, work = sys.argv[1:4]
    cache = os.path.join(work, "inductor_sweep_cache")
    shutil.rmtree(cache, ignore_errors=True)
    out = os.path.join(work, "inductor_sweep.h5")

    rows, log, secs = run(bench, config, out, cache)
    if "preparing 2 packages, 2 at a time" not in log:
        fail("the two packages were not prepared in parallel before timing")
    ind = [r for r in rows if r["backend"] == "inductor"]
    if len(rows) != 4 or len(ind) != 2:
        fail(f"expected 4 rows (2 inductor), got {len(rows)}")
    for r in rows:
        if r["status"] != "ok" or not r["stable_s"] > 0:
            fail(f"row {r['shape']} {r['backend']}: {r['status']} {r['reason']}")
    for r in ind:
        if not r["export_s"] > 0 or not r["compile_s"] >= r["export_s"]:
            fail(f"cold row {r['shape']}: export_s {r['export_s']}, compile_s {r['compile_s']}")
    for r in rows:
        if r["backend"] == "eager" and not math.isnan(r["export_s"]):
            fail(f"eager row has export_s {r['export_s']}")
    # the two compiles overlapped: the run took less than their sum (plus the timing)
    if secs >= sum(r["export_s"] for r in ind):
        print(f"note: run {secs:.1f} s, exports {[round(r['export_s'], 1) for r in ind]} (no overlap seen)")

    rows2, _, _ = run(bench, config, out, cache)
    for r in (r for r in rows2 if r["backend"] == "inductor"):
        if r["status"] != "ok" or r["export_s"] != 0 or not r["compile_s"] < 1.0:
            fail(f"warm row {r['shape']}: {r['status']} export_s {r['export_s']} compile_s {r['compile_s']}")
    print("check_inductor_sweep: OK (cold exports",
          [round(float(r["export_s"]), 1) for r in ind], "s; warm loads",
          [round(float(r["compile_s"]), 3) for r in rows2 if r["backend"] == "inductor"], "s)")


if __name__ == "__main__":
    main()

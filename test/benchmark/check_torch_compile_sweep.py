"""pnp_bench's torch_compile arms on the CPU (deepinv 0.5 installed: scripts/bootstrap.sh
--with-deepinv; exit 77, skipped, without it). Checks that deepinv's own modules ran under
torch.compile with pnp's weights and the sweep's timing protocol, beside eager and native in the
same file; that a row cut off by the time cap is recorded as such (and pnp_bench still exits 0);
that pnp_peer refuses weights that do not fit deepinv's module; and that it runs deepinv's DRUNet in bf16.

usage: check_torch_compile_sweep.py PNP_BENCH CONFIG.toml WORKDIR
"""
import math
import os
import re
import subprocess
import sys

import h5py

bench, config, work = sys.argv[1:4]
try:
    import deepinv  # noqa: F401
except ImportError:
    print("deepinv is not installed (scripts/bootstrap.sh --with-deepinv): skipped")
    sys.exit(77)


def fail(msg):
    print("check_torch_compile_sweep: FAIL:", msg)
    sys.exit(1)


def sweep(cfg, out):
    p = subprocess.run([bench, cfg, "--output", out, "--force"], capture_output=True, text=True)
    print(p.stdout + p.stderr)
    if p.returncode != 0:
        fail(f"pnp_bench exited {p.returncode}")
    with h5py.File(out, "r") as f:
        r = f["results"]
        return [{k: (r[k].asstr()[i] if h5py.check_string_dtype(r[k].dtype) else r[k][i]) for k in r}
                for i in range(r["backend"].shape[0])]


# 1. default mode runs; max-autotune is cut off by a 1 s cap
text = open(config).read()
rows = sweep(config, os.path.join(work, "torch_compile_sweep.h5"))
by = {(r["architecture"], r["backend"]): r for r in rows}
for arch, cls in (("dncnn", "DnCNN"), ("drunet", "DRUNet")):
    tc = by[(arch, "torch_compile")]
    if tc["status"] != "ok":
        fail(f"{arch} torch_compile: {tc['reason']}")
    if not tc["module"].startswith(f"deepinv.models.{cls} (deepinv 0.5.0"):
        fail(f"{arch}: module {tc['module']!r}")
    if not (tc["compile_s"] > 0 and tc["stable_s"] > 0 and tc["first_call_s"] >= tc["compile_s"]):
        fail(f"{arch}: times {tc['first_call_s']}, {tc['compile_s']}, {tc['stable_s']}")
    if tc["cuda_graph"] != 0 or by[(arch, "native")]["cuda_graph"] != 0:
        fail(f"{arch}: CUDA graphs reported on the CPU")
    if by[(arch, "native")]["module"] != "" or by[(arch, "eager")]["status"] != "ok":
        fail(f"{arch}: pnp's own arms")
    # the same roofline counts: the same network
    if tc["flops"] != by[(arch, "eager")]["flops"]:
        fail(f"{arch}: FLOPs differ from the eager row's")
    print(f"{arch}: torch.compile first call {tc['first_call_s']:.2f} s, stable {tc['stable_s'] * 1e3:.3f} ms; "
          f"native {by[(arch, 'native')]['stable_s'] * 1e3:.3f} ms")
    ma = by[(arch, "torch_compile_max_autotune")]
    if ma["status"] != "ok" and not ma["reason"].startswith("time cap"):
        fail(f"{arch} max-autotune: {ma['reason']}")

capped = os.path.join(work, "torch_compile_capped.toml")
with open(capped, "w") as f:
    f.write(re.sub(r"timeout_s = \d+", "timeout_s = 1", text).replace(
        'backends = ["eager", "native", "torch_compile", "torch_compile_max_autotune"]',
        'backends = ["torch_compile_max_autotune"]').replace('architectures = ["dncnn", "drunet"]',
                                                           'architectures = ["dncnn"]'))
rows = sweep(capped, os.path.join(work, "torch_compile_capped.h5"))
r = rows[0]
if r["status"] != "skipped" or not r["reason"].startswith("time cap: torch.compile (max-autotune) did not finish "
                                                          "within 1"):
    fail(f"capped row: {r['status']} {r['reason']!r}")
if not math.isnan(r["stable_s"]):
    fail("a capped row has a time")

# 2. weights that do not fit deepinv's module are refused (exit 2, naming the weight)
import numpy as np  # noqa: E402

bad = os.path.join(work, "peer_bad_weights.h5")
with h5py.File(bad, "w") as f:
    f.create_dataset("weights/in_conv.weight", data=np.zeros((8, 1, 3, 3), np.float32))
env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "python"))
p = subprocess.run([sys.executable, "-m", "pnp_peer", "--arch", "dncnn", "--channels", "1", "--features", "8",
                    "--blocks", "3", "--shape", "1,1,16,16", "--weights", bad], capture_output=True, text=True, env=env)
if p.returncode != 2 or "has no weight" not in p.stderr:
    fail(f"bad weights: exit {p.returncode}, {p.stderr[-300:]}")

# 3. deepinv's DRUNet in bf16 (it makes its noise-level map at torch's default dtype: the peer
# runs it at the module's; without that the convolution refused a float32 input)
import json  # noqa: E402

small = deepinv.models.DRUNet(1, 1, pretrained=None, nc=(8, 16, 32, 64), nb=1)
w16 = os.path.join(work, "peer_drunet_small.h5")
with h5py.File(w16, "w") as f:
    for k, v in small.state_dict().items():
        f.create_dataset(f"weights/{k}", data=v.numpy())
p = subprocess.run([sys.executable, "-m", "pnp_peer", "--arch", "drunet", "--channels", "1", "--features",
                    "8,16,32,64", "--blocks", "1", "--shape", "1,1,32,32", "--weights", w16, "--dtype", "bfloat16",
                    "--warmup", "1", "--timed", "1", "--stable", "1"], capture_output=True, text=True, env=env)
if p.returncode != 0:
    fail(f"DRUNet bf16: exit {p.returncode}, {p.stderr[-300:]}")
r = json.loads(p.stdout.strip().splitlines()[-1])
if not (r["stable_s"] > 0 and r["error_vs_eager"] < 2e-2):
    fail(f"DRUNet bf16: {r}")
print("torch_compile arms checked")

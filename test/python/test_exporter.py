"""The Python exporter without AOT compiles (those are in test/nn/test_inductor.cpp, against the
C++ eager executor): IR loading and checks, the generic builder's op semantics against direct
torch calls, parameter names = deepinv keys, torch.export of a fixed shape, the inductor configs
of both modes, and the command line's exit codes."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

from irgen import small_net  # noqa: E402
from pnp_inductor.builder import build_module, load_ir  # noqa: E402
from pnp_inductor.export import inductor_configs, main  # noqa: E402


def reference(m, ir, x, sigma):
    """small_net written out with torch calls (pad at the end of each axis, crop to the input)."""
    sd = m.state_dict()
    dim = ir["dim"]
    conv = F.conv2d if dim == 2 else F.conv3d
    pads = []
    for d in range(dim - 1, -1, -1):
        s = x.shape[2 + d]
        pads += [0, (s + 3) // 4 * 4 - s]
    xp = F.pad(x, pads, mode="replicate")
    s = torch.full_like(xp[:, :1], float(sigma))
    h = conv(torch.cat([xp, s], 1), sd["head.weight"], sd["head.bias"], 1, 1)
    h = F.batch_norm(h, sd["bn.running_mean"], sd["bn.running_var"], sd["bn.weight"], sd["bn.bias"], False, 0.1, 1e-5)
    h = F.relu(h)
    p = (F.max_pool2d if dim == 2 else F.max_pool3d)(h, 2, 2)
    up = p.repeat_interleave(2, 2).repeat_interleave(2, 3)
    if dim == 3:
        up = up.repeat_interleave(2, 4)
    tr = (F.conv_transpose2d if dim == 2 else F.conv_transpose3d)(p, sd["down.weight"], None, 2)
    y = conv(up + tr, sd["tail.weight"], sd["tail.bias"], 1, 1)
    return y[(slice(None), slice(None)) + tuple(slice(0, x.shape[2 + d]) for d in range(dim))]


@pytest.mark.parametrize("dim,shape", [(2, (1, 1, 10, 13)), (3, (2, 1, 5, 6, 7))])
def test_builder_matches_torch(dim, shape):
    ir = small_net(dim=dim)
    m = build_module(ir)
    x = torch.rand(shape)
    y = m(x, torch.tensor(0.3))
    assert y.shape == x.shape
    torch.testing.assert_close(y, reference(m, ir, x, 0.3), rtol=1e-5, atol=1e-6)


def test_parameter_names_are_deepinv_keys():
    ir = small_net()
    keys = {p["key"] for n in ir["nodes"] for p in n["params"]}
    m = build_module(ir)
    assert set(m.state_dict()) == keys
    assert {k for k, _ in m.named_buffers()} == {"bn.running_mean", "bn.running_var"}


def test_load_ir_rejects_bad_graphs(tmp_path):
    ir = small_net()
    p = tmp_path / "g.json"
    p.write_text(json.dumps(ir))
    assert load_ir(str(p))["dim"] == 2
    bad = dict(ir, format="other")
    with pytest.raises(ValueError, match="not a pnp IR"):
        load_ir(json.dumps(bad))
    bad = json.loads(json.dumps(ir))
    bad["nodes"][3]["op"] = "softmax"
    with pytest.raises(ValueError, match="unknown op 'softmax'"):
        load_ir(json.dumps(bad))


def test_export_fixed_shape_keeps_parameters():
    ir = small_net()
    m = build_module(ir)
    x = torch.rand(1, 1, 10, 13)
    ep = torch.export.export(m, (x, torch.tensor(0.1)), strict=False)
    assert set(ep.state_dict) | set(ep.constants) >= {"head.weight", "bn.running_var", "tail.bias"}
    torch.testing.assert_close(ep.module()(x, torch.tensor(0.1)), m(x, torch.tensor(0.1)))


def test_inductor_configs():
    d = inductor_configs("default", "h", [1, 1, 8, 8], "float32", "x")
    assert d["aot_inductor.package_constants_in_so"] is False
    assert d["always_keep_tensor_constants"] is True
    assert "max_autotune" not in d
    assert d["aot_inductor.metadata"]["pnp.shape"] == "1,1,8,8"
    m = inductor_configs("max-autotune", "h", [1, 1, 8, 8], "float32", "x,sigma")
    assert m["max_autotune"] and m["coordinate_descent_tuning"]
    assert m["max_autotune_conv_backends"] == "ATEN"
    with pytest.raises(ValueError):
        inductor_configs("reduce-overhead", "h", [1], "float32", "x")


def test_cli_exit_codes(tmp_path, capsys):
    assert main(["--probe"]) == 0
    assert json.loads(capsys.readouterr().out)["torch"] == torch.__version__
    assert main(["--probe", "--expect-torch", "1.0.0"]) == 4
    assert "AOTInductor packages need the same version" in capsys.readouterr().err
    assert main(["--ir", "x.json"]) == 2
    assert main(["--ir", str(tmp_path / "missing.json"), "--shape", "1,1,8,8", "--out", str(tmp_path / "o.pt2")]) == 2
    assert not (tmp_path / "o.pt2").exists()


def test_missing_torch_is_reported(tmp_path):
    """`python -m pnp_inductor` with torch unimportable: exit 3 and a message saying so."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.path.join(HERE, "..", "..", "python")]))
    r = subprocess.run([sys.executable, "-m", "pnp_inductor", "--probe"], env=env, capture_output=True, text=True)
    assert r.returncode == 3
    assert "cannot import torch" in r.stderr

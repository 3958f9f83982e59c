"""deepinv .pth -> pnp HDF5 weights. torch and deepinv are optional: their tests skip without them."""
from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from pnp_postprocess import deepinv_convert as dc

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "test" / "nn" / "data" / "deepinv_keys.txt"


def fake_dncnn(rng, nf=4, depth=4, ch=1):
    sd = {"in_conv.weight": rng.standard_normal((nf, ch, 3, 3)), "in_conv.bias": rng.standard_normal(nf)}
    for i in range(depth - 2):
        sd[f"conv_list.{i}.weight"] = rng.standard_normal((nf, nf, 3, 3))
        sd[f"conv_list.{i}.bias"] = rng.standard_normal(nf)
    sd["out_conv.weight"] = rng.standard_normal((ch, nf, 3, 3))
    sd["out_conv.bias"] = rng.standard_normal(ch)
    return sd


def test_convert_numpy_state_dict(tmp_path):
    rng = np.random.default_rng(0)
    sd = fake_dncnn(rng)
    sd["module.extra.num_batches_tracked"] = np.array(3)
    out = tmp_path / "w.h5"
    info = dc.convert_state_dict(sd, out, source="fake")
    assert info == dict(architecture="dncnn", dim=2, in_channels=1, out_channels=1, blocks=4, features=[4])
    with h5py.File(out) as f:
        keys = sorted(k for k in f["weights"])
        assert keys == sorted(k for k in sd if "num_batches" not in k)
        for k in keys:
            d = f["weights"][k]
            assert d.dtype == np.float32
            np.testing.assert_array_equal(d[()], sd[k].astype(np.float32))
            assert d.attrs["units"] == "1" and "description" in d.attrs
        assert f.attrs["format"] == dc.FORMAT
        assert f.attrs["architecture"] == "dncnn"
        assert f.attrs["features"] == "4"
    assert dc.pnp_denoise_flags(info) == "--arch dncnn --dim 2 --channels 1 --features 4 --blocks 4"


def test_unknown_state_dict_is_a_clear_error(tmp_path):
    with pytest.raises(dc.ConvertError, match="cannot tell the architecture"):
        dc.convert_state_dict({"fc.weight": np.ones((2, 2))}, tmp_path / "x.h5")
    with pytest.raises(dc.ConvertError, match="lacks key 'm_tail.weight'"):
        dc.convert_state_dict({"m_head.weight": np.ones((4, 2, 3, 3))}, tmp_path / "x.h5")


def test_pth_with_module_prefix(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    sd = {"module." + k: torch.from_numpy(v.astype(np.float32)) for k, v in fake_dncnn(rng, nf=3, depth=3).items()}
    torch.save({"state_dict": sd}, tmp_path / "m.pth")
    assert dc.main([str(tmp_path / "m.pth"), str(tmp_path / "m.h5")]) == 0
    with h5py.File(tmp_path / "m.h5") as f:
        assert "in_conv.weight" in f["weights"] and len(f["weights"]) == 6
    assert dc.main([str(tmp_path / "missing.pth"), str(tmp_path / "n.h5")]) == 2


def _golden():
    rows = {}
    for line in GOLDEN.read_text().splitlines():
        if line and not line.startswith("#"):
            arch, dim, cin, cout, key, shape = line.split()
            rows.setdefault((arch, int(dim), int(cin), int(cout)), []).append((key, shape))
    return rows


def test_golden_keys_match_deepinv():
    """test/nn/data/deepinv_keys.txt (checked against the C++ builders) is deepinv's truth."""
    dinv = pytest.importorskip("deepinv")
    make = {"drunet": lambda d, c: dinv.models.DRUNet(c, c, pretrained=None, dim=d),
            "dncnn": lambda d, c: dinv.models.DnCNN(c, c, pretrained=None, dim=d),
            "unet": lambda d, c: dinv.models.UNet(c, c, dim=d)}
    for (arch, dim, cin, _), rows in _golden().items():
        sd = dc.clean({k: v.numpy() for k, v in make[arch](dim, cin).state_dict().items()})
        assert [(k, "x".join(map(str, v.shape))) for k, v in sd.items()] == rows, arch


@pytest.mark.parametrize("arch", ["drunet", "dncnn", "unet"])
def test_real_deepinv_models_convert(tmp_path, arch):
    dinv = pytest.importorskip("deepinv")
    torch = pytest.importorskip("torch")
    m = {"drunet": lambda: dinv.models.DRUNet(1, 1, nc=(4, 6, 8, 10), nb=2, pretrained=None),
         "dncnn": lambda: dinv.models.DnCNN(3, 3, depth=5, nf=7, pretrained=None),
         "unet": lambda: dinv.models.UNet(1, 1, scales=3, channels_per_scale=[4, 6, 8], dim=3)}[arch]()
    torch.save(m.state_dict(), tmp_path / "m.pth")
    info = dc.convert(tmp_path / "m.pth", tmp_path / "m.h5")
    expect = {"drunet": ([4, 6, 8, 10], 2, 2), "dncnn": ([7], 5, 2), "unet": ([4, 6, 8], -1, 3)}[arch]
    assert (info["features"], info["blocks"], info["dim"]) == expect
    with h5py.File(tmp_path / "m.h5") as f:
        n = sum(p.numel() for p in m.parameters())
        assert f.attrs["parameter_count"] == n
        for k, v in m.state_dict().items():
            if not k.endswith("num_batches_tracked"):
                np.testing.assert_array_equal(f["weights"][k][()], v.numpy())

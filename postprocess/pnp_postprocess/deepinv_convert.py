"""Convert a deepinv denoiser state dict (``.pth``) into pnp's HDF5 weights layout.

pnp's layout (read by ``pnp::nn::load_weights``): one float32 dataset per state-dict key under
``/weights`` (``/weights/m_down1.0.res.0.weight``, ...), each with ``units`` and
``description`` attributes, and root attributes ``format``, ``architecture``, ``dim``,
``in_channels``, ``out_channels``, ``features``, ``blocks`` and ``source``. BatchNorm's
``num_batches_tracked`` counters are dropped (inference does not use them); a ``module.``
prefix (DataParallel) and a ``state_dict`` / ``params`` wrapper are removed.

    python3 -m pnp_postprocess.deepinv_convert drunet_deepinv_gray.pth drunet_gray.h5

prints the ``pnp_denoise`` flags that build the matching network.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Mapping

import h5py
import numpy as np

FORMAT = "pnp-denoiser-weights/1"
ARCHITECTURES = ("dncnn", "drunet", "unet")


class ConvertError(ValueError):
    """A state dict that is not a deepinv DnCNN, DRUNet or UNet; the message says why."""


def load_state_dict(path: str | Path) -> dict[str, np.ndarray]:
    """Reads a ``.pth`` with torch (CPU, weights only) and returns numpy arrays."""
    import torch  # only needed for .pth files

    obj = torch.load(str(path), map_location="cpu", weights_only=True)
    for wrapper in ("state_dict", "params", "model"):
        if isinstance(obj, Mapping) and wrapper in obj and isinstance(obj[wrapper], Mapping):
            obj = obj[wrapper]
    if not isinstance(obj, Mapping):
        raise ConvertError(f"{path}: not a state dict (got {type(obj).__name__})")
    return {k: v.detach().cpu().numpy() for k, v in obj.items() if hasattr(v, "detach")}


def clean(sd: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for k, v in sd.items():
        if k.startswith("module."):
            k = k[len("module."):]
        if k.endswith("num_batches_tracked"):
            continue
        out[k] = np.asarray(v)
    return out


def describe(sd: Mapping[str, np.ndarray], architecture: str | None = None) -> dict:
    """Architecture, dim, channels, features and blocks of a cleaned state dict."""
    if architecture is None:
        if "m_head.weight" in sd:
            architecture = "drunet"
        elif "in_conv.weight" in sd:
            architecture = "dncnn"
        elif "Conv1.0.weight" in sd:
            architecture = "unet"
        else:
            first = ", ".join(list(sd)[:6])
            raise ConvertError("cannot tell the architecture: none of m_head.weight (drunet), "
                               f"in_conv.weight (dncnn), Conv1.0.weight (unet) among the keys ({first}, ...)")
    if architecture not in ARCHITECTURES:
        raise ConvertError(f"unknown architecture '{architecture}' (expected one of {', '.join(ARCHITECTURES)})")
    try:
        if architecture == "drunet":
            head, tail = sd["m_head.weight"], sd["m_tail.weight"]
            blocks = sum(1 for k in sd if k.startswith("m_down1.") and k.endswith(".res.0.weight"))
            features = [head.shape[0]] + [sd[f"m_down{i}.{blocks}.weight"].shape[0] for i in (1, 2, 3)]
            info = dict(dim=head.ndim - 2, in_channels=head.shape[1] - 1, out_channels=tail.shape[0],
                        blocks=blocks)
        elif architecture == "dncnn":
            head, tail = sd["in_conv.weight"], sd["out_conv.weight"]
            blocks = 2 + sum(1 for k in sd if k.startswith("conv_list.") and k.endswith(".weight"))
            features = [head.shape[0]]
            info = dict(dim=head.ndim - 2, in_channels=head.shape[1], out_channels=tail.shape[0], blocks=blocks)
        else:
            head, tail = sd["Conv1.0.weight"], sd["Conv_1x1.weight"]
            scales = sum(1 for k in sd if k.startswith("Conv") and k.endswith(".0.weight") and k[4:-9].isdigit())
            features = [sd[f"Conv{i + 1}.0.weight"].shape[0] for i in range(scales)]
            info = dict(dim=head.ndim - 2, in_channels=head.shape[1], out_channels=tail.shape[0], blocks=-1)
    except KeyError as e:
        raise ConvertError(f"{architecture} state dict lacks key {e}") from None
    info.update(architecture=architecture, features=[int(f) for f in features])
    return info


def pnp_denoise_flags(info: Mapping) -> str:
    flags = f"--arch {info['architecture']} --dim {info['dim']} --channels {info['in_channels']}"
    flags += " --features " + ",".join(str(f) for f in info["features"])
    if info["blocks"] >= 0:
        flags += f" --blocks {info['blocks']}"
    return flags


def convert_state_dict(sd: Mapping[str, np.ndarray], out: str | Path, architecture: str | None = None,
                       source: str = "") -> dict:
    """Writes a (numpy or torch-converted) state dict to ``out``; returns describe()'s dict."""
    sd = clean(sd)
    info = describe(sd, architecture)
    with h5py.File(out, "w") as f:
        for key, value in sd.items():
            d = f.create_dataset(f"/weights/{key}", data=np.asarray(value, dtype=np.float32))
            d.attrs["units"] = "1"
            d.attrs["description"] = f"deepinv state-dict tensor {key}"
        f.attrs["format"] = FORMAT
        f.attrs["architecture"] = info["architecture"]
        f.attrs["dim"] = np.int64(info["dim"])
        f.attrs["in_channels"] = np.int64(info["in_channels"])
        f.attrs["out_channels"] = np.int64(info["out_channels"])
        f.attrs["features"] = ",".join(str(x) for x in info["features"])
        f.attrs["blocks"] = np.int64(info["blocks"])
        f.attrs["source"] = source
        f.attrs["parameter_count"] = np.int64(sum(np.asarray(v).size for k, v in sd.items()
                                                  if not k.endswith(("running_mean", "running_var"))))
    return info


def convert(pth: str | Path, out: str | Path, architecture: str | None = None) -> dict:
    return convert_state_dict(load_state_dict(pth), out, architecture, source=Path(pth).name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m pnp_postprocess.deepinv_convert",
                                description="Convert a deepinv DnCNN/DRUNet/UNet .pth state dict into "
                                            "pnp's HDF5 weights (/weights/<key>, float32).")
    p.add_argument("pth", help="deepinv state dict (.pth)")
    p.add_argument("out", help="output HDF5 file")
    p.add_argument("--arch", choices=ARCHITECTURES, help="architecture (default: guessed from the keys)")
    a = p.parse_args(argv)
    try:
        info = convert(a.pth, a.out, a.arch)
    except (ConvertError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{a.out}: {info['architecture']} {info['dim']}D, {info['in_channels']}->{info['out_channels']} "
          f"channels; use: pnp_denoise {pnp_denoise_flags(info)} --weights {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

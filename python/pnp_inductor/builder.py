"""One generic nn.Module for every pnp IR graph.

Each IR op maps to exactly the ATen call of pnp's eager executor (src/nn/executor.cpp,
``nn::apply_node``), so compiled and eager agree to float rounding:

  sigma_channel     a [B, 1, spatial...] map filled with the runtime sigma (a 0-d tensor input)
  conv              F.conv{2,3}d, zero padding, dilation 1
  conv_transpose    F.conv_transpose{2,3}d
  batch_norm        F.batch_norm with the running statistics (inference)
  relu, add         F.relu, a + b
  concat            torch.cat along channels
  max_pool          F.max_pool{2,3}d, dilation 1, floor mode
  upsample_nearest  nearest, integer scale (scale factors passed through, as ATen's call)
  pad               replicate-pad the END of every spatial axis up to a multiple
  crop              keep the leading spatial extent of the second input

Parameters are registered in nested containers named by the dotted deepinv key, so the module's
state-dict key (and the AOTInductor constant FQN) of every parameter IS its deepinv key.
"""
from __future__ import annotations

import json
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

OPS = ("input", "sigma_channel", "conv", "conv_transpose", "batch_norm", "relu", "add", "concat",
       "max_pool", "upsample_nearest", "pad", "crop")


def load_ir(path_or_text: str) -> dict[str, Any]:
    """Reads an IR from a JSON file path or a JSON string; checks format and ops."""
    text = path_or_text
    if not path_or_text.lstrip().startswith("{"):
        with open(path_or_text, encoding="utf-8") as f:
            text = f.read()
    ir = json.loads(text)
    if ir.get("format") != "pnp-ir/1":
        raise ValueError(f"not a pnp IR (format {ir.get('format')!r}, expected 'pnp-ir/1')")
    for i, n in enumerate(ir["nodes"]):
        if n["op"] not in OPS:
            raise ValueError(f"IR node {n['name']!r}: unknown op {n['op']!r}")
        if n["id"] != i or any(j >= i or j < 0 for j in n["inputs"]):
            raise ValueError(f"IR node {n['name']!r}: not in topological order")
    return ir


def load_weights(h5_path: str, ir: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Reads /weights/<key> for every parameter of the IR (pnp's HDF5 weights layout)."""
    import h5py  # only needed when weights are given

    out: dict[str, torch.Tensor] = {}
    missing = []
    with h5py.File(h5_path, "r") as f:
        g = f["weights"]
        for n in ir["nodes"]:
            for p in n["params"]:
                if p["key"] not in g:
                    missing.append(p["key"])
                    continue
                d = g[p["key"]]
                t = torch.from_numpy(d[()]).float()  # float32, float16 (h5py reads it) or int8 codes
                enc = d.attrs.get("encoding", "float32")
                enc = enc.decode() if isinstance(enc, bytes) else str(enc)
                if enc == "int8_per_kernel":  # w = code * per-kernel scale (nn::save_weights)
                    scale = torch.from_numpy(f["weight_scales"][p["key"]][()]).float()
                    t = t * scale.reshape(list(scale.shape) + [1] * (t.dim() - 2))
                elif enc not in ("float32", "float16"):
                    raise ValueError(f"weights {h5_path}: {p['key']} has unknown encoding {enc!r}")
                if list(t.shape) != list(p["shape"]):
                    raise ValueError(f"weights {h5_path}: {p['key']} has shape {list(t.shape)}, IR says {p['shape']}")
                out[p["key"]] = t
    if missing:
        raise ValueError(f"weights {h5_path}: missing keys {missing}")
    return out


class IRModule(nn.Module):
    """forward(x) or forward(x, sigma) (sigma a 0-d tensor) for graphs with a sigma map."""

    def __init__(self, ir: dict[str, Any], weights: dict[str, torch.Tensor] | None = None,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        self.ir = ir
        self.dim = int(ir["dim"])
        self.uses_sigma = bool(ir["uses_sigma"])
        self._pkeys: list[list[tuple[str, str]]] = []  # per node: (role, key)
        gen = torch.Generator().manual_seed(0)
        for n in ir["nodes"]:
            roles = []
            for p in n["params"]:
                if weights is not None:
                    t = weights[p["key"]].to(dtype)
                elif p["role"] == "running_var":
                    t = torch.rand(p["shape"], generator=gen, dtype=dtype) + 0.5
                else:
                    t = torch.randn(p["shape"], generator=gen, dtype=dtype) * 0.1
                self._register(p["key"], t, p["trainable"])
                roles.append((p["role"], p["key"]))
            self._pkeys.append(roles)

    def _register(self, key: str, t: torch.Tensor, trainable: bool) -> None:
        *path, leaf = key.split(".")
        mod: nn.Module = self
        for part in path:
            if part not in mod._modules:
                mod.add_module(part, nn.Module())
            mod = mod._modules[part]
        if trainable:
            mod.register_parameter(leaf, nn.Parameter(t, requires_grad=False))
        else:
            mod.register_buffer(leaf, t)

    def param_map(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict(keep_vars=True).items()}

    def forward(self, x: torch.Tensor, sigma: torch.Tensor | None = None) -> torch.Tensor:
        dim = self.dim
        nodes = self.ir["nodes"]
        sd = self.param_map()
        v: list[torch.Tensor | None] = [None] * len(nodes)
        for n in nodes:
            op, a = n["op"], n["attrs"]
            ins = [v[i] for i in n["inputs"]]
            P = {role: sd[key] for role, key in self._pkeys[n["id"]]}
            if op == "input":
                y = x
            elif op == "sigma_channel":
                s = list(ins[0].shape)
                s[1] = 1
                if sigma is None:
                    raise ValueError("this IR has a sigma map: call forward(x, sigma)")
                y = sigma.to(ins[0].dtype).reshape([1] * len(s)).expand(s)
            elif op == "conv":
                f = F.conv2d if dim == 2 else F.conv3d
                y = f(ins[0], P["weight"], P.get("bias"), a["stride"], a["padding"], 1, a["groups"])
            elif op == "conv_transpose":
                f = F.conv_transpose2d if dim == 2 else F.conv_transpose3d
                y = f(ins[0], P["weight"], P.get("bias"), a["stride"], a["padding"], a["output_padding"],
                      a["groups"], 1)
            elif op == "batch_norm":
                y = F.batch_norm(ins[0], P["running_mean"], P["running_var"], P.get("weight"), P.get("bias"),
                                 False, a["momentum"], a["eps"])
            elif op == "relu":
                y = F.relu(ins[0])
            elif op == "add":
                y = ins[0] + ins[1]
            elif op == "concat":
                y = torch.cat(ins, 1)
            elif op == "max_pool":
                f = F.max_pool2d if dim == 2 else F.max_pool3d
                y = f(ins[0], a["kernel"], a["stride"], a["padding"], 1, False)
            elif op == "upsample_nearest":
                y = F.interpolate(ins[0], scale_factor=[float(s) for s in a["scale"]], mode="nearest")
            elif op == "pad":
                m = int(a["multiple"])
                pads: list[int] = []
                for d in range(dim - 1, -1, -1):  # last axis first: (left, right) pairs
                    s = int(ins[0].shape[2 + d])
                    pads += [0, (s + m - 1) // m * m - s]
                y = F.pad(ins[0], pads, mode="replicate") if any(pads) else ins[0]
            elif op == "crop":
                y = ins[0]
                for d in range(dim):
                    if y.shape[2 + d] != ins[1].shape[2 + d]:
                        y = y.narrow(2 + d, 0, ins[1].shape[2 + d])
            else:  # pragma: no cover (load_ir checks)
                raise ValueError(f"unknown op {op}")
            v[n["id"]] = y
        return v[int(self.ir["output"])]


def build_module(ir: dict[str, Any], weights: dict[str, torch.Tensor] | None = None,
                 dtype: torch.dtype = torch.float32) -> IRModule:
    return IRModule(ir, weights, dtype).eval()

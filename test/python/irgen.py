"""Small pnp IR JSON graphs written by hand for the exporter's own tests (the C++ tests use the
real builders)."""
import json


def conv(i, name, inp, cin, cout, dim, k=3, s=1, p=1, bias=True, key=None):
    key = key or name
    params = [{"role": "weight", "key": key + ".weight", "shape": [cout, cin] + [k] * dim, "trainable": True}]
    if bias:
        params.append({"role": "bias", "key": key + ".bias", "shape": [cout], "trainable": True})
    return {"id": i, "name": name, "op": "conv", "inputs": [inp],
            "attrs": {"in_channels": cin, "out_channels": cout, "kernel": [k] * dim, "stride": [s] * dim,
                      "padding": [p] * dim, "groups": 1, "bias": bias}, "params": params}


def node(i, name, op, inputs, attrs=None, params=None):
    return {"id": i, "name": name, "op": op, "inputs": inputs, "attrs": attrs or {}, "params": params or []}


def graph(nodes, dim, cin, cout, uses_sigma=False, alignment=1):
    return {"format": "pnp-ir/1", "architecture": "test", "dim": dim, "in_channels": cin, "out_channels": cout,
            "uses_sigma": uses_sigma, "alignment": alignment, "output": len(nodes) - 1, "nodes": nodes,
            "hash": "0123456789abcdef"}


def small_net(dim=2, c=1, nf=4):
    """pad -> [x, sigma] concat -> conv -> bn -> relu -> maxpool -> upsample -> convT -> add -> crop."""
    n = [node(0, "input", "input", [])]
    n.append(node(1, "pad", "pad", [0], {"multiple": 4, "mode": "replicate"}))
    n.append(node(2, "sigma", "sigma_channel", [1]))
    n.append(node(3, "cat", "concat", [1, 2], {"axis": 1}))
    n.append(conv(4, "head", 3, c + 1, nf, dim))
    n.append(node(5, "bn", "batch_norm", [4], {"channels": nf, "eps": 1e-5, "momentum": 0.1},
                  [{"role": r, "key": "bn." + r, "shape": [nf], "trainable": r in ("weight", "bias")}
                   for r in ("weight", "bias", "running_mean", "running_var")]))
    n.append(node(6, "relu", "relu", [5], {"inplace": True}))
    n.append(node(7, "pool", "max_pool", [6], {"kernel": [2] * dim, "stride": [2] * dim, "padding": [0] * dim}))
    n.append(node(8, "up", "upsample_nearest", [7], {"scale": [2] * dim}))
    n.append({"id": 9, "name": "down", "op": "conv_transpose", "inputs": [7],
              "attrs": {"in_channels": nf, "out_channels": nf, "kernel": [2] * dim, "stride": [2] * dim,
                        "padding": [0] * dim, "output_padding": [0] * dim, "groups": 1, "bias": False},
              "params": [{"role": "weight", "key": "down.weight", "shape": [nf, nf] + [2] * dim,
                          "trainable": True}]})
    n.append(node(10, "add", "add", [8, 9]))
    n.append(conv(11, "tail", 10, nf, c, dim))
    n.append(node(12, "crop", "crop", [11, 0]))
    return graph(n, dim, c, c, uses_sigma=True, alignment=2)


if __name__ == "__main__":
    print(json.dumps(small_net()))

"""pnp_inductor: the Python half of pnp's `inductor` compile backend.

It turns a pnp denoiser IR (the JSON written by ``pnp::nn::Graph::to_json``) into a generic
``torch.nn.Module`` (one builder for every IR op, no per-architecture classes), exports it with
``torch.export`` for one fixed input shape, and compiles it with AOTInductor into a ``.pt2``
package that the C++ side loads with ``torch::inductor::AOTIModelPackageLoader``.

The weights are not compiled into the package (``aot_inductor.package_constants_in_so = False``):
the C++ side feeds them with ``load_constants``, so one package serves any weights of the same IR.
The constants' fully-qualified names are the deepinv state-dict keys.
"""

EXPORTER_VERSION = "1"

# Nothing here imports torch, so `python -m pnp_inductor` can report a missing torch clearly.

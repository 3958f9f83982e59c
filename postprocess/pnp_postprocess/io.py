"""Readers for pnp_recon and pnp_bench HDF5 outputs (docs/output_schema.md)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, NamedTuple

import h5py
import numpy as np

from . import schema


class SchemaError(ValueError):
    """A file that is not a valid pnp output; the message names the file and the problem."""


def _attr(f: h5py.File, name: str, path, required=schema.REQUIRED_ROOT_ATTRS) -> object:
    if name not in f.attrs:
        if name not in required:
            return None
        raise SchemaError(f"{path}: missing root attribute '{name}' (see docs/output_schema.md)")
    value = f.attrs[name]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _dataset(f: h5py.File, name: str, path, required: bool = True):
    if name not in f:
        if required:
            raise SchemaError(f"{path}: missing dataset '{name}' (see docs/output_schema.md)")
        return None
    d = f[name]
    if not isinstance(d, h5py.Dataset):
        raise SchemaError(f"{path}: '{name}' is not a dataset")
    if h5py.check_string_dtype(d.dtype) is not None:
        return d.asstr()[()]
    return d[()]


def gpu_type(name: str) -> str:
    """Short GPU type from a device name: 'NVIDIA A100-SXM4-80GB' -> 'A100'; 'cpu' -> 'cpu'.

    Names without a recognisable model are returned unchanged.
    """
    if name.strip().lower() == "cpu":
        return "cpu"
    m = re.search(r"(?<![A-Za-z0-9])([ABHLV]\d{2,3})(?![0-9])", name)
    return m.group(1) if m else name.strip()


def gpu_label(gpu_names: str) -> str:
    """One label for the comma-separated per-rank device names of a run."""
    names = [n.strip() for n in str(gpu_names).split(",") if n.strip()]
    unique = list(dict.fromkeys(names))
    return "+".join(unique) if unique else "unknown"


def ridge_point(gpu: str) -> float | None:
    """Roofline ridge point (FLOP/B) of a GPU name or type, or None when unknown."""
    return schema.RIDGE_FLOP_PER_BYTE.get(gpu_type(gpu))


class RunKey(NamedTuple):
    """How repeated pnp_recon runs are grouped: one group per (GPU, count, mode, backend)."""
    gpu: str
    ranks: int
    mode: str
    backend: str

    def label(self) -> str:
        return f"{self.ranks} GPU{'s' if self.ranks > 1 else ''}\n{self.mode}\n{self.backend}"


def _mode_order(mode: str) -> int:
    return schema.COMPILE_MODES.index(mode) if mode in schema.COMPILE_MODES else len(schema.COMPILE_MODES)


def run_key_sort(key: RunKey):
    return (key.gpu, key.ranks, _mode_order(key.mode), key.backend)


class RunLabels:
    """What a pnp_recon file's root attributes (``self.attrs``) say of its run: the GPU, the
    compile mode and the backend. Shared by the readers of timings and of images."""

    @property
    def gpu(self) -> str:
        return gpu_label(self.attrs["gpu_names"])

    @property
    def mode(self) -> str:
        return str(self.attrs["compile_mode"])

    @property
    def backend(self) -> str:
        """The compile backend; 'eager' for mode 'none', where no backend is involved."""
        return "eager" if self.mode == "none" else str(self.attrs["compile_backend"])


@dataclass
class ReconRun(RunLabels):
    """One pnp_recon output file (the reconstruction image itself is not loaded)."""
    path: Path
    attrs: dict
    timings: dict            # phase -> float64 [iterations, ranks]
    first_iteration: float
    stable_iteration: float
    compile: float
    psnr: np.ndarray         # [iterations], NaN where not computed
    residual: np.ndarray
    peak_bytes: np.ndarray   # [ranks]
    boxes: np.ndarray        # [ranks, 4]
    halo: int

    @property
    def ranks(self) -> int:
        return int(self.attrs["ranks"])

    @property
    def key(self) -> RunKey:
        return RunKey(self.gpu, self.ranks, self.mode, self.backend)

    @property
    def iterations(self) -> int:
        return int(self.timings["total"].shape[0])


def _open_checked(path: Path, program: str, root_attrs, required=schema.REQUIRED_ROOT_ATTRS) -> tuple[h5py.File, dict]:
    """Opens a result file written by `program`; returns it (open) and its root attributes
    (`required` ones must be there, the others read as None when absent)."""
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise SchemaError(f"{path}: cannot open as HDF5 ({e})") from None
    try:
        attrs = {a: _attr(f, a, path, required) for a in root_attrs}
        if attrs["program"] != program:
            raise SchemaError(f"{path}: written by '{attrs['program']}', expected {program}")
    except SchemaError:
        f.close()
        raise
    return f, attrs


def read_recon(path) -> ReconRun:
    path = Path(path)
    f, attrs = _open_checked(path, "pnp_recon", schema.RECON_ROOT_ATTRS)
    with f:
        timings = {}
        for p in schema.PHASES + ("total", "wall"):
            t = np.asarray(_dataset(f, f"/timings/{p}", path), dtype=np.float64)
            if t.ndim != 2:
                raise SchemaError(f"{path}: /timings/{p} has shape {t.shape}, expected [iterations, ranks]")
            timings[p] = t
        for region in schema.REGIONS:   # optional: only files of compiled runs have them
            if f"/timings/{region}" in f:
                timings[region] = np.asarray(f[f"/timings/{region}"][()], dtype=np.float64)
        return ReconRun(
            path=path, attrs=attrs, timings=timings,
            first_iteration=float(_dataset(f, "/timings/first_iteration", path)),
            stable_iteration=float(_dataset(f, "/timings/stable_iteration", path)),
            compile=float(_dataset(f, "/timings/compile", path)),
            psnr=np.asarray(_dataset(f, "/metrics/psnr", path), dtype=np.float64),
            residual=np.asarray(_dataset(f, "/metrics/residual", path), dtype=np.float64),
            peak_bytes=np.asarray(_dataset(f, "/memory/peak_bytes", path), dtype=np.int64),
            boxes=np.asarray(_dataset(f, "/decomposition/boxes", path), dtype=np.int64),
            halo=int(_dataset(f, "/decomposition/halo", path)),
        )


@dataclass
class BenchFile:
    """One pnp_bench output file: its root attributes and its rows (one dict per config)."""
    path: Path
    attrs: dict
    rows: list = field(default_factory=list)


def _columns(f: h5py.File, group: str, kinds: dict, path, optional=()) -> list[dict]:
    """The rows of a group of equal-length column datasets, typed by `kinds` (str, int, float);
    a float column named in `optional` that the file lacks reads as NaN."""
    columns = {}
    for name, kind in kinds.items():
        if name in optional and name not in f.get(group, {}):
            continue
        col = np.atleast_1d(_dataset(f, f"/{group}/{name}", path))
        if kind == "str":
            col = [c.decode() if isinstance(c, bytes) else str(c) for c in col]
        elif kind == "int":
            col = [int(c) for c in col]
        else:
            col = [float(c) for c in col]
        columns[name] = col
    lengths = {len(c) for c in columns.values()}
    if len(lengths) != 1:
        raise SchemaError(f"{path}: /{group} columns have different lengths {sorted(lengths)}")
    n = lengths.pop()
    for name in kinds:
        columns.setdefault(name, [math.nan] * n)
    return [{name: columns[name][i] for name in kinds} | {"file": str(path)} for i in range(n)]


def _tool_file(path, group: str) -> bool:
    """True for a pnp_bench file holding `group` instead of a sweep's /results."""
    try:
        with h5py.File(path, "r") as f:
            return group in f and "results" not in f
    except OSError as e:
        raise SchemaError(f"{path}: cannot open as HDF5 ({e})") from None


def is_ceilings(path) -> bool:
    """True for a `pnp_bench --ceilings` file (a /ceilings group, no sweep)."""
    return _tool_file(path, "ceilings")


def is_scaling(path) -> bool:
    """True for a `pnp_bench --scaling` file (a /scaling group, no sweep)."""
    return _tool_file(path, "scaling")


def _tool_rows(path: Path, group: str, root_attrs, columns, group_attrs: bool = False) -> tuple[list[dict], dict, dict]:
    """The table /`group` of a `pnp_bench --<group>` file: its rows, the file's root attributes
    and, with `group_attrs`, the group's attributes (numpy scalars as Python values)."""
    f, attrs = _open_checked(path, "pnp_bench", root_attrs)
    with f:
        if group not in f:
            raise SchemaError(f"{path}: missing group '/{group}' (not a pnp_bench --{group} file)")
        rows = _columns(f, group, columns, path)
        extra = {k: (v.item() if hasattr(v, "item") else v) for k, v in f[group].attrs.items()} if group_attrs else {}
    return rows, attrs, extra


def read_scaling(path) -> list[dict]:
    """The rows of a `pnp_bench --scaling` file (one per halo mode, rank count and layout), each
    with the file, the device as `gpu` and the link model's attributes."""
    path = Path(path)
    rows, attrs, link = _tool_rows(path, "scaling", schema.SCALING_ROOT_ATTRS, schema.SCALING_COLUMNS,
                                   group_attrs=True)
    return [r | {"file": str(path), "gpu": gpu_label(str(attrs["gpu_names"]))} | link for r in rows]


def read_ceilings(path) -> list[dict]:
    """The rows of a `pnp_bench --ceilings` file, one per kernel (name, shape, unit, seconds,
    rate, error, file) plus the device as `gpu`."""
    path = Path(path)
    rows, attrs, _ = _tool_rows(path, "ceilings", schema.CEILINGS_ROOT_ATTRS, schema.CEILINGS_COLUMNS)
    return [r | {"gpu": gpu_label(str(attrs["gpu_names"]))} for r in rows]


def read_bench(path) -> BenchFile:
    path = Path(path)
    if is_ceilings(path):
        raise SchemaError(f"{path}: a pnp_bench --ceilings file, not a sweep (read it with read_ceilings)")
    f, attrs = _open_checked(path, "pnp_bench", schema.BENCH_ROOT_ATTRS, schema.BENCH_REQUIRED_ROOT_ATTRS)
    with f:
        if "results" not in f or not isinstance(f["results"], h5py.Group):
            raise SchemaError(f"{path}: missing group '/results' (see docs/output_schema.md)")
        rows = _columns(f, "results", schema.BENCH_COLUMNS, path, schema.BENCH_OPTIONAL)
    return BenchFile(path=path, attrs=attrs, rows=rows)


def program_of(path) -> str:
    """The `program` root attribute of a pnp output ('pnp_recon' or 'pnp_bench')."""
    try:
        with h5py.File(path, "r") as f:
            return str(_attr(f, "program", path))
    except OSError as e:
        raise SchemaError(f"{path}: cannot open as HDF5 ({e})") from None


def read_recons(paths: Iterable) -> list[ReconRun]:
    runs = [read_recon(p) for p in paths]
    if not runs:
        raise SchemaError("no pnp_recon files given")
    return runs


def read_benches(paths: Iterable) -> list[BenchFile]:
    files = [read_bench(p) for p in paths]
    if not files:
        raise SchemaError("no pnp_bench files given")
    return files

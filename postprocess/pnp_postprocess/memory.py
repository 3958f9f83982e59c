"""The memory-budget figure: each pnp_recon run of a memory matrix, its plan's estimate against
its measured peak, both as shares of its budget (denoiser.memory_limit_gb), and the runs that ran
out of memory.

Its input is a results table of pnp's docs (docs/results/memory_budget.csv: id, what, value,
unit, gpu, commit, date, command, source), whose matrix rows are named
``GPU_SIZE_bBUDGET_PRECISION_MODE_TAG_FIELD`` (``scripts/device_call.sh memory_matrix``; TAG
tells runs of different code apart, FIELD is exit, estimate_gib, peak_gib, ...).
"""
from __future__ import annotations

import csv
import re
from collections import defaultdict

from matplotlib.lines import Line2D

from .figures import _figure
from .io import SchemaError

GIB = float(1 << 30)
_ID = re.compile(r"^(?P<gpu>[a-z0-9]+)_(?P<size>\d+)_b(?P<budget>\d+(?:\.\d+)?)_(?P<precision>fp32|bf16|fp8)_"
                 r"(?P<mode>none|pre|post|fused)_(?P<tag>[a-z])_(?P<field>[a-z_]+)$")
TAG_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
              "tab:cyan", "black"]


def read_budget_tables(files) -> list[dict]:
    """The matrix rows of the given results tables (other rows are left out)."""
    rows = []
    for path in files:
        try:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                if not {"id", "value", "commit"} <= set(reader.fieldnames or ()):
                    raise SchemaError(f"{path}: not a results table (columns id, value, commit)")
                for r in reader:
                    m = _ID.match(r["id"])
                    if m:
                        rows.append({**m.groupdict(), "value": r["value"], "commit": r["commit"], "what": r["what"]})
        except UnicodeDecodeError as e:
            raise SchemaError(f"{path}: not a results table (a CSV file): {e}") from e
    return rows


def budget_table(rows: list[dict]) -> list[dict]:
    """One row per run: its settings, exit status, estimate and peak (GiB) and both as shares of
    the budget (GB); a run that did not finish has no peak (NaN)."""
    runs = defaultdict(dict)
    for r in rows:
        key = (r["gpu"], int(r["size"]), float(r["budget"]), r["precision"], r["mode"], r["tag"])
        runs[key]["commit"] = r["commit"]
        runs[key][r["field"]] = float(r["value"])
    out = []
    for (gpu, size, budget, precision, mode, tag), v in sorted(runs.items()):
        if "exit" not in v:
            continue
        est, peak = v.get("estimate_gib", float("nan")), v.get("peak_gib", float("nan"))
        out.append({"gpu": gpu.upper(), "size": size, "budget_gb": budget, "precision": precision, "mode": mode,
                    "tag": tag, "commit": v["commit"], "exit": int(v["exit"]), "estimate_gib": est, "peak_gib": peak,
                    "estimate_share": est * GIB / (budget * 1e9), "peak_share": peak * GIB / (budget * 1e9),
                    "peak_over_estimate": peak / est if est == est and est > 0 else float("nan")})
    return out


def plot_budget(rows: list[dict], plan_share: float = 0.90, patched_share: float = 0.95):
    """Left: peak against estimate, as shares of the budget, one point per run that ran (the
    budget and peak = estimate drawn), and the runs that ran out of memory above the frame at
    their estimate's share. The plan's share of the budget on a GPU is the dotted line."""
    fig, (ax,) = _figure(1)
    tags = sorted({r["tag"] for r in rows})
    color = {t: TAG_COLORS[i % len(TAG_COLORS)] for i, t in enumerate(tags)}
    marker = {"fp32": "o", "bf16": "s", "fp8": "^"}
    lo = min([0.2] + [r["estimate_share"] for r in rows if r["estimate_share"] == r["estimate_share"]])
    for r in rows:
        if r["exit"] == 0:
            ax.scatter(r["estimate_share"], r["peak_share"], color=color[r["tag"]], marker=marker[r["precision"]],
                       facecolors="none" if r["mode"] != "pre" else color[r["tag"]], s=40)
        elif r["exit"] == 1 and r["estimate_share"] == r["estimate_share"]:
            ax.scatter(r["estimate_share"], 1.08, color=color[r["tag"]], marker="x" if r["mode"] == "pre" else "+",
                       s=50)
    ax.plot([lo, 1.0], [lo, 1.0], color="grey", lw=0.8, label="peak = estimate")
    ax.axhline(1.0, color="black", lw=1.0, label="the budget")
    ax.axvline(plan_share, color="black", lw=1.0, ls=":", label=f"the plan's share on a GPU ({plan_share:.0%})")
    ax.axvline(patched_share, color="black", lw=1.0, ls="-.", label=f"... for a tile in patches ({patched_share:.0%})")
    ax.axhline(1.08, color="tab:red", lw=0.5, ls="--")
    ax.text(lo + 0.01, 1.095, "out of memory, at the estimate's share (x: pre, +: post/fused)", fontsize=8,
            color="tab:red")
    ax.set_xlim(lo - 0.02, 1.02)
    ax.set_ylim(lo - 0.02, 1.14)
    ax.set_xlabel("estimate / budget")
    ax.set_ylabel("measured peak / budget")
    commits = {t: sorted({r["commit"] for r in rows if r["tag"] == t}) for t in tags}
    handles = [Line2D([], [], color=color[t], marker="o", ls="", label=f"runs {t} ({', '.join(commits[t])})")
               for t in tags]
    handles += [Line2D([], [], color="grey", marker=marker[p], ls="", label=p) for p in ("fp32", "bf16")
                if any(r["precision"] == p for r in rows)]
    handles += [Line2D([], [], color="grey", marker="o", ls="", label="filled: pre; hollow: post/fused")]
    handles += ax.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    gpus = ", ".join(sorted({r["gpu"] for r in rows}))
    ran = sum(r["exit"] == 0 for r in rows)
    oom = sum(r["exit"] == 1 for r in rows)
    refused = sum(r["exit"] == 2 for r in rows)
    ax.set_title(f"memory plan against the measured peak, {gpus}\n{ran} runs ran, {oom} out of memory, "
                 f"{refused} refused before any work", fontsize=10)
    return fig

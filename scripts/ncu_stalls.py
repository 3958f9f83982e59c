#!/usr/bin/env python3
"""Stall samples of Nsight Compute's per-instruction source page, summed: per launch, the share of
each stall reason and of each instruction class (its opcode's first part, the predicate skipped).

  ncu -i REPORT.ncu-rep --page source --csv --print-source sass | gzip > SASS.csv.gz
  scripts/ncu_stalls.py SASS.csv.gz        (plain .csv too)

Where a kernel waits, by instruction: a wait that moves from one instruction to another with the
same total has not gone (docs/performance.md#native-kernels). ncu prints the page once per launch
profiled, each under a "Kernel Name" line; a report can print a launch twice, so launches are told
apart by their total samples. No launch in the file is an error (exit 2)."""
import csv
import gzip
import io
import sys


def launches(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read()
    blocks, cur = [], None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            cur = {"name": row[1], "hdr": None, "rows": []}
            blocks.append(cur)
        elif cur is None:
            continue
        elif row[0] == "Address":
            cur["hdr"] = row
        elif cur["hdr"] is not None:
            cur["rows"].append(row)
    out, seen = [], set()
    for b in blocks:
        h, rows = b["hdr"], b["rows"]
        if h is None:
            continue
        cols = [i for i, n in enumerate(h) if n.startswith("stall_") and "Not Issued" not in n]
        total = sum(float(r[i]) for r in rows for i in cols)
        if total <= 0 or total in seen:
            continue
        seen.add(total)
        out.append((b["name"], h, rows, cols, total))
    return out


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args and args[0] in ("-h", "--help") else 2
    found = launches(args[0])
    if not found:
        print(f"error: {args[0]}: no launch (a 'Kernel Name' line, then 'Address' and stall_* columns)", file=sys.stderr)
        return 2
    for k, (name, h, rows, cols, total) in enumerate(found):
        print(f"launch {k}: {name[:80]}; {len(rows)} instructions, {total:.0f} stall samples")
        reasons = {h[i][6:]: sum(float(r[i]) for r in rows) for i in cols}
        print("  reasons: " + ", ".join(f"{n} {100 * v / total:.1f} %" for n, v in
                                         sorted(reasons.items(), key=lambda x: (-x[1], x[0])) if v / total >= 0.005))
        ops = {}
        for r in rows:
            f = r[1].split()
            op = (f[1] if f and f[0].startswith("@") and len(f) > 1 else (f[0] if f else "")).split(".")[0]
            ops[op] = ops.get(op, 0.0) + sum(float(r[i]) for i in cols)
        print("  instructions: " + ", ".join(f"{n} {100 * v / total:.1f} %" for n, v in
                                              sorted(ops.items(), key=lambda x: (-x[1], x[0]))[:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

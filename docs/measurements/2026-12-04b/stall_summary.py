"""Stall samples of Nsight Compute's per-instruction source page, summed: per launch, the share of
each stall reason and of each instruction class (its opcode's first part).

  ncu -i REPORT.ncu-rep --page source --csv --print-source sass | gzip > SASS.csv.gz
  python3 stall_summary.py SASS.csv.gz

(ncu prints the page once per launch profiled, each under a "Kernel Name" line; a report with a
kernel profiled twice can print each launch twice, so launches are told apart by their samples.)"""
import csv
import gzip
import io
import sys


def launches(path):
    blocks, cur = [], None
    for row in csv.reader(io.StringIO(gzip.open(path, "rt").read())):
        if not row:
            continue
        if row[0] == "Kernel Name":
            cur = {"name": row[1], "hdr": None, "rows": []}
            blocks.append(cur)
        elif row[0] == "Address":
            cur["hdr"] = row
        else:
            cur["rows"].append(row)
    out, seen = [], set()
    for b in blocks:
        h, rows = b["hdr"], b["rows"]
        cols = [i for i, n in enumerate(h) if n.startswith("stall_") and "Not Issued" not in n]
        total = sum(float(r[i]) for r in rows for i in cols)
        if total in seen:
            continue
        seen.add(total)
        out.append((b["name"], h, rows, cols, total))
    return out


def main():
    for k, (name, h, rows, cols, total) in enumerate(launches(sys.argv[1])):
        print(f"launch {k}: {name[:80]}; {len(rows)} instructions, {total:.0f} stall samples")
        reasons = {h[i][6:]: sum(float(r[i]) for r in rows) for i in cols}
        print("  reasons: " + ", ".join(f"{n} {100 * v / total:.1f} %" for n, v in
                                         sorted(reasons.items(), key=lambda x: -x[1]) if v / total >= 0.005))
        ops = {}
        for r in rows:
            f = r[1].split()
            op = (f[1] if f and f[0].startswith("@") and len(f) > 1 else (f[0] if f else "")).split(".")[0]
            ops[op] = ops.get(op, 0.0) + sum(float(r[i]) for i in cols)
        print("  instructions: " + ", ".join(f"{n} {100 * v / total:.1f} %" for n, v in
                                              sorted(ops.items(), key=lambda x: -x[1])[:12]))


if __name__ == "__main__":
    main()

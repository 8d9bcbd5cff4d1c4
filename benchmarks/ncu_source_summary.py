"""Where a kernel's warps stall, by part, from ncu's source page of one launch:

    ncu ... --section SourceCounters --section WarpStateStats -o REPORT python3 ...
    ncu --import REPORT.ncu-rep --page source --csv --print-source sass | gzip > source.csv.gz
    python benchmarks/ncu_source_summary.py source.csv.gz

(`benchmarks/device_run.sh wgprobe` writes such a file.) Each SASS line's stall samples are summed
over the kernel's parts: the innermost loop holding a GMMA (the tile loop), the other loops, and
the straight code outside loops; then the lines with the most samples. The columns are found by
name (ncu's names vary between versions: the address, the SASS text, and the warp-stall
sampling columns, all samples and not-issued samples)."""

import csv
import gzip
import io
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fp4_inductor.kernels.sm90 import sass_loops  # noqa: E402


def read_rows(path):
    raw = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    lines = raw.read().splitlines()
    # ncu may print lines before the table; the header is the first line that names an address.
    start = next((i for i, line in enumerate(lines) if "Address" in line and "Source" in line), None)
    if start is None:
        raise SystemExit(f"{path}: no source table (no header naming Address and Source); it begins:\n"
                         + "\n".join(lines[:5]))
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def column(row, *words, without=()):
    for name in row:
        if all(w.lower() in name.lower() for w in words) and not any(w.lower() in name.lower() for w in without):
            return name
    return None


def line_samples(row, every, stall_columns):
    """A line's stall samples: the all-samples column, or (ncu versions that list them by reason
    only) the sum of the per-reason columns."""
    if every:
        return number(row[every])
    return sum(number(row[name]) for name in stall_columns)


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return 0.0


def summary(rows):
    address, source = column(rows[0], "address"), column(rows[0], "source")
    every = column(rows[0], "stall sampling", "(all")
    idle = column(rows[0], "stall sampling", "not")
    reasons = [name for name in rows[0] if name.lower().startswith("stall_") and "not" not in name.lower()]
    if not (address and source and (every or reasons)):
        raise SystemExit(f"columns not found in {list(rows[0])}")
    code = [(int(str(r[address]), 16), r[source], line_samples(r, every, reasons), number(r[idle]) if idle else 0.0)
            for r in rows if re.fullmatch(r"(0x)?[0-9a-fA-F]+", str(r[address]).strip())]
    loops, tile = sass_loops([(at, text) for at, text, _, _ in code])
    if tile is None:
        print(f"warning: no loop holding a GMMA found ({len(loops)} loops): the tile loop's share is 0")
    parts = {"tile loop": [0.0, 0.0, 0], "other loops": [0.0, 0.0, 0], "outside loops": [0.0, 0.0, 0]}
    for at, _, samples, not_issued in code:
        if tile and tile[0] <= at <= tile[1]:
            part = "tile loop"
        elif any(lo <= at <= hi for lo, hi in loops):
            part = "other loops"
        else:
            part = "outside loops"
        parts[part][0] += samples
        parts[part][1] += not_issued
        parts[part][2] += 1
    total = sum(p[0] for p in parts.values()) or 1.0
    print("| part | SASS lines | stall samples | share | not-issued samples |")
    print("| --- | --- | --- | --- | --- |")
    for name, (samples, not_issued, count) in parts.items():
        print(f"| {name} | {count} | {samples:.0f} | {100 * samples / total:.1f} % | {not_issued:.0f} |")
    print(f"\ntile loop: {tile and f'{tile[0]:#x}-{tile[1]:#x}'}; the 25 lines with the most samples:")
    for at, text, samples, _ in sorted(code, key=lambda c: -c[2])[:25]:
        print(f"{at:#07x} {samples:8.0f}  {text.strip()[:90]}")


if __name__ == "__main__":
    summary(read_rows(sys.argv[1]))

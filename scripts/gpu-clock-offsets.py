"""The judge's clock against each worker's, per series, from `kernelgate eval --format json`
results (the A/A off-verdict evals `scripts/gpu-aa.sh` keeps, a round's judge fixtures): each
series' median gap (judge_ms - ms), its excess over the reference worker's, the rank test's p,
and what `kg_judge.clock_findings` says with the harness's constants as they are now, the
workers' own times restored. For telling honest inter-worker offsets from hidden work.

Usage:   python3 scripts/gpu-clock-offsets.py results/gpu-proof/h100-round11-aa-off [more files or folders]
"""

import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "harness", "python", "tests"))
from harness_modules import load  # noqa: E402

kg_wire = load("kg_wire")
kg_judge = load("kg_judge")
kg_judge.kg_wire = kg_wire
SERIES = ("candidate", "base", "candidate_repeated", "reference_before_import", "reference_after_calls")


def paths(args):
    for a in args:
        yield from sorted(glob.glob(os.path.join(a, "*.json"))) if os.path.isdir(a) else [a]


def main():
    print(f"{'eval':34} {'ref gap':>8} {'scatter':>8}  series: excess over the reference's gap (ms), rank-test p   finding")
    for path in paths(sys.argv[1:]):
        with open(path) as f:
            samples = (json.load(f).get("timing") or {}).get("samples") or {}
        if "reference" not in samples:
            continue
        for series in samples.values():
            for s in series:
                if "worker_ms" in s:
                    s["ms"] = s.pop("worker_ms")
        ref_gap, spread = kg_judge._reference_gap(samples, "cuda", "reference")
        ref_gaps = kg_judge._gaps(samples, "reference")
        cells = []
        for name in SERIES:
            gaps = [s["judge_ms"] - s["ms"] for s in samples.get(name, []) if s.get("judge_ms") is not None]
            if gaps:
                p = kg_judge._shift_p(gaps, ref_gaps)
                cells.append(f"{name} {statistics.median(gaps) - ref_gap:+.3f} (p {p:.0e})")
        finding = "clock-disagrees" if kg_judge.clock_findings(samples) else "-"
        print(f"{os.path.basename(path)[:34]:34} {ref_gap:8.3f} {spread:8.3f}  {'; '.join(cells)}   {finding}")


if __name__ == "__main__":
    main()

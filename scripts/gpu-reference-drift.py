"""Why a short reference runs slower after a candidate's calls (issue 28): the reference of
level2/1_Matmul_ReLU_Add (linear + ReLU + add, ~0.055 ms on an H200, launch-bound) timed alone,
then again after one factor at a time, each factor in a fresh process so nothing carries over.

Factors: none (A/A); the candidate's extension loaded; a burst of the candidate's calls; the
profiler's warm-up and one profiled call; the caching allocator's pool grown and emptied; CUDA
graphs captured; host load from busy processes on every core but one (what parallel builds do to
a launch-bound reference); the profiler warmed before the context as the harness does, then a
burst of the candidate's calls; a sibling process starting on the same GPU as `pr` starts the
next job's (torch import and the profiler's warm-up), the reference timed in short windows for as
long as it lives (`after` is the slowest window's median). FACTORS=a,b picks some. Each row: median ms before and after and the ratio, with the ratio's
spread over REPEATS processes.

Usage:  python3 scripts/gpu-reference-drift.py [REPEATS]     (needs a GPU, torch, nvcc, ninja)
Output: a table on stdout.
"""

import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FACTORS = [
    "none",
    "extension_loaded",
    "candidate_burst",
    "profiler",
    "warmed_profiler_burst",
    "allocator_pool",
    "cuda_graphs",
    "host_load",
    "sibling_start",
]
# FACTORS=a,b in the environment picks some.
FACTORS = [f for f in os.environ.get("FACTORS", ",".join(FACTORS)).split(",") if f]

CHILD = r"""
import importlib.util, json, os, subprocess, sys, time
import torch
root, factor = sys.argv[1], sys.argv[2]
if factor == "warmed_profiler_burst":
    # What the harness does at load (kg_audit.warm_profiler): the profiler started and stopped
    # before this process has a CUDA context.
    import warnings
    from torch.profiler import profile, ProfilerActivity
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pw = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        pw.__enter__()
        pw.__exit__(None, None, None)
spec = importlib.util.spec_from_file_location("p", os.path.join(root, "KernelBench/level2/1_Matmul_ReLU_Add.py"))
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
torch.manual_seed(0)
model = p.Model(*p.get_init_inputs()).cuda()
xs = [[x.cuda() for x in p.get_inputs()] for _ in range(3)]

def time_ref(n=400):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    with torch.no_grad():
        for _ in range(50):
            model(*xs[0])
        for i in range(n):
            torch.cuda.synchronize()
            s.record(); model(*xs[i % 3]); e.record(); e.synchronize()
            out.append(s.elapsed_time(e))
    out.sort()
    return out[len(out) // 2]

before = time_ref()
busy = []
if factor in ("extension_loaded", "candidate_burst", "warmed_profiler_burst"):
    spec = importlib.util.spec_from_file_location("c", os.path.join(root, "kernels/level2/1_Matmul_ReLU_Add/cuda.py"))
    c = importlib.util.module_from_spec(spec); spec.loader.exec_module(c)
    cand = c.ModelNew(*p.get_init_inputs()).cuda()
    if factor != "extension_loaded":
        with torch.no_grad():
            for i in range(2000):
                cand(*xs[i % 3])
        torch.cuda.synchronize()
elif factor == "profiler":
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        with torch.no_grad():
            model(*xs[0])
    torch.cuda.synchronize()
elif factor == "allocator_pool":
    hold = [torch.empty(1 << 20, device="cuda") for _ in range(2000)]
    del hold
    torch.cuda.empty_cache()
elif factor == "cuda_graphs":
    g = torch.cuda.CUDAGraph()
    static = [x.clone() for x in xs[0]]
    with torch.no_grad():
        model(*static)
        with torch.cuda.graph(g):
            model(*static)
    for _ in range(100):
        g.replay()
    torch.cuda.synchronize()
elif factor == "host_load":
    n = max(1, (os.cpu_count() or 2) - 1)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    time.sleep(1.0)
if factor == "sibling_start":
    # What `pr` does while an eval runs: the next job's process starts on the same GPU (torch
    # imported, the profiler warmed as kg_audit.warm_profiler does). The reference is timed in
    # windows for as long as that process lives; the slowest window's median is the answer.
    warm = ("import warnings, torch\nfrom torch.profiler import profile, ProfilerActivity\n"
            "warnings.simplefilter('ignore')\np = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])\n"
            "p.__enter__(); p.__exit__(None, None, None)\nimport time; time.sleep(2)\n")
    sib = subprocess.Popen([sys.executable, "-c", warm])
    windows = []
    while sib.poll() is None and len(windows) < 400:
        windows.append(time_ref(200))
    after = max(windows) if windows else time_ref()
else:
    after = time_ref()
for b in busy:
    b.kill()
print(json.dumps({"before": before, "after": after}))
"""


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rows = []
    for factor in FACTORS:
        ratios, befores, afters = [], [], []
        for _ in range(repeats):
            p = subprocess.run([sys.executable, "-c", CHILD, ROOT, factor], capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(f"{factor}: failed: {p.stderr[-400:]}", file=sys.stderr)
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            befores.append(r["before"])
            afters.append(r["after"])
            ratios.append(r["after"] / r["before"])
        if ratios:
            rows.append((factor, statistics.median(befores), statistics.median(afters), min(ratios), statistics.median(ratios), max(ratios)))
    print(f"{'factor':<18} {'before ms':>10} {'after ms':>10} {'ratio min':>10} {'median':>8} {'max':>8}")
    for f, b, a, lo, med, hi in rows:
        print(f"{f:<18} {b:>10.4f} {a:>10.4f} {lo:>10.3f} {med:>8.3f} {hi:>8.3f}")


if __name__ == "__main__":
    main()

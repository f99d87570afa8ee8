#!/usr/bin/env bash
# What a job's start costs, with its workers forked from the judge (the default) and as new
# processes (KERNELGATE_WORKER_START=exec): runs `kernelgate eval` on a kernel that builds
# nothing, alternating the two PAIRS times, and prints a table of whole-process wall time, the CPU
# time of the eval and everything it started, and the judge's phases.
#   bash scripts/bench-start.sh                     # CPU, 5 pairs
#   DEVICE=cuda PAIRS=3 bash scripts/bench-start.sh  # on a GPU
#   KERNELGATE_BIN=path OUT=dir ...             # another build; where the JSON results go
# Compare within one run: a shared machine's noise moves both columns alike.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bin=${KERNELGATE_BIN:-$root/target/debug/kernelgate}
py=${KERNELGATE_PYTHON:-$root/.venv/bin/python}
[ -x "$py" ] || py=python3
export KERNELGATE_PYTHON=$py
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
"$py" - "$bin" "$out" "${PAIRS:-5}" "${DEVICE:-cpu}" <<'EOF'
import json, os, resource, statistics, subprocess, sys, time

bin, out, n, device = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cmd = [bin, "eval", "--problem", "tests/fixtures/eval/problems/relu.py",
       "--kernel", "tests/fixtures/eval/kernels/python_relu.py", "--device", device, "--format", "json"]
rows = {"fork": [], "exec": []}
for i in range(n):
    for mode in ("fork", "exec"):
        env = dict(os.environ, KERNELGATE_CHILD_ENV="KERNELGATE_WORKER_START", KERNELGATE_WORKER_START=mode)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        path = os.path.join(out, f"start-{mode}-{i}.json")
        with open(path, "w") as f:
            f.write(run.stdout)
        try:
            result = json.loads(run.stdout)
        except ValueError:
            sys.exit(f"{mode} {i}: no JSON (exit {run.returncode}):\n{run.stderr[-3000:]}")
        kind = result["outcome"]["kind"]
        if kind != "passed":
            sys.exit(f"{mode} {i}: {kind}: {json.dumps(result['outcome'])[:2000]}")
        phases = {p["name"]: p["ms"] for p in result["phases"]}
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rows[mode].append({"wall": wall, "cpu": cpu, **{k: phases.get(k, 0.0) / 1e3 for k in
                           ("process_start", "reference_worker", "compile", "total", "job_wall")}})
cols = ("wall", "cpu", "process_start", "reference_worker", "compile", "total", "job_wall")
print(f"{n} pairs on {device}, {bin}: medians in seconds (wall and cpu: the whole `kernelgate eval`)")
print("| workers | " + " | ".join(cols) + " |")
print("|---|" + "---|" * len(cols))
for mode in ("fork", "exec"):
    print(f"| {mode} | " + " | ".join(f"{statistics.median(r[c] for r in rows[mode]):.2f}" for c in cols) + " |")
EOF

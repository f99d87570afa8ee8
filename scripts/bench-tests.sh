#!/usr/bin/env bash
# Where the test suite's time goes (issue 30: `bash .ci/run` in 20 minutes on 2 cores): runs the
# integration-test binary (tests/it) with libtest's per-test times and prints the slowest tests,
# the total per module, the wall time and the C++ compiles the run made (scripts/compile-watch.py).
# Run after scripts/test.sh set things up once (.venv, the harness build, the precompiled header);
# for a cold run's compiles, first `rm -rf target/kernelgate-test-build-store
# target/kernelgate-test-torch-extensions`.
#   bash scripts/bench-tests.sh              # every test in tests/it
#   bash scripts/bench-tests.sh eval::       # a filter, as `cargo test` takes it
#   TOP=40 bash scripts/bench-tests.sh       # how many of the slowest to list (default 25)
set -euo pipefail
cd "$(dirname "$0")/.."
export KERNELGATE_PYTHON="${KERNELGATE_PYTHON:-$PWD/.venv/bin/python}"
export KERNELGATE_PCH_DIR="${KERNELGATE_PCH_DIR:-$PWD/target/kernelgate-pch}"
[ -x "$KERNELGATE_PYTHON" ] || { echo "error: $KERNELGATE_PYTHON missing: run 'bash scripts/test.sh' once" >&2; exit 1; }
log=target/bench-tests.log
start=$SECONDS
# The C++ compiles the run makes (scripts/compile-watch.py), printed after the tests' table.
python3 scripts/compile-watch.py > target/bench-tests-compiles.txt &
watch=$!
# `--report-time` is a libtest option behind `-Z unstable-options`; RUSTC_BOOTSTRAP lets the
# stable toolchain's libtest take it (it changes nothing else in the run).
RUSTC_BOOTSTRAP=1 cargo test --locked -p kernelgate --test it -- "$@" -Z unstable-options --report-time \
  2>&1 | tee "$log" | grep -E '^test result|FAILED' || true
wall=$((SECONDS - start))
kill -TERM "$watch"; wait "$watch" || true
python3 - "$log" "${TOP:-25}" "$wall" <<'EOF'
import re, sys
from collections import defaultdict
log, top, wall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
times = []
for line in open(log, errors="replace"):
    m = re.match(r"^test (\S+) \.\.\. (\w+) <([\d.]+)s>", line)
    if m:
        times.append((float(m.group(3)), m.group(1), m.group(2)))
if not times:
    sys.exit("no per-test times in " + log)
times.sort(reverse=True)
total = sum(t for t, _, _ in times)
print(f"\n{len(times)} tests, {total:.0f} s of test time, {wall} s wall (cargo's build included)\n")
print(f"{'seconds':>8}  {'share':>6}  test")
for t, name, result in times[:top]:
    print(f"{t:8.1f}  {100 * t / total:5.1f}%  {name}{'' if result == 'ok' else '  (' + result + ')'}")
per = defaultdict(float)
count = defaultdict(int)
for t, name, _ in times:
    per[name.split("::")[0]] += t
    count[name.split("::")[0]] += 1
print(f"\n{'seconds':>8}  {'share':>6}  {'tests':>5}  module")
for mod, t in sorted(per.items(), key=lambda kv: -kv[1]):
    print(f"{t:8.1f}  {100 * t / total:5.1f}%  {count[mod]:5d}  {mod}")
EOF
cat target/bench-tests-compiles.txt

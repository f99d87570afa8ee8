#!/usr/bin/env bash
# The device calls that prove issues 46-48 and fill issue 50's baselines, from two device builds
# carried as target/gpu/new (main) and target/gpu/old (809af37, main before the judge):
#   cargo build --locked --profile device -p kernelgate -p kernelgate-harness   (each checkout)
#   cp target/device/{kernelgate,libkernelgate_harness.so} target/gpu/{new,old}/
# and `carry: ["target/gpu"]`. Each call stays under one deadline (scripts/gpu-call.sh) and
# brings back one archive. Make the second call within 30 s of the first (the machine stays warm).
#   first   smoke (CUDA and Triton ReLUs), the sandbox's escapes (47), honest kernels (48),
#           the judge's GPU cheats before and after (46), the 13-kernel PR after and before
#   second  the earlier judge fixtures after, A/A after and before (46), the references'
#           baselines of every bundled problem (50)
#   third   after fixes: smoke, the timed precision audit on TF32, the judge's fixtures, honest
#           kernels, then `kernelgate pch` as a runner's set-up does (docs/runner.md: the
#           precompiled header and nvcc's side-by-side wrapper; rounds 9-10 ran without) and the
#           13-kernel PR (a cold machine's smoke builds for ~60 s); then `aa`
#   fourth  right after third: the spill cheat before settle, issue 49's second PR, eval walls, edit
#   next    round 12: the time slice between contexts, the KernelBench-size ReLU's memory, the
#           judge's fixtures and honest kernels with room to finish, the 13-kernel PR; then aa
#   round12 the judge's GPU watch after replies: its figures (scripts/gpu-watch.py), the judge's
#           fixtures, honest kernels, the H200 baselines' four missing problems, the
#           KernelBench-size ReLU; then round12b: the 13-kernel PR and A/A
#   round12one  the two in one call (no KernelBench-size ReLU, fewer A/A pairs)
#   round12min  the judge's fixtures and the watch's figures alone (the least device time)
#   round13 round12one with the workers forked from the judge, their start against new processes
#   aa      the A/A of issue 46 alone, 40 pairs (AA_SPIN_US=5000: the wire polled, an experiment)
#   short   smoke, sandbox, honest kernels (the least device time)
#   one     when only one call fits: smoke, sandbox, honest, judge46 after, 13-kernel PR after,
#           baselines
# Usage:   OUT=dir DEADLINE=560 bash scripts/gpu-proof-calls.sh first|second
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export R=$root N=$root/target/gpu/new/kernelgate O=$root/target/gpu/old/kernelgate
export KERNELGATE_PYTHON=${KERNELGATE_PYTHON:-python3} MAX_JOBS=${MAX_JOBS:-$(nproc)}
# Named, not derived from HOME: bench-verdict.sh's eval gives the contributor a fresh HOME.
export KERNELGATE_PCH_DIR=${KERNELGATE_PCH_DIR:-$HOME/.cache/kernelgate/pch}
chmod +x target/gpu/*/kernelgate
smoke='for b in cuda triton; do $N eval --problem level1/3_ReLU --kernel kernels/level1/3_ReLU/$b.py --device cuda --no-timing --format json >$OUT/smoke-$b.json 2>$OUT/smoke-$b.err; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split(\"/\")[-1], d[\"outcome\"][\"kind\"], d[\"outcome\"].get(\"message\",\"\")[:300]); sys.exit(d[\"outcome\"][\"kind\"]!=\"passed\")" $OUT/smoke-$b.json >>$OUT/smoke.txt || { tail -30 $OUT/smoke-$b.err >>$OUT/smoke.txt; exit 1; }; done'
# A job's start with forked workers and with new ones (scripts/bench-start.sh), and whether
# torch's import maps the CUDA driver (where it does, the harness does not fork).
start_ab='python3 -c "import torch; print(\"libcuda mapped after import torch:\", \"libcuda.so\" in open(\"/proc/self/maps\").read())" >$OUT/start.txt 2>&1; DEVICE=cuda PAIRS=3 KERNELGATE_BIN=$N OUT=$OUT/start bash scripts/bench-start.sh >>$OUT/start.txt 2>&1'
# The judge's GPU watch, its own figures (scripts/gpu-watch.py SECONDS), on main's harness build.
watch() { # SECONDS
  echo "mkdir -p /tmp/hm && cp \$R/target/gpu/new/libkernelgate_harness.so /tmp/hm/kernelgate_harness.so && PYTHONPATH=/tmp/hm python3 scripts/gpu-watch.py $1 >\$OUT/watch.txt 2>&1"
}
# The references of the four problems the H200 baselines lack (an H100 has every problem).
h200_baselines() { # TIMEOUT
  echo "nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo \"not an H200: the H100 has every problem\"; exit 0; }; \$N --repo \$R baseline --device cuda --problem level1/13_Matmul_for_symmetric_matrices --problem level1/15_Matmul_for_lower_triangular_matrices --problem level2/3_Gemm_BiasAdd_ReLU --problem level2/4_Conv2d_ReLU_BiasAdd --timeout $1 >\$OUT/baseline-stdout.txt 2>\$OUT/baseline-stderr.log; rc=\$?; cp -r \$R/results/timing \$OUT/timing; exit \$rc"
}
bench() { # LABEL BIN
  echo "mkdir -p /tmp/bp; OUT=/tmp/bp KERNELGATE_BIN=$2 bash scripts/bench-pr.sh $1 >\$OUT/bench-$1.txt 2>&1; rc=\$?; cp /tmp/bp/report-$1/comment.md \$OUT/comment-$1.md; cp /tmp/bp/report-$1/report.json \$OUT/report-$1.json; exit \$rc"
}
case ${1:-} in
  first)
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      "smoke:cuda|150|$smoke" \
      'sandbox|110|KERNELGATE_BIN=$N python3 scripts/gpu-sandbox.py $OUT' \
      'honest-pr|110|PR_LIMIT=100 bash scripts/gpu-honest-pr.sh after $N' \
      'judge46|150|FIXTURES=judge46 PR_LIMIT=70 bash scripts/gpu-judge-pr.sh before $O after $N' \
      "bench-after|135|$(bench after "$N")" \
      "bench-before|135|$(bench before "$O")"
    ;;
  second)
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      'judge|90|FIXTURES=judge PR_LIMIT=85 bash scripts/gpu-judge-pr.sh after $N' \
      'baselines|150|$N --repo $R baseline --device cuda --timeout 145 >$OUT/baseline-stdout.txt 2>$OUT/baseline-stderr.log; rc=$?; cp -r $R/results/timing $OUT/timing; exit $rc' \
      'aa|330|N=${AA_N:-40} bash scripts/gpu-aa.sh after $N before $O'
    ;;
  one) # when the device time left allows one call only: every issue's "after", no "before"
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      "smoke:cuda|150|$smoke" \
      'sandbox|90|KERNELGATE_BIN=$N python3 scripts/gpu-sandbox.py $OUT' \
      'honest-pr|90|PR_LIMIT=80 bash scripts/gpu-honest-pr.sh after $N' \
      'judge46|70|FIXTURES=judge46 PR_LIMIT=60 bash scripts/gpu-judge-pr.sh after $N' \
      "bench-after|130|$(bench after "$N")" \
      'baselines|120|$N --repo $R baseline --device cuda --timeout 115 >$OUT/baseline-stdout.txt 2>$OUT/baseline-stderr.log; rc=$?; cp -r $R/results/timing $OUT/timing; exit $rc'
    ;;
  third) # after fixes to the first two: the judge's fixtures and honest kernels again, more A/A
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      "smoke:cuda|150|$smoke" \
      'precision|80|bash scripts/gpu-precision.sh $N' \
      'judge46|70|FIXTURES=judge46 PR_LIMIT=60 bash scripts/gpu-judge-pr.sh after $N' \
      'judge|80|FIXTURES=judge PR_LIMIT=75 bash scripts/gpu-judge-pr.sh after $N' \
      'honest-pr|70|PR_LIMIT=65 bash scripts/gpu-honest-pr.sh after $N' \
      'pch|100|$N pch >$OUT/pch.txt 2>&1' \
      "bench-after|135|$(bench after "$N")"
    ;;
  aa) # issue 46's A/A on its own (40 pairs fill a call); AA_SPIN_US=N polls the wire N us first
    spin=''
    if [ -n "${AA_SPIN_US:-}" ]; then spin="KERNELGATE_CHILD_ENV=KERNELGATE_WIRE_SPIN_US KERNELGATE_WIRE_SPIN_US=$AA_SPIN_US"; fi
    OUT=$OUT DEADLINE=${DEADLINE:-570} bash scripts/gpu-call.sh \
      "aa|560|$spin N=\${AA_N:-40} AA_SECONDS=\${AA_SECONDS:-520} bash scripts/gpu-aa.sh after\${AA_SPIN_US:+-spin} \$N"
    ;;
  fourth) # right after `third` on the same machine (its pch and build store kept): the spill
    # cheat before settle (a00ba01 as old), issue 49's second PR over stored builds, whole-process
    # eval walls (4096^2 matmul, KernelBench-size ReLU with the contributor's build), one-kernel edit
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      'pch|100|$N pch >$OUT/pch.txt 2>&1' \
      'spill-before|70|FIXTURES=judge46 PR_LIMIT=60 bash scripts/gpu-judge-pr.sh before $O' \
      'verdict-matmul|60|KERNELGATE_BIN=$N KERNEL=tests/fixtures/eval/cuda/judge46/honest_matmul.py PROBLEM=tests/fixtures/eval/problems/matmul_4096.py CASES=eval EVAL_RUNS="1 2 3" OUT=$OUT/v bash scripts/bench-verdict.sh >$OUT/verdict-matmul.txt 2>&1' \
      'verdict-relu-kb|120|KERNELGATE_BIN=$N PROBLEM=tests/fixtures/eval/problems/relu_kb_size.py CASES=eval EVAL_RUNS="1 2 3" OUT=$OUT/v bash scripts/bench-verdict.sh >$OUT/verdict-relu-kb.txt 2>&1' \
      'edit|150|KERNELGATE_BIN=$N CASES=edit OUT=$OUT/v bash scripts/bench-verdict.sh >$OUT/edit.txt 2>&1' \
      "bench-again|100|export STORE=/tmp/bp/store-after KEEP_STORE=1; $(bench again "$N")"
    ;;
  next) # round 12, after round 11's fixes: the time slice between contexts (the spill cheat's
    # question), the KernelBench-size ReLU under the new memory plan, the judge's fixtures and
    # honest kernels with room to finish, the 13-kernel PR; then `aa` (the new clock slack)
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      "smoke:cuda|150|$smoke" \
      'timeslice|40|python3 scripts/gpu-timeslice.py 10 >$OUT/timeslice.txt 2>&1' \
      'relu-kb|120|KERNELGATE_BIN=$N PROBLEM=tests/fixtures/eval/problems/relu_kb_size.py CASES=eval EVAL_RUNS="1 2" OUT=$OUT/v bash scripts/bench-verdict.sh >$OUT/verdict-relu-kb.txt 2>&1' \
      'judge46|90|FIXTURES=judge46 PR_LIMIT=85 bash scripts/gpu-judge-pr.sh after $N' \
      'honest-pr|110|PR_LIMIT=105 bash scripts/gpu-honest-pr.sh after $N' \
      "bench-after|135|$(bench after "$N")"
    ;;
  round12) # the judge's GPU watch after replies (the spill cheat): the watch's own figures, the
    # judge's fixtures, honest kernels, the four problems' references the H200 baselines lack,
    # the KernelBench-size ReLU; then `round12b`
    OUT=$OUT DEADLINE=${DEADLINE:-585} bash scripts/gpu-call.sh \
      "watch|70|$(watch 10)" \
      'judge46|130|FIXTURES=judge46 PR_LIMIT=125 bash scripts/gpu-judge-pr.sh after $N' \
      'honest-pr|120|PR_LIMIT=115 bash scripts/gpu-honest-pr.sh after $N' \
      "baselines|100|$(h200_baselines 95)" \
      'relu-kb|100|KERNELGATE_BIN=$N PROBLEM=tests/fixtures/eval/problems/relu_kb_size.py CASES=eval EVAL_RUNS="1" OUT=$OUT/v bash scripts/bench-verdict.sh >$OUT/verdict-relu-kb.txt 2>&1'
    ;;
  round12b) # right after round12: the 13-kernel PR (honest kernels under the watch), then A/A
    OUT=$OUT DEADLINE=${DEADLINE:-575} bash scripts/gpu-call.sh \
      'pch|90|$N pch >$OUT/pch.txt 2>&1' \
      "bench-after|160|$(bench after "$N")" \
      "aa|330|N=\${AA_N:-40} AA_SECONDS=\${AA_SECONDS:-300} bash scripts/gpu-aa.sh after \$N"
    ;;
  round12min) # the least of round 12: the judge's fixtures (the spill cheat), then the watch's figures
    OUT=$OUT DEADLINE=${DEADLINE:-160} bash scripts/gpu-call.sh \
      'judge46|100|FIXTURES=judge46 PR_LIMIT=95 bash scripts/gpu-judge-pr.sh after $N' \
      "watch|50|$(watch 4)"
    ;;
  round12one) # round12 and round12b in one call, when the device time left allows one
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      "watch|45|$(watch 5)" \
      'judge46|100|FIXTURES=judge46 PR_LIMIT=95 bash scripts/gpu-judge-pr.sh after $N' \
      'honest-pr|90|PR_LIMIT=85 bash scripts/gpu-honest-pr.sh after $N' \
      "bench-after|150|$(bench after "$N")" \
      "baselines|70|$(h200_baselines 65)" \
      "aa|200|N=\${AA_N:-40} AA_SECONDS=\${AA_SECONDS:-150} bash scripts/gpu-aa.sh after \$N"
    ;;
  round13) # round12one with the workers forked from the judge (no torch import of their own),
    # and their start measured against new processes (KERNELGATE_WORKER_START=exec) on the GPU
    OUT=$OUT DEADLINE=${DEADLINE:-560} bash scripts/gpu-call.sh \
      "smoke:start|60|$start_ab" \
      'judge46|100|FIXTURES=judge46 PR_LIMIT=95 bash scripts/gpu-judge-pr.sh after $N' \
      "watch|40|$(watch 4)" \
      'honest-pr|90|PR_LIMIT=85 bash scripts/gpu-honest-pr.sh after $N' \
      "bench-after|150|$(bench after "$N")" \
      "baselines|70|$(h200_baselines 65)" \
      "aa|200|N=\${AA_N:-40} AA_SECONDS=\${AA_SECONDS:-150} bash scripts/gpu-aa.sh after \$N"
    ;;
  short) # the least that proves a GPU row runs under the sandbox: smoke, the escapes, honest kernels
    OUT=$OUT DEADLINE=${DEADLINE:-200} bash scripts/gpu-call.sh \
      "smoke:cuda|150|$smoke" \
      'sandbox|90|KERNELGATE_BIN=$N python3 scripts/gpu-sandbox.py $OUT' \
      'honest-pr|90|PR_LIMIT=80 bash scripts/gpu-honest-pr.sh after $N'
    ;;
  *) echo "usage: OUT=dir bash scripts/gpu-proof-calls.sh first|second|third|fourth|next|round12|round12b|round12one|round12min|round13|aa|one|short" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# One device call for the precompiled torch header (issue 29): `kernelgate pch` cold and again,
# then the 13-kernel pull request cold without it (KERNELGATE_PCH_DIR=off) and with it
# (scripts/bench-pr.sh), then the one-kernel edit (scripts/bench-verdict.sh) if time is left.
# Usage:   OUT=dir bash scripts/gpu-pch-round.sh
# Needs:   target/device/{kernelgate,libkernelgate_harness.so}, python3 with torch, nvcc, ninja.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export KERNELGATE_PYTHON=python3 PYTHONUNBUFFERED=1
B=$PWD/target/device/kernelgate
S=$SECONDS
{ nvidia-smi -L; nproc; python3 -c "import torch;print(torch.__version__, torch.version.cuda)"; c++ --version | head -1; } > $OUT/machine.txt 2>&1
( time $B pch ) > $OUT/pch-build.txt 2>&1
( time $B pch ) > $OUT/pch-again.txt 2>&1
echo "pch done at $((SECONDS-S)) s" >> $OUT/progress.txt
KERNELGATE_PCH_DIR=off OUT=$OUT/a bash scripts/bench-pr.sh nopch > $OUT/pr-nopch.txt 2>&1
cp $OUT/a/report-nopch/report.json $OUT/report-nopch.json 2>/dev/null
echo "nopch done at $((SECONDS-S)) s" >> $OUT/progress.txt
OUT=$OUT/b bash scripts/bench-pr.sh pch > $OUT/pr-pch.txt 2>&1
cp $OUT/b/report-pch/report.json $OUT/report-pch.json 2>/dev/null
echo "pch pr done at $((SECONDS-S)) s" >> $OUT/progress.txt
grep -h "precompiled\|compiled kg" $OUT/b/log-pch.txt | head -20 > $OUT/pch-build-notes.txt
rm -rf $OUT/a $OUT/b
left=$((560-(SECONDS-S)))
if [ $left -gt 200 ]; then CASES="edit" OUT=$OUT/v timeout $left bash scripts/bench-verdict.sh > $OUT/verdict-edit.txt 2>&1; fi
rm -rf $OUT/v
echo "all done at $((SECONDS-S)) s" >> $OUT/progress.txt

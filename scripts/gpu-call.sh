#!/usr/bin/env bash
# One device call that runs device scripts in order under one deadline and brings back one
# archive: each step gets what is left of the deadline (at most its own limit), its output goes
# to $OUT/steps/, and $OUT/all.tgz holds everything (the device tool returns at most 8 files).
# A step whose name starts with `smoke:` ends the call when it fails (no point in the rest).
# Usage:   OUT=dir DEADLINE=570 bash scripts/gpu-call.sh 'NAME|LIMIT|COMMAND' ...
#          each COMMAND runs with OUT set to the step's folder.
set -u
OUT=${OUT:?set OUT to a directory}
DEADLINE=${DEADLINE:-570}
S=$SECONDS
steps=$OUT/steps
mkdir -p "$steps"
summary=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; nproc; } >"$summary" 2>&1
for spec in "$@"; do
  name=${spec%%|*}; rest=${spec#*|}; limit=${rest%%|*}; cmd=${rest#*|}
  dir=$steps/$(printf %s "$name" | tr -c 'A-Za-z0-9_.-' '_')
  mkdir -p "$dir"
  left=$((DEADLINE - (SECONDS - S)))
  [ "$limit" -lt "$left" ] || limit=$left
  if [ "$left" -lt 20 ]; then echo "skipped $name: $left s left" >>"$summary"; continue; fi
  t0=$SECONDS
  OUT=$dir timeout "$limit" bash -c "$cmd" >"$dir/log.txt" 2>&1
  rc=$?
  echo "$name: rc=$rc in $((SECONDS - t0)) s (limit $limit)" >>"$summary"
  if [ "$rc" != 0 ] && [[ $name == smoke:* ]]; then echo "smoke failed: the rest skipped" >>"$summary"; break; fi
done
tar -czf "$OUT/all.tgz" -C "$OUT" steps summary.txt
# The tables in the reply itself (its tail holds 12,000 characters): each step's .txt files.
for f in "$steps"/*/*.txt; do
  case $f in */log.txt) continue ;; esac
  echo "== ${f#"$steps"/}"
  head -c "${SHOW:-1800}" "$f"
  echo
done
rm -rf "$steps"
cat "$summary"

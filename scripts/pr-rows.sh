# Sourced by the device scripts that gate one pull request with several kernelgate binaries
# (gpu-judge-pr.sh, gpu-honest-pr.sh); they set OUT, root, repo and work.
# run_pr NAME BASE LABEL BIN [pr-table.py options]: `kernelgate pr` of $repo from BASE to HEAD
# with BIN on ${DEVICE:-cuda} under ${PR_LIMIT:-240} s, all binaries sharing one build directory;
# $OUT/NAME-LABEL.txt gets the table (scripts/pr-table.py), $OUT/NAME-LABEL.json the report.
run_pr() {
  local name=$1 base=$2 label=$3 bin=$4
  shift 4
  local log=$OUT/$name-$label.txt t0=$SECONDS
  echo "# scripts/gpu-$name.sh $label: $("$bin" --version 2>/dev/null | head -2 | tr '\n' ' ') $(date -u +%FT%TZ)" >"$log"
  nvidia-smi -L >>"$log" 2>&1 || echo "(no nvidia-smi: a machine without a GPU)" >>"$log"
  export TORCH_EXTENSIONS_DIR=$work/ext
  timeout "${PR_LIMIT:-240}" "$bin" --repo "$repo" pr --base "$base" --head HEAD --device "${DEVICE:-cuda}" \
    --publish files --out "$work/report-$label" >"$work/log-$label.txt" 2>&1
  echo "exit $? after $((SECONDS - t0)) s" >>"$log"
  cp "$work/report-$label/report.json" "$OUT/$name-$label.json" 2>/dev/null
  python3 "$root/scripts/pr-table.py" "$work/report-$label/report.json" "$work/log-$label.txt" "$@" >>"$log" 2>&1
}

#!/usr/bin/env bash
# Lint verdicts per fixture group: how many files have at least one error, how many only
# warnings, how many nothing. Honest fixtures (partial replacements and the unproven ones too)
# must have no error; every hack fixture must keep at least one (the ones that do not are
# listed: the runtime op audit has to catch them).
#
#   scripts/lint-verdicts.sh [path/to/kernelgate]     (default: target/debug/kernelgate)
#   scripts/lint-verdicts.sh path/to/kernelgate FILE...  the verdict of each file, one line each
#                                                        (error / warn / clean, and the rules)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/debug/kernelgate}
F=tests/fixtures/lint

if (($# > 1)); then
    shift
    json=$("$BIN" lint --format json "$@" || true)
    for f in "$@"; do
        jq -r --arg f "$f" '
            [.findings[] | select(.file == $f)] as $mine
            | ([$mine[] | select(.severity == "error") | .rule] | unique) as $e
            | ([$mine[] | select(.severity == "warning") | .rule] | unique) as $w
            | (if ($e | length) > 0 then "error" elif ($w | length) > 0 then "warn" else "clean" end) as $v
            | [$f, $v, ($e | join(",")), ($w | join(","))]
            | "\(.[0])\t\(.[1])\t\(if .[2] == "" then "-" else .[2] end)\t\(if .[3] == "" then "-" else .[3] end)"
        ' <<<"$json"
    done | column -t -s $'\t' -N file,verdict,errors,warnings
    exit 0
fi

printf '%-26s %6s %7s %9s %6s\n' group files errors warn-only clean
row() {
    local group=$1
    shift
    local json
    json=$("$BIN" lint --format json "$@" || true)
    local total errors warn
    total=$#
    errors=$(jq '[.findings[] | select(.severity == "error") | .file] | unique | length' <<<"$json")
    warn=$(jq '([.findings[] | .file] | unique) - ([.findings[] | select(.severity == "error") | .file] | unique) | length' <<<"$json")
    printf '%-26s %6d %7d %9d %6d\n' "$group" "$total" "$errors" "$warn" $((total - errors - warn))
    if [[ $group == hacks* ]]; then
        for f in "$@"; do
            if ! jq -e --arg f "$f" 'any(.findings[]; .file == $f and .severity == "error")' <<<"$json" >/dev/null; then
                echo "    no error: $f"
            fi
        done
    elif [[ $group == honest* || $group == partial* || $group == unproven* ]]; then
        jq -r '[.findings[] | select(.severity == "error") | .file] | unique | .[] | "    error: " + .' <<<"$json"
    fi
}
row "honest (python)" "$F"/honest/*.py
row "honest (c++)" "$F"/cpp/honest_*.py
row "honest (triton)" "$F"/triton/honest_*.py
row "partial (warnings)" "$F"/partial/*.py "$F"/cpp/warn_*.py
row "unproven (warnings)" "$F"/unproven/*.py
row "hacks (python)" "$F"/hacks/*.py
row "hacks (c++)" "$F"/cpp/hack_*.py
row "hacks (triton)" "$F"/triton/hack_*.py

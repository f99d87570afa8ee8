"""One table from a `kernelgate pr` report: each kernel's verdict, outcome, speedup over the
reference and its error findings (runtime ones, or all with --all-rules), then the summary.

  python3 scripts/pr-table.py REPORT_JSON LOG [--all-rules] [--details]

--details adds each row's eval/ and audit/ findings (correctness against float64, attribution).

Used by the device scripts (gpu-judge-pr.sh, gpu-honest-pr.sh); LOG's tail is printed when the
report is missing."""

import json
import sys

report, log = sys.argv[1], sys.argv[2]
all_rules = "--all-rules" in sys.argv[3:]
details = "--details" in sys.argv[3:]
try:
    r = json.load(open(report))
except Exception as e:
    print("no report:", e)
    try:
        print(open(log).read()[-3000:])
    except OSError:
        pass
    sys.exit()
print("| kernel | verdict | outcome | speedup (lo-hi) | error findings | warnings |")
print("|---|---|---|---|---|---|")
for k in r["kernels"]:
    s = k.get("speedup_eager") or {}
    sp = f"{s['value']:.2f}x ({s['lo']:.2f}-{s['hi']:.2f})" if s.get("value") else "-"
    fs = k.get("findings", [])
    errors = sorted({f["rule"] for f in fs if f.get("severity") == "error" and (all_rules or not f["rule"].startswith("KG"))})
    warnings = sorted({f["rule"] for f in fs if f.get("severity") == "warning"})
    print(f"| {k['path'].split('/', 2)[-1]} | {k['verdict']} | {k['outcome']['kind']} | {sp} | {', '.join(errors) or '-'} | {', '.join(warnings) or '-'} |")
    if k["verdict"] == "fail":
        print(f"|   | reasons: {'; '.join(k.get('reasons', []))[:400]} |||||")
print("summary:", json.dumps(r.get("summary"))[:600])
if details:
    for k in r["kernels"]:
        for f in k.get("findings", []):
            if f["rule"].startswith(("eval/", "audit/")):
                print(f"  {k['path'].split('/', 2)[-1]}: {f['rule']} ({f['severity']}): {f['message'][:300]}")

//! Exports of one run's records for the dashboards repositories already use: Bencher's BMF JSON
//! (`latency`, nanoseconds, with the median's interval) and github-action-benchmark's
//! `customSmallerIsBetter` JSON (milliseconds).

use crate::record::Record;
use crate::series::hardware_label;
use serde_json::{json, Map, Value};

/// The benchmark name of a record: `level1/19_ReLU.py · kernels/x.py · NVIDIA_H200 fp32`.
pub fn benchmark_name(r: &Record) -> String {
    format!(
        "{} · {} · {}",
        r.problem,
        r.name,
        hardware_label(&r.device, r.precision)
    )
}

fn timed(records: &[Record]) -> impl Iterator<Item = (&Record, f64)> {
    records
        .iter()
        .filter(|r| r.usable())
        .filter_map(|r| r.median_ms.map(|m| (r, m)))
}

/// Bencher Metric Format: `{name: {"latency": {value, lower_value, upper_value}}}` in ns.
pub fn to_bmf(records: &[Record]) -> Value {
    let mut out = Map::new();
    for (r, ms) in timed(records) {
        let mut latency = Map::new();
        latency.insert("value".into(), json!(ms * 1e6));
        if let Some((lo, hi)) = r.ci_ms {
            latency.insert("lower_value".into(), json!(lo * 1e6));
            latency.insert("upper_value".into(), json!(hi * 1e6));
        }
        out.insert(benchmark_name(r), json!({ "latency": latency }));
    }
    Value::Object(out)
}

/// github-action-benchmark `customSmallerIsBetter`: `[{name, unit, value, range, extra}]`.
pub fn to_benchmark_action(records: &[Record]) -> Value {
    let rows: Vec<Value> = timed(records)
        .map(|(r, ms)| {
            let mut row = json!({ "name": benchmark_name(r), "unit": "ms", "value": ms });
            if let Some((lo, hi)) = r.ci_ms {
                row["range"] = json!(format!("±{:.6}", (hi - lo) / 2.0));
            }
            let mut extra = vec![format!("commit {}", crate::drift::short(&r.commit))];
            if let Some(v) = r.verdict {
                extra.push(format!("verdict {}", v.as_str()));
            }
            if let Some(s) = r.speedup_eager {
                extra.push(format!("{:.2}x vs eager", s.value));
            }
            row["extra"] = json!(extra.join("; "));
            row
        })
        .collect();
    Value::Array(rows)
}

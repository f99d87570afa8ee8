//! Exports of one run's records for the dashboards repositories already use: Bencher's BMF JSON
//! (`latency`, nanoseconds, with the median's interval, and a GPU kernel's `efficiency`, percent
//! of the device's limit) and github-action-benchmark's `customSmallerIsBetter` JSON
//! (milliseconds; efficiency in its `extra` text).

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

/// Bencher Metric Format: `{name: {"latency": {value, lower_value, upper_value}}}` in ns, and
/// `"efficiency": {value}` in percent of the limit where the record has one.
pub fn to_bmf(records: &[Record]) -> Value {
    let mut out = Map::new();
    for (r, ms) in timed(records) {
        let mut latency = Map::new();
        latency.insert("value".into(), json!(ms * 1e6));
        if let Some((lo, hi)) = r.ci_ms {
            latency.insert("lower_value".into(), json!(lo * 1e6));
            latency.insert("upper_value".into(), json!(hi * 1e6));
        }
        let mut measures = json!({ "latency": latency });
        if let Some(e) = &r.efficiency {
            measures["efficiency"] = json!({ "value": e.pct });
        }
        out.insert(benchmark_name(r), measures);
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
            if let Some(e) = &r.efficiency {
                extra.push(format!("{}: {}", e.label(), e.detail()));
            }
            row["extra"] = json!(extra.join("; "));
            row
        })
        .collect();
    Value::Array(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SeriesKind;
    use kernelgate_model::{Bound, Efficiency, Precision};

    fn record(efficiency: Option<Efficiency>) -> Record {
        Record {
            commit: "a".repeat(40),
            date: "2026-10-01T10:00:00Z".into(),
            subject: String::new(),
            device: "NVIDIA H200".into(),
            precision: Precision::Fp32,
            driver: "580".into(),
            cuda: "13.0".into(),
            torch: "2.11.0".into(),
            problem: "level1/19_ReLU.py".into(),
            kind: SeriesKind::Kernel,
            name: "kernels/relu.py".into(),
            median_ms: Some(0.05),
            ci_ms: Some((0.049, 0.051)),
            correct: true,
            verdict: None,
            custom_share: None,
            speedup_eager: None,
            efficiency,
        }
    }

    #[test]
    fn exports_carry_efficiency_where_it_is_known() {
        let e = Efficiency {
            pct: 77.2,
            bound: Bound::Memory,
            achieved: 3705.6,
            peak: 4800.0,
            precision: Precision::Fp32,
        };
        let bmf = to_bmf(&[record(Some(e))]);
        let (_, measures) = bmf.as_object().unwrap().iter().next().unwrap();
        assert_eq!(measures["efficiency"]["value"], 77.2);
        assert!((measures["latency"]["value"].as_f64().unwrap() - 50_000.0).abs() < 1e-6);
        let gab = to_benchmark_action(&[record(Some(e))]);
        let extra = gab[0]["extra"].as_str().unwrap();
        assert!(
            extra.contains("77% of memory bandwidth: 3706 GB/s of 4800 GB/s"),
            "{extra}"
        );

        let bmf = to_bmf(&[record(None)]);
        let (_, measures) = bmf.as_object().unwrap().iter().next().unwrap();
        assert!(measures.get("efficiency").is_none(), "{measures}");
        let gab = to_benchmark_action(&[record(None)]);
        assert!(!gab[0]["extra"].as_str().unwrap().contains("bandwidth"));
    }
}

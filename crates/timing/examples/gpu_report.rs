//! Tables for docs/timing.md from the raw samples `scripts/gpu-timing.sh` writes on the GPU:
//! `cargo run -p kernelgate-timing --example gpu_report -- <dir holding proof.json>`.
//! All statistics are this crate's own (the same code the gate runs).

use kernelgate_timing::{
    compare, escaped_work, median, Sample, SeriesStats, Verdict, DEFAULT_THRESHOLD_PCT,
};
use serde_json::Value;

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let path = std::path::Path::new(&dir).join("proof.json");
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    println!(
        "device {} (torch {}), L2 {} MB, flush {} MB, copy bandwidth {:.0} GB/s, idle cuCtxSynchronize {:.1} us\n",
        p["gpu"].as_str().unwrap_or("?"),
        p["torch"].as_str().unwrap_or("?"),
        p["l2_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        p["flush_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        p["bandwidth_gbs"].as_f64().unwrap_or(0.0),
        p["idle_sync_ms"].as_f64().unwrap_or(0.0) * 1e3
    );

    println!("| kernel | median of medians (ms) | CV of the median (%) | measurements | samples per measurement |");
    println!("|---|---|---|---|---|");
    if let Some(rep) = p["repeat"].as_object() {
        for (k, runs) in rep {
            let runs: Vec<Vec<f64>> = runs.as_array().unwrap().iter().map(floats).collect();
            let medians: Vec<f64> = runs.iter().map(|r| median(r)).collect();
            let st = SeriesStats::from_samples(&medians)?;
            let per = runs.iter().map(Vec::len).sum::<usize>() as f64 / runs.len() as f64;
            println!(
                "| {k} | {:.4} | {:.3} | {} | {:.0} |",
                st.median,
                st.cv_pct(),
                runs.len(),
                per
            );
        }
    }

    println!("\n| experiment | comparisons | verdict Slower | rate | other verdicts | true ratio (median) | GPU ms / comparison | wall s / comparison |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, key) in [
        ("A/A (kernel vs itself)", "aa"),
        ("injected slowdown", "detect"),
    ] {
        let Some(list) = p[key].as_array() else {
            continue;
        };
        let (mut slower, mut other, mut gpu, mut wall) = (0, 0, 0.0, 0.0);
        let mut ratios = Vec::new();
        for c in list {
            let (b, h) = (floats(&c["base"]), floats(&c["head"]));
            let cmp = compare(&b, &h, DEFAULT_THRESHOLD_PCT)?;
            match cmp.verdict {
                Verdict::Slower => slower += 1,
                Verdict::Faster => other += 1,
                Verdict::Unchanged => {}
            }
            ratios.push(cmp.ratio);
            gpu += b.iter().chain(h.iter()).sum::<f64>();
            wall += c["wall_s"].as_f64().unwrap_or(0.0);
        }
        let n = list.len().max(1) as f64;
        println!(
            "| {name} | {} | {slower} | {:.1}% | {other} | {:.4} | {:.1} | {:.2} |",
            list.len(),
            slower as f64 / n * 100.0,
            median(&ratios),
            gpu / n,
            wall / n
        );
    }
    // An exact shift on measured noise: the A/A pairs with the head series scaled.
    if let Some(list) = p["aa"].as_array() {
        for shift in [1.03, 1.05] {
            let detected = list
                .iter()
                .filter(|c| {
                    let h: Vec<f64> = floats(&c["head"]).iter().map(|x| x * shift).collect();
                    compare(&floats(&c["base"]), &h, DEFAULT_THRESHOLD_PCT)
                        .map(|c| c.verdict == Verdict::Slower)
                        .unwrap_or(false)
                })
                .count();
            println!(
                "| A/A pairs, head x{shift} (exact shift on H200 noise) | {} | {detected} | {:.1}% | 0 | {shift} | - | - |",
                list.len(),
                detected as f64 / list.len().max(1) as f64 * 100.0
            );
        }
    }
    if let Some(inj) = p["inject"].as_object() {
        println!("\ninjection calibration: {}", Value::Object(inj.clone()));
    }

    println!("\n| series | median ms | median trailing sync ms | flagged |");
    println!("|---|---|---|---|");
    if let Some(esc) = p["escape"].as_object() {
        for (name, samples) in esc {
            let s: Vec<Sample> = serde_json::from_value(samples.clone())?;
            let ms: Vec<f64> = s.iter().map(|x| x.ms).collect();
            let tr: Vec<f64> = s.iter().map(|x| x.trailing_sync_ms).collect();
            let flagged = escaped_work("k.py", &s).is_some();
            println!(
                "| {name} | {:.4} | {:.4} | {} |",
                median(&ms),
                median(&tr),
                if flagged { "yes" } else { "no" }
            );
        }
    }

    println!("\n| kernel | reference ms | candidate ms | speedup (95% CI) | verdict | wall s |");
    println!("|---|---|---|---|---|---|");
    if let Some(sp) = p["speedup"].as_object() {
        for (k, v) in sp {
            let (r, c) = (floats(&v["reference"]), floats(&v["candidate"]));
            let cmp = compare(&r, &c, DEFAULT_THRESHOLD_PCT)?;
            let (s, (lo, hi)) = cmp.speedup();
            println!(
                "| {k} | {:.4} | {:.4} | {s:.2}x ({lo:.2}-{hi:.2}) | {} | {:.2} |",
                cmp.base.median,
                cmp.head.median,
                cmp.verdict.as_str(),
                v["wall_s"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(())
}

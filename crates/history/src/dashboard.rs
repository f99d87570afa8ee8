//! The dashboard: one self-contained HTML page (no server, nothing fetched at view time) with the
//! history's data embedded as inert JSON and drawn as SVG by the page's own script.

use crate::drift::{detect_all, Drift, DriftRule};
use crate::record::{Record, SeriesKind};
use crate::series::{group, Series};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const TEMPLATE: &str = include_str!("../assets/dashboard.html");
const CSS: &str = include_str!("../assets/dashboard.css");
const JS: &str = include_str!("../assets/dashboard.js");

/// The anchor of a problem's section (one owner: the report's links use the same).
pub use kernelgate_report::problem_anchor as slug;

/// The link of a problem's section on a published dashboard.
pub fn problem_url(dashboard_url: &str, problem: &str) -> String {
    format!("{}/#{}", dashboard_url.trim_end_matches('/'), slug(problem))
}

/// Commits in history order: by commit date, ties in the order the store holds them.
fn commit_order(records: &[Record]) -> Vec<(String, String, String)> {
    let mut seen = BTreeSet::new();
    let mut commits: Vec<(usize, String, String, String)> = Vec::new();
    for r in records {
        if seen.insert(r.commit.clone()) {
            commits.push((
                commits.len(),
                r.commit.clone(),
                r.date.clone(),
                r.subject.clone(),
            ));
        }
    }
    commits.sort_by(|a, b| a.2.cmp(&b.2).then(a.0.cmp(&b.0)));
    commits.into_iter().map(|(_, s, d, m)| (s, d, m)).collect()
}

fn point(r: &Record, index: usize) -> Value {
    json!({
        "index": index,
        "sha": r.commit,
        "date": r.date,
        "median_ms": r.median_ms,
        "lo_ms": r.ci_ms.map(|c| c.0),
        "hi_ms": r.ci_ms.map(|c| c.1),
        "verdict": r.verdict.map(|v| v.as_str()),
        "correct": r.correct,
        "speedup": r.speedup_eager.map(|s| s.value),
    })
}

/// The speedup of a kernel record: its own, else the eager median of the same commit over it.
fn speedup_of(r: &Record, eager: Option<&Record>) -> Option<f64> {
    r.speedup_eager.map(|s| s.value).or_else(|| {
        let e = eager?.median_ms?;
        Some(e / r.median_ms?)
    })
}

/// The dashboard's data document (the schema `assets/dashboard.js` draws).
pub fn data(records: &[Record], repo: &str, generated_at: &str, rule: &DriftRule) -> Value {
    let commits = commit_order(records);
    let index: BTreeMap<&str, usize> = commits
        .iter()
        .enumerate()
        .map(|(i, c)| (c.0.as_str(), i))
        .collect();
    let (_, mut series) = group(records);
    for s in &mut series {
        s.points.sort_by_key(|r| index[r.commit.as_str()]);
    }
    let drifts: Vec<Drift> = detect_all(&series, rule);
    let hardware: BTreeSet<String> = series.iter().map(|s| s.key.hardware()).collect();

    let mut problems: BTreeMap<&str, Vec<&Series>> = BTreeMap::new();
    for s in &series {
        problems.entry(s.key.problem.as_str()).or_default().push(s);
    }
    let problem_docs: Vec<Value> = problems
        .iter()
        .map(|(problem, list)| {
            let series: Vec<Value> = list
                .iter()
                .map(|s| {
                    json!({
                        "name": s.key.name,
                        "kind": if s.key.kind == SeriesKind::Kernel { "kernel" } else { "reference" },
                        "hardware": s.key.hardware(),
                        "points": s.points.iter().map(|r| point(r, index[r.commit.as_str()])).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({ "problem": problem, "slug": slug(problem), "series": series })
        })
        .collect();

    // The latest record of every series at or before each commit, per hardware.
    let mut fast_p = Vec::new();
    let mut fastest = Vec::new();
    for hw in &hardware {
        let on_hw: Vec<&Series> = series.iter().filter(|s| &s.key.hardware() == hw).collect();
        let mut latest: BTreeMap<usize, Option<&Record>> = BTreeMap::new();
        let mut cursor = vec![0usize; on_hw.len()];
        for (ci, (sha, _, _)) in commits.iter().enumerate() {
            let mut any = false;
            for (si, s) in on_hw.iter().enumerate() {
                while cursor[si] < s.points.len()
                    && index[s.points[cursor[si]].commit.as_str()] <= ci
                {
                    latest.insert(si, Some(&s.points[cursor[si]]));
                    cursor[si] += 1;
                    any = true;
                }
            }
            let best = best_per_problem(&on_hw, &latest);
            if any && !best.is_empty() {
                let n = best.len() as f64;
                let correct = best.values().filter(|b| b.is_some()).count() as f64;
                let fast1 = best
                    .values()
                    .filter(|b| b.is_some_and(|(_, s)| s.is_some_and(|s| s > 1.0)))
                    .count() as f64;
                fast_p.push(json!({
                    "index": ci, "sha": sha, "hardware": hw, "problems": best.len(),
                    "fast_0": correct / n, "fast_1": fast1 / n,
                }));
            }
            if ci + 1 == commits.len() {
                for (problem, b) in &best {
                    if let Some((r, speedup)) = b {
                        fastest.push(json!({
                            "problem": problem, "hardware": hw, "kernel": r.name,
                            "median_ms": r.median_ms, "lo_ms": r.ci_ms.map(|c| c.0),
                            "hi_ms": r.ci_ms.map(|c| c.1), "speedup": speedup, "sha": r.commit,
                        }));
                    }
                }
            }
        }
    }

    json!({
        "repo": repo,
        "generated_at": generated_at,
        "commits": commits.iter().enumerate().map(|(i, (sha, date, subject))| json!({
            "sha": sha, "date": date, "index": i, "subject": subject,
        })).collect::<Vec<_>>(),
        "hardware": hardware,
        "problems": problem_docs,
        "drift": drifts.iter().map(|d| json!({
            "problem": d.key.problem, "series": d.key.name, "hardware": d.hardware,
            "index": index.get(d.commit.as_str()), "sha": d.commit, "change_pct": d.change_pct,
            "before_ms": d.before_ms, "after_ms": d.after_ms,
        })).collect::<Vec<_>>(),
        "fastest": fastest,
        "fast_p": fast_p,
    })
}

type Best<'a> = BTreeMap<&'a str, Option<(&'a Record, Option<f64>)>>;

/// Per problem with a kernel series: the fastest correct kernel among the latest records (and its
/// speedup), or `None` when no kernel of the problem is correct.
fn best_per_problem<'a>(
    on_hw: &[&'a Series],
    latest: &BTreeMap<usize, Option<&'a Record>>,
) -> Best<'a> {
    let mut best: Best<'a> = BTreeMap::new();
    for (si, s) in on_hw.iter().enumerate() {
        let Some(Some(r)) = latest.get(&si) else {
            continue;
        };
        if s.key.kind != SeriesKind::Kernel {
            continue;
        }
        let slot = best.entry(s.key.problem.as_str()).or_insert(None);
        if !r.usable() {
            continue;
        }
        let eager = on_hw.iter().enumerate().find_map(|(ei, e)| {
            (e.key.kind == SeriesKind::Eager && e.key.problem == s.key.problem)
                .then(|| latest.get(&ei).copied().flatten())
                .flatten()
        });
        let speedup = speedup_of(r, eager);
        let faster = match slot {
            Some((b, _)) => r.median_ms < b.median_ms,
            None => true,
        };
        if faster {
            *slot = Some((r, speedup));
        }
    }
    best
}

/// The page: the template with the styles, the script and the data inlined. The data is JSON in
/// a non-executed script element with `<`, `>` and `&` escaped, so no text from a pull request
/// (kernel paths, commit subjects) can close the element or become markup.
pub fn render(data: &Value) -> String {
    let json = serde_json::to_string(data)
        .expect("the dashboard's data serialises")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut out = String::with_capacity(TEMPLATE.len() + CSS.len() + JS.len() + json.len());
    let mut rest = TEMPLATE;
    // Substitute in the template only: a placeholder inside inlined content stays text.
    while let Some(at) = rest.find("/*KG_") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (with, len) = if tail.starts_with("/*KG_DATA*/") {
            (json.as_str(), "/*KG_DATA*/".len())
        } else if tail.starts_with("/*KG_CSS*/") {
            (CSS, "/*KG_CSS*/".len())
        } else if tail.starts_with("/*KG_JS*/") {
            (JS, "/*KG_JS*/".len())
        } else {
            ("/*KG_", "/*KG_".len())
        };
        out.push_str(with);
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

/// Writes `index.html` (and `data.json`, the same data for other tools) into `out`.
pub fn write(data: &Value, out: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let page = out.join("index.html");
    std::fs::write(&page, render(data))?;
    std::fs::write(
        out.join("data.json"),
        serde_json::to_string_pretty(data).expect("the dashboard's data serialises"),
    )?;
    // GitHub Pages: serve the files as they are.
    std::fs::write(out.join(".nojekyll"), "")?;
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_anchor_safe() {
        assert_eq!(slug("level1/19_ReLU.py"), "level1-19_ReLU");
        assert_eq!(slug("level2/1 a<b>.py"), "level2-1_a_b_");
    }

    #[test]
    fn pull_request_text_cannot_close_the_data_element() {
        let page = render(&json!({ "repo": "</script><script>alert(1)</script>/*KG_JS*/" }));
        assert!(!page.contains("</script><script>alert(1)"));
        assert!(page.contains("\\u003c/script\\u003e"));
        // The placeholder inside the data is not replaced by the script.
        assert!(page.contains("\\u003c/script\\u003e/*KG_JS*/"));
    }
}

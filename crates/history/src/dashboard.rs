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

/// Where the page is published from: what the header names, where commits link to, and the
/// regression threshold drawn as a band.
#[derive(Debug, Clone, Default)]
pub struct PageInfo {
    /// `owner/name` shown in the header.
    pub repo: String,
    /// The repository's web address (`https://github.com/owner/name`); points link to
    /// `<repo_url>/commit/<sha>`. `None`: no links.
    pub repo_url: Option<String>,
    /// The policy's regression threshold in percent (`[timing] threshold_pct`), drawn as a band
    /// around each kernel's previous commit.
    pub threshold_pct: f64,
    /// RFC 3339.
    pub generated_at: String,
}

/// A commit's page under `repo_url` (GitHub's layout, which Gitea and GitLab also serve).
pub fn commit_url(repo_url: &str, sha: &str) -> String {
    format!("{}/commit/{sha}", repo_url.trim_end_matches('/'))
}

/// The pull request a commit on the default branch came from, as GitHub writes it into the
/// subject: a merge commit's `Merge pull request #12 from ...`, a squash's `... (#12)`.
pub fn pull_request_of(subject: &str) -> Option<u64> {
    let number = |s: &str| s.parse::<u64>().ok().filter(|n| *n > 0);
    if let Some(rest) = subject.strip_prefix("Merge pull request #") {
        return number(rest.split(' ').next()?);
    }
    let inner = subject.trim_end().strip_suffix(')')?;
    let (_, n) = inner.rsplit_once("(#")?;
    number(n)
}

/// A pull request's page under `repo_url`.
pub fn pull_request_url(repo_url: &str, number: u64) -> String {
    format!("{}/pull/{number}", repo_url.trim_end_matches('/'))
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
        "efficiency": r.efficiency.as_ref().map(efficiency),
    })
}

/// A record's efficiency with the words the comment uses for it (one owner of the wording).
fn efficiency(e: &kernelgate_model::Efficiency) -> Value {
    json!({ "pct": e.pct, "bound": e.bound, "label": e.label(), "detail": e.detail() })
}

/// The speedup of a kernel record: its own, else the eager median of the same commit over it.
fn speedup_of(r: &Record, eager: Option<&Record>) -> Option<f64> {
    r.speedup_eager.map(|s| s.value).or_else(|| {
        let e = eager?.median_ms?;
        Some(e / r.median_ms?)
    })
}

/// The dashboard's data document (the schema `assets/dashboard.js` draws).
pub fn data(records: &[Record], page: &PageInfo, rule: &DriftRule) -> Value {
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
                            "efficiency": r.efficiency.as_ref().map(efficiency),
                        }));
                    }
                }
            }
        }
    }

    json!({
        "repo": page.repo,
        "repo_url": page.repo_url,
        "threshold_pct": page.threshold_pct,
        "generated_at": page.generated_at,
        "commits": commits.iter().enumerate().map(|(i, (sha, date, subject))| {
            let pr = pull_request_of(subject);
            json!({
                "sha": sha, "date": date, "index": i, "subject": subject,
                "url": page.repo_url.as_deref().map(|u| commit_url(u, sha)),
                "pull_request": pr,
                "pull_request_url": page.repo_url.as_deref().zip(pr).map(|(u, n)| pull_request_url(u, n)),
            })
        }).collect::<Vec<_>>(),
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

    use crate::record::SeriesKind;
    use kernelgate_model::{Bound, Efficiency, Precision};

    fn record(i: usize, device: &str, efficiency: Option<Efficiency>) -> Record {
        Record {
            commit: format!("{i:040x}"),
            date: format!("2026-10-{:02}T10:00:00Z", i + 1),
            subject: format!("commit {i}"),
            device: device.into(),
            precision: Precision::Fp32,
            driver: String::new(),
            cuda: String::new(),
            torch: "2.11.0".into(),
            problem: "level1/19_ReLU.py".into(),
            kind: SeriesKind::Kernel,
            name: "kernels/relu.py".into(),
            median_ms: Some(0.05),
            ci_ms: None,
            correct: true,
            verdict: None,
            custom_share: None,
            speedup_eager: None,
            efficiency,
        }
    }

    fn page(repo_url: Option<&str>) -> PageInfo {
        PageInfo {
            repo: "acme/kernels".into(),
            repo_url: repo_url.map(String::from),
            threshold_pct: 2.0,
            generated_at: "2026-10-10T00:00:00Z".into(),
        }
    }

    #[test]
    fn the_data_links_commits_carries_the_threshold_and_efficiency_per_device() {
        let e = Efficiency {
            pct: 77.2,
            bound: Bound::Memory,
            achieved: 3705.6,
            peak: 4800.0,
            precision: Precision::Fp32,
        };
        let records = vec![
            record(0, "NVIDIA H200", Some(e)),
            record(0, "AMD EPYC", None),
            record(1, "NVIDIA H200", Some(e)),
        ];
        let d = data(
            &records,
            &page(Some("https://github.com/acme/kernels/")),
            &DriftRule::default(),
        );
        assert_eq!(d["threshold_pct"], 2.0);
        assert_eq!(d["commits"][1]["date"], "2026-10-02T10:00:00Z");
        assert_eq!(
            d["commits"][1]["url"],
            format!("https://github.com/acme/kernels/commit/{:040x}", 1)
        );
        // One series per device, each with its own hardware label.
        let series = d["problems"][0]["series"].as_array().unwrap();
        let hardware: Vec<&str> = series
            .iter()
            .map(|s| s["hardware"].as_str().unwrap())
            .collect();
        assert_eq!(hardware, ["AMD_EPYC fp32", "NVIDIA_H200 fp32"]);
        let gpu = &series[1]["points"][0]["efficiency"];
        assert_eq!(gpu["pct"], 77.2);
        assert_eq!(gpu["label"], "77% of memory bandwidth");
        assert_eq!(gpu["detail"], "3706 GB/s of 4800 GB/s (memory-bound)");
        assert!(series[0]["points"][0]["efficiency"].is_null());
        let fastest = d["fastest"].as_array().unwrap();
        assert!(fastest
            .iter()
            .any(|f| f["hardware"] == "NVIDIA_H200 fp32" && f["efficiency"]["pct"] == 77.2));

        // Without a repository address there are no links.
        let d = data(&records, &page(None), &DriftRule::default());
        assert!(d["repo_url"].is_null());
        assert!(d["commits"][0]["url"].is_null());
    }

    #[test]
    fn a_commit_names_the_pull_request_github_merged_it_from() {
        assert_eq!(pull_request_of("Faster softmax (#42)"), Some(42));
        assert_eq!(pull_request_of("Faster softmax (#42) "), Some(42));
        assert_eq!(
            pull_request_of("Merge pull request #7 from acme/relu"),
            Some(7)
        );
        for plain in [
            "Faster softmax",
            "see (#42) for why",
            "Faster softmax (#)",
            "Faster softmax (#0)",
            "Faster softmax (#4x)",
            "Merge pull request #x from acme/relu",
            "Merge branch 'main'",
        ] {
            assert_eq!(pull_request_of(plain), None, "{plain}");
        }
        let mut records = vec![
            record(0, "NVIDIA H200", None),
            record(1, "NVIDIA H200", None),
        ];
        records[1].subject = "Faster ReLU (#12)".into();
        let d = data(
            &records,
            &page(Some("https://github.com/acme/kernels")),
            &DriftRule::default(),
        );
        assert!(d["commits"][0]["pull_request"].is_null());
        assert_eq!(d["commits"][1]["pull_request"], 12);
        assert_eq!(
            d["commits"][1]["pull_request_url"],
            "https://github.com/acme/kernels/pull/12"
        );
        let d = data(&records, &page(None), &DriftRule::default());
        assert_eq!(d["commits"][1]["pull_request"], 12);
        assert!(d["commits"][1]["pull_request_url"].is_null());
    }

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

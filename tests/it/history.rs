//! The performance history end to end: a real CPU `kernelgate pr` run in a real git repository,
//! 50 more commits on main, each recorded with `kernelgate history append`; drift found at the
//! right commit (and not in an A/A history); `history` listings; exports; and the dashboard in a
//! real headless Chromium.
//!
//! The 50 records derive from the real run's report: its structure, hardware and intervals are
//! the real ones; the times are the real medians times a seeded noise of 1% (the noise of a GPU
//! series on a quiet runner) and, from the planted commit on, a 10% step. CPU times on a shared
//! 2-core machine move by more than 10% between runs, so a real step could not be planted.

use crate::common::{git, kernelgate_in, root, write};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KERNEL: &str = r#"import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "contiguous float32 expected");
    torch::Tensor out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

kg_history_ops = load_inline(
    name="kg_history_test_ops",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kg_history_ops.relu_forward(x)
"#;

// `threshold_pct = 3` (not the default 2): the dashboard's band must come from the config.
const CONFIG: &str = "[harness]\ntrials = 2\n\n[timing]\nthreshold_pct = 3.0\nbudget_s = 0.5\nwarmup = 2\nmin_samples = 15\nmax_samples = 40\n";

const KERNEL_PATH: &str = "kernels/level1/3_ReLU/cpp.py";
const COMMITS: usize = 50;
const STEP_AT: usize = 30;

fn kernelgate(repo: &Path, args: &[&str]) -> Output {
    kernelgate_in(repo)
        .args(args)
        .output()
        .expect("kernelgate runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A repository with the ReLU problem (16 x 4096) and a kernel, and the real CPU report of the
/// pull request that added the kernel.
fn repo_with_a_real_run() -> (tempfile::TempDir, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    // The dashboard links commits through the origin remote's web address.
    git(
        d,
        &["remote", "add", "origin", "git@github.com:acme/kernels.git"],
    );
    let src = std::fs::read_to_string(root().join("KernelBench/level1/3_ReLU.py")).unwrap();
    assert!(
        src.contains("batch_size = 4096"),
        "the bundled ReLU's size changed"
    );
    write(
        d,
        "KernelBench/level1/3_ReLU.py",
        &src.replace("batch_size = 4096", "batch_size = 16"),
    );
    write(d, "kernelgate.toml", CONFIG);
    git(d, &["add", "-A"]);
    let base = commit(d, "the problem", "2026-09-29T10:00:00Z");
    write(d, KERNEL_PATH, KERNEL);
    git(d, &["add", "-A"]);
    let head = commit(d, "a ReLU kernel", "2026-09-30T10:00:00Z");
    let out = tempfile::tempdir().unwrap();
    let run = kernelgate(
        d,
        &[
            "pr",
            "--base",
            &base,
            "--head",
            &head,
            "--device",
            "cpu",
            "--out",
            out.path().to_str().unwrap(),
            "--ack-label",
            "kernelgate:ack-speedup",
        ],
    );
    assert!(matches!(run.status.code(), Some(0 | 1)), "{:?}", run);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    (dir, report, head)
}

/// Commits what is staged with `date` as its author and committer date; returns its id.
fn commit(repo: &Path, message: &str, date: &str) -> String {
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false", "commit", "-q", "-m", message])
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_DATE", date)
        .env("GIT_AUTHOR_DATE", date)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    git(repo, &["rev-parse", "HEAD"])
}

/// A seeded standard normal (Box-Muller over SplitMix64).
struct Noise(u64);
impl Noise {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform().max(1e-12), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

fn scale(v: &mut Value, key: &str, f: f64) {
    match &mut v[key] {
        Value::Number(n) => v[key] = (n.as_f64().unwrap() * f).into(),
        Value::Array(a) => {
            for x in a.iter_mut() {
                *x = (x.as_f64().unwrap() * f).into();
            }
        }
        _ => {}
    }
}

/// `COMMITS` commits on main after the real run, each recorded in `store` from the real report
/// with its times moved by noise and, when `step`, by +10% from commit `STEP_AT` on. Returns the
/// commit ids, oldest first.
fn grow_history(repo: &Path, report: &Value, store: &Path, seed: u64, step: bool) -> Vec<String> {
    let mut noise = Noise(seed);
    let reports = tempfile::tempdir().unwrap();
    let mut shas = Vec::new();
    for i in 0..COMMITS {
        write(
            repo,
            KERNEL_PATH,
            &format!("{KERNEL}\n# revision {seed} {i}\n"),
        );
        git(repo, &["add", "-A"]);
        let date = format!("2026-10-{:02}T{:02}:00:00Z", 1 + i / 2, 10 + i % 2);
        // Squash-merged pull requests, as GitHub writes their subjects.
        let sha = commit(
            repo,
            &format!("revision {i} <b>not markup</b> (#{})", 100 + i),
            &date,
        );
        let mut r = report.clone();
        r["run"]["head_sha"] = sha.clone().into();
        for row in r["kernels"].as_array_mut().unwrap() {
            let k = (1.0 + 0.01 * noise.normal()) * if step && i >= STEP_AT { 1.10 } else { 1.0 };
            let e = 1.0 + 0.01 * noise.normal();
            scale(row, "time_ms", k);
            scale(row, "time_ci_ms", k);
            scale(row, "reference_ms", e);
            scale(row, "reference_ci_ms", e);
        }
        let path = reports.path().join(format!("report-{i}.json"));
        std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
        ok(&kernelgate(
            repo,
            &[
                "history",
                "append",
                "--report",
                path.to_str().unwrap(),
                "--commit",
                &sha,
                "--store",
                store.to_str().unwrap(),
            ],
        ));
        shas.push(sha);
    }
    shas
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KERNELGATE_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
    .find(|p| p.is_file())
}

fn browser(page: &Path, args: &[&str]) -> Output {
    let chromium = chromium().unwrap_or_else(|| {
        panic!(
            "the dashboard test needs a headless Chromium: `apt-get install chromium` \
             (`bash scripts/test.sh` installs it), or point KERNELGATE_CHROMIUM at one"
        )
    });
    let profile = tempfile::tempdir().unwrap();
    Command::new(chromium)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs")
}

/// The attributes of every `<tag ...>` in `dom` whose class list holds `class`.
fn elements(dom: &str, tag: &str, class: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find(&open) {
        let body = &rest[at + open.len()..];
        let end = body.find('>').unwrap();
        let mut attrs = std::collections::BTreeMap::new();
        let mut a = &body[..end];
        while let Some(eq) = a.find("=\"") {
            let name = a[..eq].trim().to_string();
            let value_end = a[eq + 2..].find('"').unwrap();
            attrs.insert(name, a[eq + 2..eq + 2 + value_end].replace("&amp;", "&"));
            a = &a[eq + 2 + value_end + 1..];
        }
        if attrs
            .get("class")
            .is_some_and(|c| c.split(' ').any(|c| c == class))
        {
            out.push(attrs);
        }
        rest = &body[end..];
    }
    out
}

/// Records the same run on `NVIDIA H200` at the last `n` commits, with an efficiency on its
/// kernel row: a second device's series.
fn add_gpu_series(repo: &Path, report: &Value, store: &Path, shas: &[String], n: usize) {
    let reports = tempfile::tempdir().unwrap();
    for (i, sha) in shas[shas.len() - n..].iter().enumerate() {
        let mut r = report.clone();
        r["run"]["hardware"]["gpu"] = "NVIDIA H200".into();
        for row in r["kernels"].as_array_mut().unwrap() {
            row["device"] = "NVIDIA H200".into();
            scale(row, "time_ms", 0.01);
            scale(row, "time_ci_ms", 0.01);
            scale(row, "reference_ms", 0.01);
            scale(row, "reference_ci_ms", 0.01);
            row["efficiency"] = serde_json::json!({
                "pct": 77.2, "bound": "memory", "achieved": 3705.6, "peak": 4800.0,
                "precision": "fp32"
            });
        }
        let path = reports.path().join(format!("gpu-{i}.json"));
        std::fs::write(&path, r.to_string()).unwrap();
        ok(&kernelgate(
            repo,
            &[
                "history",
                "append",
                "--report",
                path.to_str().unwrap(),
                "--commit",
                sha,
                "--store",
                store.to_str().unwrap(),
            ],
        ));
    }
}

fn attr(dom: &str, name: &str) -> String {
    let at = dom
        .find(&format!("{name}=\""))
        .unwrap_or_else(|| panic!("no {name} in the DOM"));
    let rest = &dom[at + name.len() + 2..];
    rest[..rest.find('"').unwrap()].to_string()
}

#[test]
fn fifty_commits_of_history_drive_listing_drift_exports_and_the_dashboard() {
    let (dir, report, first) = repo_with_a_real_run();
    let repo = dir.path();
    let row = &report["kernels"][0];
    assert_eq!(row["path"], KERNEL_PATH);
    assert_eq!(row["outcome"]["kind"], "correct", "{row:#}");
    let ci = row["time_ci_ms"]
        .as_array()
        .expect("the run reports the median's interval");
    assert!(ci[0].as_f64().unwrap() <= row["time_ms"].as_f64().unwrap());
    assert!(row["reference_ci_ms"].is_array(), "{row:#}");
    assert!(row["device"].is_string(), "{row:#}");

    // The real run itself, recorded at its own commit.
    let stores = tempfile::tempdir().unwrap();
    let store = stores.path().join("step");
    let s = store.to_str().unwrap();
    let rp = stores.path().join("report.json");
    std::fs::write(&rp, report.to_string()).unwrap();
    let out = ok(&kernelgate(
        repo,
        &[
            "history",
            "append",
            "--report",
            rp.to_str().unwrap(),
            "--store",
            s,
        ],
    ));
    assert!(out.contains("recorded 2 series"), "{out}");
    let shas = grow_history(repo, &report, &store, 7, true);

    // One file per hardware key, one line per series and commit.
    let files: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let lines = std::fs::read_to_string(&files[0]).unwrap().lines().count();
    assert_eq!(lines, 2 * (COMMITS + 1));
    // Re-recording a commit replaces its records.
    ok(&kernelgate(
        repo,
        &[
            "history",
            "append",
            "--report",
            rp.to_str().unwrap(),
            "--commit",
            &first,
            "--store",
            s,
        ],
    ));
    assert_eq!(
        std::fs::read_to_string(&files[0]).unwrap().lines().count(),
        lines
    );

    // Listing: JSON, filtered by kernel and date.
    let json: Value = serde_json::from_str(&ok(&kernelgate(
        repo,
        &[
            "history",
            "--store",
            s,
            "--kernel",
            "3_ReLU/cpp",
            "--since",
            "2026-10-20",
            "--format",
            "json",
        ],
    )))
    .unwrap();
    let listed = json.as_array().unwrap();
    assert!(listed
        .iter()
        .all(|r| r["name"] == KERNEL_PATH && r["date"].as_str().unwrap() >= "2026-10-20"));
    assert_eq!(listed.len(), COMMITS - 38, "commits from 2026-10-20 on");
    let human = ok(&kernelgate(
        repo,
        &["history", "--store", s, "--problem", "3_ReLU"],
    ));
    assert!(human.contains(&format!("`{KERNEL_PATH}` on")), "{human}");
    assert!(human.contains(&shas[STEP_AT][..7]), "{human}");

    // Drift: the planted step, at its commit, and nothing else (the reference did not move).
    let drift = kernelgate(
        repo,
        &["history", "drift", "--store", s, "--format", "json"],
    );
    assert_eq!(
        drift.status.code(),
        Some(1),
        "a slower kernel fails the drift check"
    );
    let drifts: Value = serde_json::from_slice(&drift.stdout).unwrap();
    let drifts = drifts.as_array().unwrap();
    assert_eq!(drifts.len(), 1, "{drifts:#?}");
    assert_eq!(drifts[0]["key"]["name"], KERNEL_PATH);
    assert_eq!(
        drifts[0]["commit"], shas[STEP_AT],
        "the first commit after the step"
    );
    let change = drifts[0]["change_pct"].as_f64().unwrap();
    assert!((7.0..13.0).contains(&change), "{change}");

    // A/A: the same history without the step raises nothing.
    let aa = stores.path().join("aa");
    grow_history(repo, &report, &aa, 11, false);
    let quiet = kernelgate(repo, &["history", "drift", "--store", aa.to_str().unwrap()]);
    assert_eq!(quiet.status.code(), Some(0), "{quiet:?}");
    assert!(String::from_utf8_lossy(&quiet.stdout).contains("no drift in 2 series"));

    // Exports of the newest commit.
    let bmf: Value = serde_json::from_str(&ok(&kernelgate(
        repo,
        &["history", "export", "--to", "bmf", "--store", s],
    )))
    .unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "patternProperties": {".+": {"type": "object", "patternProperties": {".+": {
            "type": "object",
            "properties": {"value": {"type": "number"}, "lower_value": {"type": "number"}, "upper_value": {"type": "number"}},
            "required": ["value"]}}}}
    });
    assert!(jsonschema::is_valid(&schema, &bmf), "{bmf:#}");
    let (name, measures) = bmf
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.contains(KERNEL_PATH))
        .unwrap();
    let ns = measures["latency"]["value"].as_f64().unwrap();
    let newest: Vec<&Value> = listed
        .iter()
        .filter(|r| r["commit"] == shas[COMMITS - 1])
        .collect();
    assert!(
        (ns - newest[0]["median_ms"].as_f64().unwrap() * 1e6).abs() < 1e-6 * ns,
        "{name}"
    );
    assert!(measures["latency"]["lower_value"].as_f64().unwrap() <= ns);
    let gab: Value = serde_json::from_str(&ok(&kernelgate(
        repo,
        &[
            "history",
            "export",
            "--to",
            "benchmark-action",
            "--store",
            s,
        ],
    )))
    .unwrap();
    let gab = gab.as_array().unwrap();
    assert_eq!(gab.len(), 2);
    assert!(gab
        .iter()
        .all(|b| b["unit"] == "ms" && b["value"].as_f64().unwrap() > 0.0 && b["name"].is_string()));

    // The dashboard, rendered by a real browser, with a second device's series.
    const GPU_COMMITS: usize = 10;
    add_gpu_series(repo, &report, &store, &shas, GPU_COMMITS);
    let site = stores.path().join("site");
    let out = ok(&kernelgate(
        repo,
        &[
            "dashboard",
            "--store",
            s,
            "--out",
            site.to_str().unwrap(),
            "--name",
            "owner/<b>repo</b>",
        ],
    ));
    assert!(out.contains("1 problem(s) over 51 commit(s)"), "{out}");
    let page = site.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<b>not markup</b>") && !html.contains("<b>repo</b>"),
        "untrusted text is escaped"
    );
    let dom = browser(&page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout).to_string();
    assert_eq!(
        attr(&dom, "data-kg-rendered"),
        "ok",
        "{}",
        &dom[..dom.len().min(2000)]
    );
    assert_eq!(attr(&dom, "data-kg-plots"), "1");
    assert_eq!(
        attr(&dom, "data-kg-points"),
        (2 * (COMMITS + 1) + 2 * GPU_COMMITS).to_string()
    );
    assert!(
        dom.contains("class=\"kg-drift\""),
        "the drift is marked on the plot"
    );
    assert!(dom.contains("id=\"level1-3_ReLU\""), "the problem's anchor");
    assert!(!dom.contains("<b>not markup</b>") && dom.contains("&lt;b&gt;repo&lt;/b&gt;"));

    // The commit axis is labelled with the commits' dates: the first commit's day, then days
    // in order, each the date of a commit.
    let mut days: Vec<String> = std::iter::once(&first)
        .chain(&shas)
        .map(|sha| {
            let date = git(repo, &["show", "-s", "--format=%cI", sha]);
            date[..10].to_string()
        })
        .collect();
    days.dedup();
    let ticks: Vec<String> = elements(&dom, "text", "kg-date-label")
        .into_iter()
        .map(|t| t["data-date"].clone())
        .collect();
    assert!(ticks.len() >= 5, "{ticks:?}");
    assert_eq!(ticks[0], "2026-09-30", "{ticks:?}");
    assert!(ticks.iter().all(|t| days.contains(t)), "{ticks:?} {days:?}");
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
    assert!(
        elements(&dom, "text", "kg-sha-label").is_empty(),
        "dates, not commit ids"
    );

    // Every point links to its commit on the origin remote's GitHub page.
    let links: Vec<String> = elements(&dom, "a", "kg-commit-link")
        .into_iter()
        .map(|a| a["href"].clone())
        .collect();
    let url = |sha: &str| format!("https://github.com/acme/kernels/commit/{sha}");
    assert!(
        links.len() >= 2 * (COMMITS + 1) + 2 * GPU_COMMITS,
        "{}",
        links.len()
    );
    assert!(links.iter().all(|l| std::iter::once(&first)
        .chain(&shas)
        .any(|sha| *l == url(sha))));
    assert_eq!(
        links.iter().filter(|l| **l == url(&shas[STEP_AT])).count(),
        3,
        "the kernel's and the reference's points at the step, and the drift alert's commit"
    );

    // The drift alert's commit names its pull request, linked to its page.
    let prs: Vec<String> = elements(&dom, "a", "kg-pr-link")
        .into_iter()
        .map(|a| a["href"].clone())
        .collect();
    assert!(
        prs.contains(&format!(
            "https://github.com/acme/kernels/pull/{}",
            100 + STEP_AT
        )),
        "{prs:?}"
    );
    assert!(prs
        .iter()
        .all(|l| l.starts_with("https://github.com/acme/kernels/pull/1")));

    // The threshold band: the config's 3%, around each commit's predecessor, for the kernels.
    let bands = elements(&dom, "path", "kg-threshold-band");
    assert_eq!(bands.len(), 2, "one per kernel series: {bands:?}");
    assert!(
        bands.iter().all(|b| b["data-threshold-pct"] == "3"),
        "{bands:?}"
    );
    let steps: Vec<&str> = bands.iter().map(|b| b["data-steps"].as_str()).collect();
    assert!(steps.contains(&"50") && steps.contains(&"9"), "{steps:?}");
    // The planted 10% step is beyond it, at its commit (index 0 is the first real run).
    let points = elements(&dom, "path", "kg-point");
    let beyond: Vec<&str> = points
        .iter()
        .filter(|p| {
            p.get("data-beyond-threshold")
                .is_some_and(|b| b == "slower")
        })
        .map(|p| p["data-index"].as_str())
        .collect();
    assert!(
        beyond.contains(&(STEP_AT + 1).to_string().as_str()),
        "{beyond:?}"
    );
    assert!(
        beyond.len() < COMMITS / 4,
        "1% noise stays inside 3%: {beyond:?}"
    );

    // Per-device series: one panel per hardware, the GPU's points with their efficiency.
    let panels: Vec<String> = elements(&dom, "text", "kg-panel-title")
        .into_iter()
        .map(|t| t["data-hardware"].clone())
        .collect();
    assert_eq!(panels.len(), 2, "{panels:?}");
    assert!(panels.iter().any(|p| p == "NVIDIA_H200 fp32"), "{panels:?}");
    let efficient = points
        .iter()
        .filter(|p| p.get("data-efficiency-pct").is_some_and(|e| e == "77.2"))
        .count();
    assert_eq!(efficient, GPU_COMMITS, "the GPU kernel's points");
    assert!(dom.contains("efficiency: 77% of memory bandwidth"));
    assert!(dom.contains("3706 GB/s of 4800 GB/s (memory-bound)"));
    let cells = elements(&dom, "td", "kg-efficiency");
    assert_eq!(cells.len(), 2, "the fastest table's column: {cells:?}");

    // fast_1 never moved in this history (the speedup is the run's): one line per hardware,
    // not a flat chart.
    assert_eq!(elements(&dom, "p", "kg-fastp-flat").len(), 2);
    assert!(elements(&dom, "svg", "kg-fastp").is_empty());

    // The screenshot: a page of the expected size with a plot drawn on it (not blank).
    let shot = root().join("target/history-dashboard.png");
    let run = browser(
        &page,
        &[
            "--window-size=1280,1600",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    assert!(shot.is_file(), "{run:?}");
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (1280, 1600));
    assert!(
        png.len() > 60_000,
        "a blank page compresses to a few KB: {} bytes",
        png.len()
    );
}

#[test]
fn committed_baseline_files_become_records_with_speedups() {
    let repo = root();
    let store = tempfile::tempdir().unwrap();
    // results/timing/ itself: every hardware directory below it.
    let dir = repo.join("results/timing");
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let out = ok(&kernelgate(
        &repo,
        &[
            "history",
            "append",
            "--baselines",
            dir.to_str().unwrap(),
            "--commit",
            &head,
            "--store",
            store.path().to_str().unwrap(),
        ],
    ));
    assert!(out.contains("recorded"), "{out}");
    let all: Value = serde_json::from_str(&ok(&kernelgate(
        &repo,
        &[
            "history",
            "--store",
            store.path().to_str().unwrap(),
            "--format",
            "json",
        ],
    )))
    .unwrap();
    let all = all.as_array().unwrap();
    let eager = all.iter().filter(|r| r["kind"] == "eager").count();
    assert!(eager > 0);
    let kernels: Vec<&Value> = all.iter().filter(|r| r["kind"] == "kernel").collect();
    assert!(!kernels.is_empty());
    for k in &kernels {
        assert_eq!(k["correct"], true, "accepted kernels are correct");
        let ci = k["ci_ms"].as_array().unwrap();
        assert!(
            ci[0].as_f64() <= k["median_ms"].as_f64() && k["median_ms"].as_f64() <= ci[1].as_f64()
        );
    }
    let h200 = kernels
        .iter()
        .find(|k| k["device"] == "NVIDIA H200" && k["speedup_eager"].is_object());
    let h200 = h200.expect("an H200 kernel with its eager reference");
    let s = &h200["speedup_eager"];
    assert!(s["lo"].as_f64() <= s["value"].as_f64() && s["value"].as_f64() <= s["hi"].as_f64());
}

#[test]
fn a_broken_store_line_is_named_with_its_file_and_line() {
    let store = tempfile::tempdir().unwrap();
    std::fs::write(store.path().join("X-fp32.jsonl"), "{\"commit\": 1}\n").unwrap();
    let out = kernelgate(
        &root(),
        &["history", "--store", store.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("X-fp32.jsonl") && err.contains("line 1") && err.contains("help:"),
        "{err}"
    );
}

#[test]
fn a_pull_request_says_when_its_base_is_already_slower_than_mains_history() {
    let (dir, report, _) = repo_with_a_real_run();
    let repo = dir.path();
    write(
        repo,
        "kernelgate.toml",
        &format!("{CONFIG}\n[history]\ndashboard_url = \"https://acme.github.io/kernels/\"\n"),
    );
    git(repo, &["add", "-A"]);
    commit(repo, "the dashboard", "2026-10-01T10:00:00Z");
    // main's history (the default store, .kernelgate/history): the kernel at a quarter of the
    // time it takes now, so the base of the next pull request is far slower than its history.
    let mut fast = report.clone();
    for row in fast["kernels"].as_array_mut().unwrap() {
        scale(row, "time_ms", 0.25);
        scale(row, "time_ci_ms", 0.25);
    }
    let reports = tempfile::tempdir().unwrap();
    let path = reports.path().join("fast.json");
    std::fs::write(&path, fast.to_string()).unwrap();
    let mut base = String::new();
    for i in 0..5 {
        write(repo, "notes.txt", &format!("{i}\n"));
        git(repo, &["add", "-A"]);
        base = commit(
            repo,
            &format!("note {i}"),
            &format!("2026-10-0{}T10:00:00Z", i + 2),
        );
        ok(&kernelgate(
            repo,
            &[
                "history",
                "append",
                "--report",
                path.to_str().unwrap(),
                "--commit",
                &base,
            ],
        ));
    }
    write(repo, KERNEL_PATH, &format!("{KERNEL}\n# an edit\n"));
    git(repo, &["add", "-A"]);
    let head = commit(repo, "edit the kernel", "2026-10-08T10:00:00Z");
    let out = tempfile::tempdir().unwrap();
    let run = kernelgate(
        repo,
        &[
            "pr",
            "--base",
            &base,
            "--head",
            &head,
            "--device",
            "cpu",
            "--out",
            out.path().to_str().unwrap(),
            "--ack-label",
            "kernelgate:ack-speedup",
        ],
    );
    assert!(matches!(run.status.code(), Some(0 | 1)), "{run:?}");
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("history: 1 kernel(s) compared"),
        "{run:?}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    let h = &report["kernels"][0]["history"];
    assert_eq!(h["commits"], 5, "{h:#}");
    assert!(h["base_vs_history_pct"].as_f64().unwrap() > 50.0, "{h:#}");
    let comment = std::fs::read_to_string(out.path().join("comment.md")).unwrap();
    assert!(comment.contains("slower than main's history"), "{comment}");
    assert!(
        comment.contains("that slowdown predates this pull request"),
        "{comment}"
    );
    assert!(
        comment.contains("](https://acme.github.io/kernels/#level1-3_ReLU)"),
        "the problem links its plot: {comment}"
    );
}

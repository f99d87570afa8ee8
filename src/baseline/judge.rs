//! Committed baselines in `kernelgate pr`: the reference and accepted-kernel timings that
//! `kernelgate baseline [--kernels]` recorded on main, read from the base commit (a pull request
//! cannot edit the numbers it is judged against) and used only under the hardware key and
//! problem hash of the run.
//!
//! Per kernel: the live reference is checked against its stored baseline (stale beyond noise is
//! flagged); the candidate is compared with main's accepted timing of the same kernel path when
//! there is one, else with the stored reference. A different key or a changed problem is never
//! compared: the row gets an `invalid` comparison and a flag naming the difference and the fix.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kernelgate_model::{Condition, Severity};
use kernelgate_report::{BaselineKind, BaselineSource, ComparisonSummary, ComparisonVerdict, Flag};
use kernelgate_timing::baseline::{
    compare_with_entry, compare_with_kb, stale_check, stale_check_kb, BaselineEntry, BaselineFile,
    HardwareKey, KbFile, Lookup, Query, Staleness, Variant, VsStored, BASELINES_FILE,
    KB_EAGER_FILE, KERNELS_FILE,
};
use kernelgate_timing::Verdict as TimingVerdict;

use crate::git::Git;

/// What a run measured on: the hardware key (precision is the kernel's) and the L2 mode.
#[derive(Debug, Clone, PartialEq)]
pub struct RunKey {
    pub key: HardwareKey,
    /// `[timing] l2`.
    pub l2: kernelgate_model::L2Mode,
}

/// Every committed baseline file under `<results>/timing/*/`, merged.
#[derive(Debug, Default)]
pub struct Committed {
    /// Where the files came from, for messages: `results/timing at 1a2b3c4d5e6f`.
    pub origin: String,
    /// `kernelgate_baselines.json` entries (eager and compile references).
    pub references: BaselineFile,
    /// `kernelgate_kernels.json` entries (accepted kernels).
    pub kernels: BaselineFile,
    /// KernelBench-format eager files by hardware folder (`NVIDIA_H200`), for repositories
    /// without kernelgate's keyed files.
    pub kernelbench: BTreeMap<String, KbFile>,
    /// Files that exist but cannot be read; every evaluated row says so.
    pub errors: Vec<String>,
    /// Cross-host tolerance (percent, `[timing] baseline_tolerance_pct`): the live reference
    /// counts as disagreeing with its stored baseline only beyond this (and beyond the
    /// regression threshold). Another healthy host of the same GPU differs by a few percent.
    pub tolerance_pct: f64,
}

impl Committed {
    /// From a checkout: `timing_dir` is `<repo>/<results>/timing`. A missing folder is no baselines.
    pub fn load_dir(timing_dir: &Path) -> Committed {
        let mut files = Vec::new();
        if let Ok(rd) = std::fs::read_dir(timing_dir) {
            let mut dirs: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            for dir in dirs {
                for name in [BASELINES_FILE, KERNELS_FILE, KB_EAGER_FILE] {
                    let path = dir.join(name);
                    if path.is_file() {
                        let text = std::fs::read(&path).map_err(|e| e.to_string());
                        files.push((path, text));
                    }
                }
            }
        }
        Committed::from_files(timing_dir.display().to_string(), files)
    }

    /// From a commit (normally main's tip, the pull request's base): `timing_rel` is the
    /// repository-relative `results/timing`.
    pub fn load_git(git: &Git, rev: &str, timing_rel: &str) -> Committed {
        let short = &rev[..rev.len().min(12)];
        let origin = format!("{timing_rel} at {short}");
        let listed = match git.ls_files(rev) {
            Ok(l) => l,
            Err(e) => {
                let mut c = Committed {
                    origin,
                    ..Committed::default()
                };
                c.errors.push(format!(
                    "cannot list the committed baselines at {short}: {e}"
                ));
                return c;
            }
        };
        let prefix = format!("{}/", timing_rel.trim_end_matches('/'));
        let mut files = Vec::new();
        for path in listed {
            let Some(rest) = path.strip_prefix(&prefix) else {
                continue;
            };
            let Some((dir, name)) = rest.split_once('/') else {
                continue;
            };
            if dir.is_empty() || ![BASELINES_FILE, KERNELS_FILE, KB_EAGER_FILE].contains(&name) {
                continue;
            }
            let text = git.show(rev, &path).map_err(|e| e.to_string());
            files.push((PathBuf::from(format!("{short}:{path}")), text));
        }
        Committed::from_files(origin, files)
    }

    /// `files`: (path whose last two components are `<HARDWARE>/<file name>`, content).
    fn from_files(origin: String, files: Vec<(PathBuf, Result<Vec<u8>, String>)>) -> Committed {
        let mut c = Committed {
            origin,
            ..Committed::default()
        };
        for (path, text) in files {
            let text = match text {
                Ok(t) => t,
                Err(e) => {
                    c.errors
                        .push(format!("cannot read baseline file {}: {e}", path.display()));
                    continue;
                }
            };
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let hw = path
                .parent()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            let res = match name {
                KB_EAGER_FILE => KbFile::parse(&text, &path).map(|f| {
                    c.kernelbench.insert(hw, f);
                }),
                _ => BaselineFile::parse(&text, &path).map(|f| {
                    let into = if name == KERNELS_FILE {
                        &mut c.kernels
                    } else {
                        &mut c.references
                    };
                    into.entries.extend(f.entries);
                }),
            };
            if let Err(e) = res {
                c.errors.push(e.to_string());
            }
        }
        c
    }
}

/// One evaluated kernel, as the baselines see it.
#[derive(Debug, Clone)]
pub struct Live<'a> {
    /// `level1/3_ReLU`.
    pub problem: &'a str,
    /// sha-256 of the head version of the problem (normalised source).
    pub problem_sha256: &'a str,
    /// The kernel's path, then its path on main when the pull request renamed it.
    pub kernel_paths: Vec<&'a str>,
    pub run: &'a RunKey,
    /// Event times (ms) of the candidate and of the live reference.
    pub candidate_ms: &'a [f64],
    pub reference_ms: &'a [f64],
}

/// What the committed baselines add to a row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judged {
    pub vs_baseline: Option<ComparisonSummary>,
    pub flags: Vec<Flag>,
}

impl Judged {
    fn flag(&mut self, message: String) {
        if !self.flags.iter().any(|f| f.message == message) {
            self.flags.push(Flag {
                code: Condition::BaselineMismatch,
                severity: Severity::Warning,
                message,
            });
        }
    }
}

impl Committed {
    /// Compares one evaluated kernel with the committed baselines at `threshold_pct`.
    pub fn judge(&self, live: &Live<'_>, threshold_pct: f64) -> Judged {
        let mut out = Judged::default();
        if live.candidate_ms.is_empty() && live.reference_ms.is_empty() {
            return out; // not timed: nothing to compare
        }
        for e in &self.errors {
            out.flag(format!(
                "committed baselines not used: {e}; fix or delete the file on main and re-run `kernelgate baseline`"
            ));
        }
        let key = &live.run.key;
        let refresh = refresh_command(live.problem, key);
        let stale_pct = threshold_pct.max(self.tolerance_pct);

        // 1. The reference: is the runner still the one the baselines were measured on?
        let q = Query {
            problem: live.problem,
            problem_sha256: live.problem_sha256,
            variant: Variant::Eager,
            kernel: None,
            hardware: key,
            l2: live.run.l2,
        };
        let mut stale = false;
        let vs_reference = match same_device(self.references.lookup(&q), key) {
            Lookup::Match(e) => {
                let mut drift = String::new();
                match stale_check(live.reference_ms, e, stale_pct) {
                    Ok(Staleness::Stale { message, .. }) => {
                        stale = true;
                        out.flag(message);
                    }
                    Ok(Staleness::Fresh { ratio })
                        if (ratio - 1.0).abs() * 100.0 > threshold_pct =>
                    {
                        drift = format!(
                            "; the live reference is {:+.1}% off it, within the {:.0}% cross-host tolerance",
                            (ratio - 1.0) * 100.0,
                            stale_pct
                        );
                    }
                    _ => {}
                }
                let source = BaselineSource {
                    kind: BaselineKind::Reference,
                    detail: format!(
                        "reference `Model` of {}: median {:.4} ms over {} samples on {} (commit {}), from {}{drift}",
                        live.problem,
                        e.stats.median,
                        e.stats.n,
                        e.hardware,
                        short(e.commit.as_deref()),
                        self.origin
                    ),
                };
                compare_with_entry(live.candidate_ms, e, threshold_pct)
                    .ok()
                    .map(|v| summary(v, stale, source))
            }
            Lookup::KeyMismatch { why, .. } => {
                out.flag(key_mismatch(&why, &refresh, &self.origin));
                Some(invalid(BaselineKind::Reference, &why))
            }
            Lookup::ProblemChanged {
                stored_sha256,
                live_sha256,
                ..
            } => {
                let msg = problem_changed(live.problem, &stored_sha256, &live_sha256, &refresh);
                out.flag(msg.clone());
                Some(invalid(BaselineKind::Reference, &msg))
            }
            Lookup::Missing => {
                self.kernelbench_reference(live, threshold_pct, &mut out, &mut stale)
            }
        };

        // 2. Main's accepted timing of this kernel.
        let mut vs_main = None;
        for path in &live.kernel_paths {
            let q = Query {
                variant: Variant::Kernel,
                kernel: Some(path),
                ..q
            };
            match same_device(self.kernels.lookup(&q), key) {
                Lookup::Missing => continue,
                Lookup::Match(e) => {
                    let source = BaselineSource {
                        kind: BaselineKind::MainKernel,
                        detail: main_detail(e, stale, &self.origin),
                    };
                    vs_main = compare_with_entry(live.candidate_ms, e, threshold_pct)
                        .ok()
                        .map(|v| summary(v, stale, source));
                }
                Lookup::KeyMismatch { why, .. } => {
                    out.flag(key_mismatch(&why, &refresh, &self.origin));
                    vs_main = Some(invalid(BaselineKind::MainKernel, &why));
                }
                Lookup::ProblemChanged {
                    stored_sha256,
                    live_sha256,
                    ..
                } => {
                    let msg = problem_changed(live.problem, &stored_sha256, &live_sha256, &refresh);
                    vs_main = Some(invalid(BaselineKind::MainKernel, &msg));
                    out.flag(msg);
                }
            }
            break;
        }
        out.vs_baseline = vs_main.or(vs_reference);
        out
    }

    /// Fallback for repositories with only KernelBench's `baseline_time_torch.json`: it records
    /// the device name but no driver, CUDA or torch version, so only the device is matched.
    fn kernelbench_reference(
        &self,
        live: &Live<'_>,
        threshold_pct: f64,
        out: &mut Judged,
        stale: &mut bool,
    ) -> Option<ComparisonSummary> {
        let key = &live.run.key;
        let file = self
            .kernelbench
            .get(&kernelgate_timing::hardware_dir_name(&key.gpu))?;
        let (level, name) = live.problem.split_once('/')?;
        let kb = file.get(level, &format!("{name}.py"))?;
        if kb.mean <= 0.0 || (!kb.hardware.is_empty() && kb.hardware != key.gpu) {
            return None;
        }
        if let Ok(Staleness::Stale { message, .. }) = stale_check_kb(
            live.reference_ms,
            kb,
            live.problem,
            threshold_pct.max(self.tolerance_pct),
        ) {
            *stale = true;
            out.flag(message);
        }
        let source = BaselineSource {
            kind: BaselineKind::Reference,
            detail: format!(
                "reference `Model` of {}: mean {} ms (std {}) on {} in KernelBench's format, which records no driver, CUDA or torch version, from {}",
                live.problem, kb.mean, kb.std, kb.hardware, self.origin
            ),
        };
        compare_with_kb(live.candidate_ms, kb, threshold_pct)
            .ok()
            .map(|v| summary(v, *stale, source))
    }
}

/// Entries of another device are another runner's baselines, not stale ones of this runner
/// (a CPU-only kernel on a GPU runner, a repository timed on several GPU types): no comparison
/// and no flag. Other versions on the same device are refused with a flag.
fn same_device<'a>(found: Lookup<'a>, key: &HardwareKey) -> Lookup<'a> {
    match found {
        Lookup::KeyMismatch { entry, .. } if entry.hardware.gpu != key.gpu => Lookup::Missing,
        other => other,
    }
}

fn summary(v: VsStored, stale: bool, against: BaselineSource) -> ComparisonSummary {
    ComparisonSummary {
        ratio: v.ratio,
        ci_lo: Some(v.ci95.0),
        ci_hi: Some(v.ci95.1),
        // A runner that disagrees with its own reference baseline disagrees with every stored
        // time: the ratio is shown, but it decides nothing.
        verdict: if stale {
            ComparisonVerdict::Invalid
        } else {
            match v.verdict {
                TimingVerdict::Faster => ComparisonVerdict::Faster,
                TimingVerdict::Slower => ComparisonVerdict::Slower,
                TimingVerdict::Unchanged => ComparisonVerdict::Same,
            }
        },
        against: Some(against),
    }
}

fn invalid(kind: BaselineKind, why: &str) -> ComparisonSummary {
    ComparisonSummary {
        ratio: f64::NAN,
        ci_lo: None,
        ci_hi: None,
        verdict: ComparisonVerdict::Invalid,
        against: Some(BaselineSource {
            kind,
            detail: format!("not compared: {why}"),
        }),
    }
}

fn main_detail(e: &BaselineEntry, stale: bool, origin: &str) -> String {
    let mut s = format!(
        "`{}` on main (commit {}, kernel sha256 {}): median {:.4} ms over {} samples on {}, from {}",
        e.kernel.as_deref().unwrap_or("?"),
        short(e.commit.as_deref()),
        e.kernel_sha256
            .as_deref()
            .map(|h| &h[..h.len().min(12)])
            .unwrap_or("unknown"),
        e.stats.median,
        e.stats.n,
        e.hardware,
        origin
    );
    if stale {
        s.push_str("; not trusted while the live reference disagrees with its baseline");
    }
    s
}

fn short(commit: Option<&str>) -> &str {
    commit.map(|c| &c[..c.len().min(12)]).unwrap_or("unknown")
}

/// The command that re-measures this problem (and its accepted kernels) on the runner.
fn refresh_command(problem: &str, key: &HardwareKey) -> String {
    let mut cmd = format!("kernelgate baseline --kernels --problem {problem}");
    if key.precision != kernelgate_model::Precision::Fp32 {
        cmd.push_str(&format!(" --precision {}", key.precision));
    }
    cmd
}

fn key_mismatch(why: &str, refresh: &str, origin: &str) -> String {
    format!(
        "committed baseline not comparable, {why}: refusing to compare with {origin}. \
         Refresh it on this runner: `{refresh}` on main (the baseline workflow in docs/timing.md), then commit results/timing"
    )
}

fn problem_changed(problem: &str, stored: &str, live: &str, refresh: &str) -> String {
    format!(
        "the committed baselines of {problem} were measured on another version of the problem \
         (sha256 {} then, {} now): not compared. Refresh them with `{refresh}` on main",
        &stored[..stored.len().min(12)],
        &live[..live.len().min(12)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_model::Precision;
    use kernelgate_timing::SeriesStats;

    const SHA: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn key() -> HardwareKey {
        HardwareKey {
            gpu: "NVIDIA H200".into(),
            driver: "580.159.04".into(),
            cuda: "13.0".into(),
            torch: "2.11.0+cu130".into(),
            precision: Precision::Fp32,
        }
    }

    fn around(ms: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| ms * (1.0 + ((i % 5) as f64 - 2.0) * 0.001))
            .collect()
    }

    fn entry(variant: Variant, kernel: Option<&str>, ms: f64, k: HardwareKey) -> BaselineEntry {
        let samples = around(ms, 40);
        BaselineEntry {
            problem: "level1/3_ReLU".into(),
            problem_sha256: SHA.into(),
            variant,
            kernel: kernel.map(str::to_string),
            kernel_sha256: kernel.map(|_| "b".repeat(64)),
            hardware: k,
            l2: kernelgate_model::L2Mode::Cold,
            stats: SeriesStats::from_samples(&samples).unwrap(),
            samples_ms: samples,
            commit: Some("1234567890abcdef".into()),
            recorded_at: 0,
            work: None,
        }
    }

    /// `timing/NVIDIA_H200/` with the reference at 1.0 ms and main's kernel at 0.5 ms.
    fn write_files(timing: &Path, k: HardwareKey) {
        let dir = timing.join("NVIDIA_H200");
        let mut refs = BaselineFile::default();
        refs.upsert(entry(Variant::Eager, None, 1.0, k.clone()));
        refs.save(&dir.join(BASELINES_FILE)).unwrap();
        let mut kernels = BaselineFile::default();
        kernels.upsert(entry(
            Variant::Kernel,
            Some("kernels/level1/3_ReLU/cuda.py"),
            0.5,
            k,
        ));
        kernels.save(&dir.join(KERNELS_FILE)).unwrap();
    }

    fn run_key(k: HardwareKey) -> RunKey {
        RunKey {
            key: k,
            l2: kernelgate_model::L2Mode::Cold,
        }
    }

    fn judge(c: &Committed, run: &RunKey, sha: &str, cand: &[f64], reference: &[f64]) -> Judged {
        c.judge(
            &Live {
                problem: "level1/3_ReLU",
                problem_sha256: sha,
                kernel_paths: vec!["kernels/level1/3_ReLU/cuda.py"],
                run,
                candidate_ms: cand,
                reference_ms: reference,
            },
            2.0,
        )
    }

    fn loaded(k: HardwareKey) -> (tempfile::TempDir, Committed) {
        let dir = tempfile::tempdir().unwrap();
        write_files(&dir.path().join("timing"), k);
        let c = Committed::load_dir(&dir.path().join("timing"));
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(
            (c.references.entries.len(), c.kernels.entries.len()),
            (1, 1)
        );
        (dir, c)
    }

    #[test]
    fn matching_key_compares_with_mains_kernel_slower_faster_same() {
        let (_d, c) = loaded(key());
        let run = run_key(key());
        let reference = around(1.0, 40);
        let verdict = |cand: Vec<f64>| {
            let j = judge(&c, &run, SHA, &cand, &reference);
            assert!(j.flags.is_empty(), "{:?}", j.flags);
            let vs = j.vs_baseline.unwrap();
            assert_eq!(vs.against.as_ref().unwrap().kind, BaselineKind::MainKernel);
            (vs.verdict, vs.ratio)
        };
        let (v, r) = verdict(around(0.56, 40));
        assert_eq!(v, ComparisonVerdict::Slower);
        assert!((r - 1.12).abs() < 1e-9);
        assert_eq!(verdict(around(0.40, 40)).0, ComparisonVerdict::Faster);
        assert_eq!(verdict(around(0.5, 40)).0, ComparisonVerdict::Same);
        // 1% slower: significant, but under the 2% threshold.
        assert_eq!(verdict(around(0.505, 40)).0, ComparisonVerdict::Same);
        // A median 16% slower measured too noisily to be sure: never `slower`.
        let (v, r) = verdict(vec![0.45, 0.58, 0.9, 0.49, 0.7]);
        assert!(r > 1.1);
        assert_eq!(v, ComparisonVerdict::Same);
        let j = judge(&c, &run, SHA, &around(0.56, 40), &reference);
        let detail = &j.vs_baseline.unwrap().against.unwrap().detail;
        assert!(
            detail.contains("`kernels/level1/3_ReLU/cuda.py` on main (commit 1234567890ab")
                && detail.contains("kernel sha256 bbbbbbbbbbbb")
                && detail.contains("torch 2.11.0+cu130"),
            "{detail}"
        );
    }

    #[test]
    fn without_mains_kernel_the_stored_reference_is_the_baseline() {
        let (_d, c) = loaded(key());
        let run = run_key(key());
        let j = c.judge(
            &Live {
                problem: "level1/3_ReLU",
                problem_sha256: SHA,
                kernel_paths: vec!["kernels/level1/3_ReLU/triton.py"],
                run: &run,
                candidate_ms: &around(0.25, 40),
                reference_ms: &around(1.0, 40),
            },
            2.0,
        );
        let vs = j.vs_baseline.unwrap();
        assert_eq!(vs.against.unwrap().kind, BaselineKind::Reference);
        assert_eq!(vs.verdict, ComparisonVerdict::Faster);
        assert!((vs.ratio - 0.25).abs() < 1e-9);
        // A rename finds main's timing under the old path.
        let j = c.judge(
            &Live {
                problem: "level1/3_ReLU",
                problem_sha256: SHA,
                kernel_paths: vec![
                    "kernels/level1/3_ReLU/new.py",
                    "kernels/level1/3_ReLU/cuda.py",
                ],
                run: &run,
                candidate_ms: &around(0.5, 40),
                reference_ms: &around(1.0, 40),
            },
            2.0,
        );
        assert_eq!(
            j.vs_baseline.unwrap().against.unwrap().kind,
            BaselineKind::MainKernel
        );
    }

    #[test]
    fn key_mismatch_is_refused_with_a_flag_naming_the_field_and_the_fix() {
        let (_d, c) = loaded(key());
        for (field, live, says) in [
            (
                "torch",
                HardwareKey {
                    torch: "2.12.0+cu130".into(),
                    ..key()
                },
                "torch `2.11.0+cu130` vs `2.12.0+cu130`",
            ),
            (
                "driver",
                HardwareKey {
                    driver: "590.10".into(),
                    ..key()
                },
                "driver `580.159.04` vs `590.10`",
            ),
            (
                "precision",
                HardwareKey {
                    precision: Precision::Bf16,
                    ..key()
                },
                "precision `fp32` vs `bf16`",
            ),
        ] {
            let run = run_key(live);
            let j = judge(&c, &run, SHA, &around(0.56, 40), &around(1.0, 40));
            let vs = j.vs_baseline.unwrap();
            assert_eq!(vs.verdict, ComparisonVerdict::Invalid, "{field}");
            assert_eq!(vs.against.unwrap().kind, BaselineKind::MainKernel);
            assert_eq!(j.flags.len(), 1, "one flag for both files: {:?}", j.flags);
            let f = &j.flags[0];
            assert_eq!(f.code, Condition::BaselineMismatch);
            assert!(
                f.message.contains(says)
                    && f.message.contains("refusing to compare")
                    && f.message
                        .contains("kernelgate baseline --kernels --problem level1/3_ReLU"),
                "{field}: {}",
                f.message
            );
            if field == "precision" {
                assert!(f.message.contains("--precision bf16"), "{}", f.message);
            }
        }
    }

    #[test]
    fn another_device_is_another_runner_not_a_mismatch() {
        let (_d, c) = loaded(key());
        let cpu = run_key(HardwareKey {
            gpu: "AMD EPYC 7B13 64-Core Processor".into(),
            driver: "none".into(),
            cuda: "none".into(),
            ..key()
        });
        assert_eq!(
            judge(&c, &cpu, SHA, &around(0.5, 40), &around(1.0, 40)),
            Judged::default()
        );
    }

    #[test]
    fn changed_problem_hash_is_refused() {
        let (_d, c) = loaded(key());
        let run = run_key(key());
        let other = "c".repeat(64);
        let j = judge(&c, &run, &other, &around(0.56, 40), &around(1.0, 40));
        let vs = j.vs_baseline.unwrap();
        assert_eq!(vs.verdict, ComparisonVerdict::Invalid);
        assert!(vs.ratio.is_nan());
        assert_eq!(j.flags.len(), 1, "{:?}", j.flags);
        let m = &j.flags[0].message;
        assert!(
            m.contains("another version of the problem")
                && m.contains("aaaaaaaaaaaa then, cccccccccccc now")
                && m.contains("kernelgate baseline --kernels --problem level1/3_ReLU"),
            "{m}"
        );
    }

    #[test]
    fn stale_reference_is_flagged_and_distrusts_the_main_comparison() {
        let (_d, c) = loaded(key());
        let run = run_key(key());
        // The live reference takes 10% longer than its baseline: the runner changed.
        let j = judge(&c, &run, SHA, &around(0.56, 40), &around(1.10, 40));
        assert_eq!(j.flags.len(), 1, "{:?}", j.flags);
        let m = &j.flags[0].message;
        assert!(
            m.contains("+10.0%") && m.contains("kernelgate baseline --problem level1/3_ReLU"),
            "{m}"
        );
        let vs = j.vs_baseline.unwrap();
        assert_eq!(vs.verdict, ComparisonVerdict::Invalid);
        assert!((vs.ratio - 1.12).abs() < 1e-9, "the ratio is still shown");
        assert!(vs.against.unwrap().detail.contains("not trusted"));
        // Noise (+0.5%) and a real change under the threshold (+1.5%) are not stale.
        for live in [1.005, 1.015] {
            let j = judge(&c, &run, SHA, &around(0.56, 40), &around(live, 40));
            assert!(j.flags.is_empty(), "{live}: {:?}", j.flags);
            assert_eq!(j.vs_baseline.unwrap().verdict, ComparisonVerdict::Slower);
        }
    }

    #[test]
    fn a_reference_drift_within_the_cross_host_tolerance_is_not_flagged() {
        let (_d, mut c) = loaded(key());
        c.tolerance_pct = 10.0;
        let run = run_key(key());
        // Another healthy host: the live reference 5% faster than its stored baseline.
        let j = judge(&c, &run, SHA, &around(0.5, 40), &around(0.95, 40));
        assert!(j.flags.is_empty(), "{:?}", j.flags);
        // Beyond the tolerance it is still flagged.
        let j = judge(&c, &run, SHA, &around(0.5, 40), &around(0.85, 40));
        assert_eq!(j.flags.len(), 1, "{:?}", j.flags);
        assert!(j.flags[0].message.contains("-15.0%"), "{:?}", j.flags);
    }

    #[test]
    fn kernelbench_file_is_the_fallback_matched_by_device_only() {
        let dir = tempfile::tempdir().unwrap();
        let h200 = dir.path().join("NVIDIA_H200");
        std::fs::create_dir_all(&h200).unwrap();
        std::fs::write(
            h200.join(KB_EAGER_FILE),
            r#"{"level1": {"3_ReLU.py": {"mean": 2.0, "std": 0.01, "min": 1.98, "max": 2.1,
                "num_trials": 100, "hardware": "NVIDIA H200", "device": "cuda:0"}}}"#,
        )
        .unwrap();
        let c = Committed::load_dir(dir.path());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        let run = run_key(key());
        let j = judge(&c, &run, SHA, &around(0.5, 40), &around(2.0, 40));
        assert!(j.flags.is_empty(), "{:?}", j.flags);
        let vs = j.vs_baseline.unwrap();
        assert_eq!(vs.verdict, ComparisonVerdict::Faster);
        assert!((vs.ratio - 0.25).abs() < 1e-9);
        assert!(vs.against.unwrap().detail.contains("KernelBench's format"));
        // The live reference at half the committed mean: stale.
        let j = judge(&c, &run, SHA, &around(0.5, 40), &around(1.0, 40));
        assert_eq!(j.flags.len(), 1);
        assert!(j.flags[0].message.contains("KernelBench-format baseline"));
        assert_eq!(j.vs_baseline.unwrap().verdict, ComparisonVerdict::Invalid);
        // Another GPU, or a CPU run: no baseline, no flag.
        let h100 = run_key(HardwareKey {
            gpu: "NVIDIA H100 80GB HBM3".into(),
            ..key()
        });
        assert_eq!(
            judge(&c, &h100, SHA, &around(0.5, 40), &around(1.0, 40)),
            Judged::default()
        );
    }

    #[test]
    fn unreadable_files_are_flagged_and_untimed_rows_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let h200 = dir.path().join("NVIDIA_H200");
        std::fs::create_dir_all(&h200).unwrap();
        std::fs::write(h200.join(BASELINES_FILE), "{ not json").unwrap();
        let c = Committed::load_dir(dir.path());
        assert_eq!(c.errors.len(), 1);
        let run = run_key(key());
        let j = judge(&c, &run, SHA, &around(0.5, 40), &around(1.0, 40));
        assert_eq!(j.flags.len(), 1);
        assert!(
            j.flags[0].message.contains(BASELINES_FILE)
                && j.flags[0].message.contains("kernelgate baseline"),
            "{}",
            j.flags[0].message
        );
        assert_eq!(judge(&c, &run, SHA, &[], &[]), Judged::default());
        assert_eq!(
            Committed::load_dir(&dir.path().join("absent")).errors.len(),
            0
        );
    }

    #[test]
    fn load_git_reads_the_base_commit_not_the_working_tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let git_cmd = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@e",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .current_dir(d)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git_cmd(&["init", "-q"]);
        write_files(&d.join("results/timing"), key());
        git_cmd(&["add", "-A"]);
        git_cmd(&["commit", "-q", "-m", "baselines"]);
        let base = git_cmd(&["rev-parse", "HEAD"]);
        // The pull request rewrites main's kernel timing to look fast.
        let mut forged =
            BaselineFile::load(&d.join("results/timing/NVIDIA_H200").join(KERNELS_FILE)).unwrap();
        forged.entries[0].samples_ms = around(5.0, 40);
        forged
            .save(&d.join("results/timing/NVIDIA_H200").join(KERNELS_FILE))
            .unwrap();
        git_cmd(&["commit", "-q", "-am", "forge"]);
        let git = Git::open(d).unwrap();
        let c = Committed::load_git(&git, &base, "results/timing");
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert!(c.origin.starts_with("results/timing at "), "{}", c.origin);
        assert_eq!(c.kernels.entries[0].stats.median, 0.5);
        assert_eq!(c.references.entries.len(), 1);
        let run = run_key(key());
        let j = judge(&c, &run, SHA, &around(0.56, 40), &around(1.0, 40));
        assert_eq!(j.vs_baseline.unwrap().verdict, ComparisonVerdict::Slower);
    }
}

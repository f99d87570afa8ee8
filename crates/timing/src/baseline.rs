//! Baseline files: KernelBench's own format (so their scripts read ours and ours read theirs)
//! and kernelgate's richer file keyed by hardware and problem hash.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use kernelgate_model::Precision;
use serde::{Deserialize, Serialize};

use crate::compare::{compare, Verdict};
use crate::stats::SeriesStats;

pub const KB_EAGER_FILE: &str = "baseline_time_torch.json";
pub const KB_COMPILE_FILE: &str = "baseline_time_torch_compile_inductor_default.json";
pub const BASELINES_FILE: &str = "kernelgate_baselines.json";
pub const KERNELS_FILE: &str = "kernelgate_kernels.json";
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("cannot read baseline file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("baseline file {path} is not valid ({source}); fix or delete it and re-run `kernelgate baseline`")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write baseline file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "baseline file {path} has format version {found}, this kernelgate reads version {FORMAT_VERSION}; \
         re-run `kernelgate baseline` to regenerate it"
    )]
    Version { path: PathBuf, found: u32 },
}

/// Folder name for a device: `NVIDIA H200` -> `NVIDIA_H200` (letters, digits, `-`, `.` kept).
pub fn hardware_dir_name(device_name: &str) -> String {
    let mut out = String::new();
    for c in device_name.trim().chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.is_empty() {
        "unknown".to_string()
    } else {
        out
    }
}

// ---------------------------------------------------------------------------------------------
// KernelBench format

/// One problem's line in a KernelBench baseline file (times in ms, `std` is numpy's population std).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KbEntry {
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub num_trials: u64,
    pub hardware: String,
    pub device: String,
}

impl KbEntry {
    /// From our statistics, rounded to 3 significant figures as KernelBench writes them.
    pub fn from_stats(stats: &SeriesStats, hardware: &str, device: &str) -> KbEntry {
        KbEntry {
            mean: sig3(stats.mean),
            std: sig3(stats.std_population()),
            min: sig3(stats.min),
            max: sig3(stats.max),
            num_trials: stats.n as u64,
            hardware: hardware.to_string(),
            device: device.to_string(),
        }
    }
}

fn sig3(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    format!("{x:.2e}").parse().unwrap_or(x)
}

/// Problem file name ordered as KernelBench lists them: by leading id, then name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProblemFile(pub String);

impl ProblemFile {
    fn id(&self) -> Option<u64> {
        self.0.split('_').next()?.parse().ok()
    }
}

impl Ord for ProblemFile {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.id(), other.id()) {
            (Some(a), Some(b)) => a.cmp(&b).then_with(|| self.0.cmp(&other.0)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => self.0.cmp(&other.0),
        }
    }
}
impl PartialOrd for ProblemFile {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `{"level1": {"19_ReLU.py": KbEntry}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KbFile(pub BTreeMap<String, BTreeMap<ProblemFile, KbEntry>>);

impl KbFile {
    pub fn get(&self, level: &str, file: &str) -> Option<&KbEntry> {
        self.0.get(level)?.get(&ProblemFile(file.to_string()))
    }
    pub fn insert(&mut self, level: &str, file: &str, entry: KbEntry) {
        self.0
            .entry(level.to_string())
            .or_default()
            .insert(ProblemFile(file.to_string()), entry);
    }
    pub fn len(&self) -> usize {
        self.0.values().map(|m| m.len()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn load(path: &Path) -> Result<KbFile, BaselineError> {
        read_json(path)
    }
    /// From text read elsewhere (e.g. `git show`); `path` names it in errors.
    pub fn parse(text: &[u8], path: &Path) -> Result<KbFile, BaselineError> {
        serde_json::from_slice(text).map_err(|source| BaselineError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }
    /// Existing file, or an empty one when there is none yet.
    pub fn load_or_default(path: &Path) -> Result<KbFile, BaselineError> {
        if path.exists() {
            Self::load(path)
        } else {
            Ok(KbFile::default())
        }
    }
    /// Written like Python's `json.dump(..., indent=4)`.
    pub fn save(&self, path: &Path) -> Result<(), BaselineError> {
        write_json(path, self)
    }
}

// ---------------------------------------------------------------------------------------------
// kernelgate format

/// What a timing is comparable with: same GPU, driver, CUDA, torch and precision.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HardwareKey {
    /// `torch.cuda.get_device_name()`, or the CPU model.
    pub gpu: String,
    pub driver: String,
    pub cuda: String,
    pub torch: String,
    pub precision: Precision,
}

impl HardwareKey {
    /// Timed on a GPU (`cuda` is `none` for host timings).
    pub fn is_gpu(&self) -> bool {
        self.cuda != "none"
    }

    /// Human list of the fields that differ, `None` when equal.
    pub fn differences(&self, other: &HardwareKey) -> Option<String> {
        let mut d = Vec::new();
        let mut cmp = |name: &str, a: &str, b: &str| {
            if a != b {
                d.push(format!("{name} `{a}` vs `{b}`"));
            }
        };
        cmp("device", &self.gpu, &other.gpu);
        cmp("driver", &self.driver, &other.driver);
        cmp("CUDA", &self.cuda, &other.cuda);
        cmp("torch", &self.torch, &other.torch);
        cmp(
            "precision",
            self.precision.as_str(),
            other.precision.as_str(),
        );
        (!d.is_empty()).then(|| d.join(", "))
    }
}

impl fmt::Display for HardwareKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / driver {} / CUDA {} / torch {} / {}",
            self.gpu, self.driver, self.cuda, self.torch, self.precision
        )
    }
}

/// Which code was timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The reference `Model`, eager PyTorch.
    Eager,
    /// `torch.compile(Model)` with inductor's default mode.
    Compile,
    /// An accepted candidate kernel on `main`.
    Kernel,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineEntry {
    /// `level1/19_ReLU.py`.
    pub problem: String,
    /// sha-256 of the normalised problem source.
    pub problem_sha256: String,
    pub variant: Variant,
    /// Kernel path, for `Variant::Kernel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_sha256: Option<String>,
    pub hardware: HardwareKey,
    /// `cold` (L2 flushed before each call) or `warm`.
    pub l2: kernelgate_model::L2Mode,
    pub stats: SeriesStats,
    /// The event times themselves, so a later run can test against them, not just a median.
    pub samples_ms: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Seconds since the Unix epoch.
    pub recorded_at: u64,
    /// The least work the problem needs (eager references only), for the plausibility floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
}

/// Bytes every input read once and every output written once, and the FLOPs torch's
/// `FlopCounterMode` counts for the reference (0 when it knows none of its operators).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub flops: u64,
}

impl Work {
    /// [`crate::floor_ms`] of this work on `spec`.
    pub fn floor_ms(&self, spec: crate::DeviceSpec) -> f64 {
        crate::floor_ms(
            (self.input_bytes + self.output_bytes) as f64,
            self.flops as f64,
            spec.bandwidth_gbs,
            spec.peak_tflops,
        )
    }
}

impl BaselineEntry {
    fn same_slot(&self, other: &BaselineEntry) -> bool {
        self.problem == other.problem
            && self.variant == other.variant
            && self.kernel == other.kernel
            && self.hardware == other.hardware
            && self.l2 == other.l2
    }
}

/// `kernelgate_baselines.json` / `kernelgate_kernels.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineFile {
    pub version: u32,
    pub entries: Vec<BaselineEntry>,
}

impl Default for BaselineFile {
    fn default() -> Self {
        BaselineFile {
            version: FORMAT_VERSION,
            entries: Vec::new(),
        }
    }
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<'a> {
    Match(&'a BaselineEntry),
    /// Entries exist for this problem, but none measured under the live key.
    KeyMismatch {
        entry: &'a BaselineEntry,
        why: String,
    },
    /// Same key, but the problem's source changed since: the stored time is of other work.
    ProblemChanged {
        entry: &'a BaselineEntry,
        stored_sha256: String,
        live_sha256: String,
    },
    Missing,
}

/// What to look up.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub problem: &'a str,
    pub problem_sha256: &'a str,
    pub variant: Variant,
    pub kernel: Option<&'a str>,
    pub hardware: &'a HardwareKey,
    pub l2: kernelgate_model::L2Mode,
}

impl BaselineFile {
    pub fn load(path: &Path) -> Result<BaselineFile, BaselineError> {
        let f: BaselineFile = read_json(path)?;
        Self::check_version(f, path)
    }
    /// From text read elsewhere (e.g. `git show`); `path` names it in errors.
    pub fn parse(text: &[u8], path: &Path) -> Result<BaselineFile, BaselineError> {
        let f = serde_json::from_slice(text).map_err(|source| BaselineError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        Self::check_version(f, path)
    }
    fn check_version(f: BaselineFile, path: &Path) -> Result<BaselineFile, BaselineError> {
        if f.version != FORMAT_VERSION {
            return Err(BaselineError::Version {
                path: path.to_path_buf(),
                found: f.version,
            });
        }
        Ok(f)
    }
    pub fn load_or_default(path: &Path) -> Result<BaselineFile, BaselineError> {
        if path.exists() {
            Self::load(path)
        } else {
            Ok(BaselineFile::default())
        }
    }
    pub fn save(&self, path: &Path) -> Result<(), BaselineError> {
        write_json(path, self)
    }

    /// Insert, replacing the entry for the same problem, variant, kernel, key and L2 mode.
    pub fn upsert(&mut self, entry: BaselineEntry) {
        self.entries.retain(|e| !e.same_slot(&entry));
        self.entries.push(entry);
        self.entries.sort_by(|a, b| {
            (&a.problem, a.variant as u8, &a.kernel, &a.hardware.gpu).cmp(&(
                &b.problem,
                b.variant as u8,
                &b.kernel,
                &b.hardware.gpu,
            ))
        });
    }

    pub fn lookup<'a>(&'a self, q: &Query<'_>) -> Lookup<'a> {
        let mut candidates = self
            .entries
            .iter()
            .filter(|e| e.problem == q.problem && e.variant == q.variant && e.l2 == q.l2)
            .filter(|e| q.kernel.is_none() || e.kernel.as_deref() == q.kernel)
            .peekable();
        let Some(first) = candidates.peek().copied() else {
            return Lookup::Missing;
        };
        let all: Vec<&BaselineEntry> = candidates.collect();
        match all.iter().find(|e| &e.hardware == q.hardware) {
            Some(e) if e.problem_sha256 == q.problem_sha256 => Lookup::Match(e),
            Some(e) => Lookup::ProblemChanged {
                entry: e,
                stored_sha256: e.problem_sha256.clone(),
                live_sha256: q.problem_sha256.to_string(),
            },
            None => {
                // Report against the entry on the same device if there is one, else the first.
                let closest = all
                    .iter()
                    .find(|e| e.hardware.gpu == q.hardware.gpu)
                    .copied()
                    .unwrap_or(first);
                let why = closest.hardware.differences(q.hardware).unwrap_or_default();
                Lookup::KeyMismatch {
                    entry: closest,
                    why: format!(
                        "baseline measured on {}, this run is on {} ({why})",
                        closest.hardware, q.hardware
                    ),
                }
            }
        }
    }
}

/// Whether a live reference time still agrees with its stored baseline.
#[derive(Debug, Clone, PartialEq)]
pub enum Staleness {
    Fresh {
        ratio: f64,
    },
    /// The live time differs beyond noise and threshold; `ratio` = live / stored.
    Stale {
        ratio: f64,
        ci95: (f64, f64),
        message: String,
    },
}

/// A live series against a stored one: `ratio` = live / stored median, `ci95` its interval,
/// `verdict` by the same rule as live comparisons (never `Slower` without significance).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VsStored {
    pub ratio: f64,
    pub ci95: (f64, f64),
    pub verdict: Verdict,
}

/// Live samples against a stored entry. With stored samples this is [`compare`] (rank test and
/// bootstrap interval of the ratio of medians, stored side as base). Without (imported from
/// KernelBench's format) only the live side has a spread: a difference counts when the live
/// median's 95% interval lies wholly beyond the threshold.
pub fn compare_with_entry(
    live_ms: &[f64],
    stored: &BaselineEntry,
    threshold_pct: f64,
) -> Result<VsStored, crate::TimingError> {
    if stored.samples_ms.len() >= 2 {
        let c = compare(&stored.samples_ms, live_ms, threshold_pct)?;
        return Ok(VsStored {
            ratio: c.ratio,
            ci95: c.ci95,
            verdict: c.verdict,
        });
    }
    let m = stored.stats.median;
    band_verdict(live_ms, m, m, m, threshold_pct)
}

/// Live samples against a KernelBench entry, which has a mean and a (population) standard
/// deviation but no samples: a difference counts only when the live median's 95% interval lies
/// wholly outside the stored mean widened by the threshold or by two standard deviations,
/// whichever is wider (their means carry the outliers their medians would not).
pub fn compare_with_kb(
    live_ms: &[f64],
    kb: &KbEntry,
    threshold_pct: f64,
) -> Result<VsStored, crate::TimingError> {
    band_verdict(
        live_ms,
        kb.mean,
        kb.mean - 2.0 * kb.std,
        kb.mean + 2.0 * kb.std,
        threshold_pct,
    )
}

/// `center` is the stored time; `[lo, hi]` its noise band before the threshold is applied.
fn band_verdict(
    live_ms: &[f64],
    center: f64,
    lo: f64,
    hi: f64,
    threshold_pct: f64,
) -> Result<VsStored, crate::TimingError> {
    if !(threshold_pct.is_finite() && threshold_pct >= 0.0) {
        return Err(crate::TimingError::BadThreshold(threshold_pct));
    }
    let live = SeriesStats::from_samples(live_ms)?;
    if center <= 0.0 || live.median <= 0.0 {
        return Err(crate::TimingError::NonPositiveMedian);
    }
    let t = 1.0 + threshold_pct / 100.0;
    let (band_lo, band_hi) = ((center / t).min(lo), (center * t).max(hi));
    let (l, h) = live.ci95_median;
    let verdict = if l > band_hi {
        Verdict::Slower
    } else if h < band_lo {
        Verdict::Faster
    } else {
        Verdict::Unchanged
    };
    Ok(VsStored {
        ratio: live.median / center,
        ci95: (l / center, h / center),
        verdict,
    })
}

/// Compare live reference samples with the stored entry at `threshold_pct`: stale when the
/// difference is significant and beyond the threshold (the same rule as verdicts, so noise
/// never marks a baseline stale).
pub fn stale_check(
    live_ms: &[f64],
    stored: &BaselineEntry,
    threshold_pct: f64,
) -> Result<Staleness, crate::TimingError> {
    let v = compare_with_entry(live_ms, stored, threshold_pct)?;
    Ok(staleness(
        v,
        &stored.problem,
        &format!("its baseline from {}", stored.hardware),
    ))
}

/// [`stale_check`] against a KernelBench-format entry ([`compare_with_kb`]); `problem` is
/// `level1/19_ReLU`.
pub fn stale_check_kb(
    live_ms: &[f64],
    kb: &KbEntry,
    problem: &str,
    threshold_pct: f64,
) -> Result<Staleness, crate::TimingError> {
    let v = compare_with_kb(live_ms, kb, threshold_pct)?;
    Ok(staleness(
        v,
        problem,
        &format!(
            "its KernelBench-format baseline from {} (mean {} ms, std {} ms)",
            kb.hardware, kb.mean, kb.std
        ),
    ))
}

fn staleness(v: VsStored, problem: &str, against: &str) -> Staleness {
    if v.verdict == Verdict::Unchanged {
        return Staleness::Fresh { ratio: v.ratio };
    }
    Staleness::Stale {
        ratio: v.ratio,
        ci95: v.ci95,
        message: format!(
            "the live reference of {problem} takes {:+.1}% (95% CI {:+.1}% to {:+.1}%) against {against}: \
             the runner changed (clocks, thermals, other load) or the baseline is stale; refresh it with \
             `kernelgate baseline --problem {problem}`",
            (v.ratio - 1.0) * 100.0,
            (v.ci95.0 - 1.0) * 100.0,
            (v.ci95.1 - 1.0) * 100.0,
        ),
    }
}

// ---------------------------------------------------------------------------------------------

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, BaselineError> {
    let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| BaselineError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Pretty JSON with 4-space indent, written to a temp file and renamed so a crash never leaves
/// half a baseline behind.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), BaselineError> {
    let werr = |source| BaselineError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(werr)?;
    }
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    value
        .serialize(&mut ser)
        .map_err(|e| werr(std::io::Error::other(e)))?;
    buf.push(b'\n');
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, &buf).map_err(werr)?;
    std::fs::rename(&tmp, path).map_err(werr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(torch: &str) -> HardwareKey {
        HardwareKey {
            gpu: "NVIDIA H200".into(),
            driver: "580.95".into(),
            cuda: "13.0".into(),
            torch: torch.into(),
            precision: Precision::Fp32,
        }
    }

    fn entry(problem: &str, sha: &str, k: HardwareKey, samples: Vec<f64>) -> BaselineEntry {
        BaselineEntry {
            problem: problem.into(),
            problem_sha256: sha.into(),
            variant: Variant::Eager,
            kernel: None,
            kernel_sha256: None,
            hardware: k,
            l2: kernelgate_model::L2Mode::Cold,
            stats: SeriesStats::from_samples(&samples).unwrap(),
            samples_ms: samples,
            commit: None,
            recorded_at: 0,
            work: None,
        }
    }

    #[test]
    fn work_floor() {
        // 4096x4096 fp32 ReLU: 64 MiB in, 64 MiB out at 4800 GB/s -> 0.02796 ms.
        let w = Work {
            input_bytes: 1 << 26,
            output_bytes: 1 << 26,
            flops: 0,
        };
        let f = w.floor_ms(crate::DeviceSpec::lookup("NVIDIA H200").unwrap());
        assert!((f - 0.027962026666).abs() < 1e-9, "{f}");
    }

    #[test]
    fn dir_names() {
        assert_eq!(hardware_dir_name("NVIDIA H200"), "NVIDIA_H200");
        assert_eq!(
            hardware_dir_name("NVIDIA H100 80GB HBM3"),
            "NVIDIA_H100_80GB_HBM3"
        );
        assert_eq!(
            hardware_dir_name("  AMD EPYC 7B13 64-Core Processor "),
            "AMD_EPYC_7B13_64-Core_Processor"
        );
        assert_eq!(hardware_dir_name("/"), "unknown");
    }

    #[test]
    fn sig3_rounding() {
        assert_eq!(sig3(2.6612), 2.66);
        assert_eq!(sig3(0.019_94), 0.0199);
        assert_eq!(sig3(123.45), 123.0);
    }

    #[test]
    fn kb_roundtrip_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x").join(KB_EAGER_FILE);
        let mut f = KbFile::default();
        let st = SeriesStats::from_samples(&[1.0, 2.0, 3.0]).unwrap();
        for name in ["19_ReLU.py", "2_Standard.py", "100_Last.py"] {
            f.insert(
                "level1",
                name,
                KbEntry::from_stats(&st, "NVIDIA H200", "cuda:0"),
            );
        }
        f.save(&p).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let (a, b, c) = (
            text.find("2_Standard").unwrap(),
            text.find("19_ReLU").unwrap(),
            text.find("100_Last").unwrap(),
        );
        assert!(a < b && b < c, "numeric order");
        assert!(
            text.contains("\n    \"level1\": {\n        \"2_Standard.py\""),
            "{text}"
        );
        let back = KbFile::load(&p).unwrap();
        assert_eq!(back, f);
        let e = back.get("level1", "19_ReLU.py").unwrap();
        // np.std([1,2,3]) = 0.816496580927726 -> 0.816
        assert_eq!(
            (e.mean, e.std, e.min, e.max, e.num_trials),
            (2.0, 0.816, 1.0, 3.0, 3)
        );
    }

    #[test]
    fn lookup_cases() {
        let mut f = BaselineFile::default();
        f.upsert(entry(
            "level1/19_ReLU.py",
            "aaa",
            key("2.11.0"),
            vec![1.0, 1.1, 0.9],
        ));
        let live = key("2.11.0");
        let q = |sha, k| Query {
            problem: "level1/19_ReLU.py",
            problem_sha256: sha,
            variant: Variant::Eager,
            kernel: None,
            hardware: k,
            l2: kernelgate_model::L2Mode::Cold,
        };
        assert!(
            matches!(f.lookup(&q("aaa", &live)), Lookup::Match(e) if e.problem_sha256 == "aaa")
        );
        assert!(
            matches!(f.lookup(&q("bbb", &live)), Lookup::ProblemChanged { ref stored_sha256, .. } if stored_sha256 == "aaa")
        );
        let other = key("2.10.0");
        match f.lookup(&q("aaa", &other)) {
            Lookup::KeyMismatch { why, .. } => {
                assert!(why.contains("torch `2.11.0` vs `2.10.0`"), "{why}")
            }
            x => panic!("{x:?}"),
        }
        let q2 = Query {
            problem: "level1/20_Other.py",
            ..q("aaa", &live)
        };
        assert_eq!(f.lookup(&q2), Lookup::Missing);
        let q3 = Query {
            variant: Variant::Compile,
            ..q("aaa", &live)
        };
        assert_eq!(f.lookup(&q3), Lookup::Missing);
        // Upsert replaces the same slot, keeps other keys.
        f.upsert(entry(
            "level1/19_ReLU.py",
            "ccc",
            key("2.11.0"),
            vec![2.0, 2.1],
        ));
        f.upsert(entry(
            "level1/19_ReLU.py",
            "ccc",
            key("2.10.0"),
            vec![2.0, 2.1],
        ));
        assert_eq!(f.entries.len(), 2);
        assert!(matches!(f.lookup(&q("ccc", &live)), Lookup::Match(_)));
    }

    #[test]
    fn file_roundtrip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(BASELINES_FILE);
        assert_eq!(
            BaselineFile::load_or_default(&p).unwrap(),
            BaselineFile::default()
        );
        let mut f = BaselineFile::default();
        f.upsert(entry(
            "level1/19_ReLU.py",
            "aaa",
            key("2.11.0"),
            vec![1.0, 1.5],
        ));
        f.save(&p).unwrap();
        assert_eq!(BaselineFile::load(&p).unwrap(), f);
        std::fs::write(&p, "{ not json").unwrap();
        let e = BaselineFile::load(&p).unwrap_err().to_string();
        assert!(
            e.contains(BASELINES_FILE) && e.contains("kernelgate baseline"),
            "{e}"
        );
        std::fs::write(&p, r#"{"version": 9, "entries": []}"#).unwrap();
        let e = BaselineFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("version 9"), "{e}");
        let named = Path::new("main:results/timing/X/kernelgate_baselines.json");
        let e = BaselineFile::parse(br#"{"version": 9, "entries": []}"#, named)
            .unwrap_err()
            .to_string();
        assert!(e.contains("version 9") && e.contains("main:results"), "{e}");
        assert_eq!(
            BaselineFile::parse(serde_json::to_string(&f).unwrap().as_bytes(), named).unwrap(),
            f
        );
        let e = KbFile::parse(b"[1]", named).unwrap_err().to_string();
        assert!(
            e.contains("main:results") && e.contains("kernelgate baseline"),
            "{e}"
        );
    }

    #[test]
    fn staleness() {
        let stored: Vec<f64> = (0..40).map(|i| 1.0 + (i % 5) as f64 * 0.001).collect();
        let e = entry("level1/19_ReLU.py", "aaa", key("2.11.0"), stored.clone());
        assert!(matches!(
            stale_check(&stored, &e, 2.0).unwrap(),
            Staleness::Fresh { .. }
        ));
        let slower: Vec<f64> = stored.iter().map(|x| x * 1.08).collect();
        match stale_check(&slower, &e, 2.0).unwrap() {
            Staleness::Stale { ratio, message, .. } => {
                assert!((ratio - 1.08).abs() < 1e-9);
                assert!(
                    message.contains("+8.0%")
                        && message.contains("kernelgate baseline --problem level1/19_ReLU.py"),
                    "{message}"
                );
            }
            x => panic!("{x:?}"),
        }
        // Without stored samples (imported from KernelBench): the median CI decides.
        let mut bare = e.clone();
        bare.samples_ms.clear();
        assert!(matches!(
            stale_check(&slower, &bare, 2.0).unwrap(),
            Staleness::Stale { .. }
        ));
        assert!(matches!(
            stale_check(&stored, &bare, 2.0).unwrap(),
            Staleness::Fresh { .. }
        ));
    }

    fn around(center: f64, n: usize) -> Vec<f64> {
        // A tight symmetric spread of +-0.2% around `center`.
        (0..n)
            .map(|i| center * (1.0 + ((i % 5) as f64 - 2.0) * 0.001))
            .collect()
    }

    #[test]
    fn kernelbench_entries_compare_by_their_noise_band() {
        let kb = |mean: f64, std: f64| KbEntry {
            mean,
            std,
            min: mean,
            max: mean,
            num_trials: 100,
            hardware: "NVIDIA H200".into(),
            device: "cuda:0".into(),
        };
        let tight = kb(2.66, 0.0199);
        let v = |live: f64, e: &KbEntry| compare_with_kb(&around(live, 40), e, 2.0).unwrap();
        assert_eq!(v(2.66, &tight).verdict, Verdict::Unchanged);
        // 1.5% away: within the 2% threshold.
        assert_eq!(v(2.66 * 1.015, &tight).verdict, Verdict::Unchanged);
        let slow = v(2.66 * 1.09, &tight);
        assert_eq!(slow.verdict, Verdict::Slower);
        assert!(
            (slow.ratio - 1.09).abs() < 1e-9 && slow.ci95.0 > 1.0,
            "{slow:?}"
        );
        assert_eq!(v(2.66 / 1.09, &tight).verdict, Verdict::Faster);
        // A noisy stored entry (std 8% of the mean) widens the band beyond the threshold.
        let noisy = kb(2.66, 0.21);
        assert_eq!(v(2.66 * 1.09, &noisy).verdict, Verdict::Unchanged);
        assert_eq!(v(2.66 * 1.25, &noisy).verdict, Verdict::Slower);
        // A noisy live series (median CI wider than the gap) is never called different.
        let mut wide: Vec<f64> = (0..12).map(|i| 2.66 * (0.8 + 0.05 * i as f64)).collect();
        wide.push(2.66 * 1.09);
        assert_eq!(
            compare_with_kb(&wide, &tight, 2.0).unwrap().verdict,
            Verdict::Unchanged
        );
        match stale_check_kb(&around(2.66 * 1.09, 40), &tight, "level1/19_ReLU", 2.0).unwrap() {
            Staleness::Stale { message, .. } => assert!(
                message.contains("+9.0%")
                    && message.contains("KernelBench-format")
                    && message.contains("kernelgate baseline --problem level1/19_ReLU"),
                "{message}"
            ),
            x => panic!("{x:?}"),
        }
        assert!(matches!(
            stale_check_kb(&around(2.66, 40), &tight, "level1/19_ReLU", 2.0).unwrap(),
            Staleness::Fresh { .. }
        ));
        assert!(compare_with_kb(&around(1.0, 5), &kb(0.0, 0.0), 2.0).is_err());
    }

    #[test]
    fn live_against_stored_samples_uses_the_rank_test() {
        let e = entry("level1/19_ReLU.py", "aaa", key("2.11.0"), around(1.0, 40));
        let v = |live: Vec<f64>| compare_with_entry(&live, &e, 2.0).unwrap();
        assert_eq!(v(around(1.0, 40)).verdict, Verdict::Unchanged);
        let slow = v(around(1.12, 40));
        assert_eq!(slow.verdict, Verdict::Slower);
        assert!((slow.ratio - 1.12).abs() < 1e-9);
        assert_eq!(v(around(0.8, 40)).verdict, Verdict::Faster);
        // 1% slower, significant but under the threshold.
        assert_eq!(v(around(1.01, 40)).verdict, Verdict::Unchanged);
        // A median 12% slower, but so noisy that it overlaps the stored series: never `Slower`.
        let noisy = v(vec![0.99, 1.12, 1.5, 0.998, 1.3]);
        assert!(noisy.ratio > 1.1, "{noisy:?}");
        assert_eq!(noisy.verdict, Verdict::Unchanged);
    }

    /// KernelBench's two real baseline files (H100, Modal), kept in the repository so this test
    /// always runs.
    fn kernelbench_dir() -> PathBuf {
        let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernelbench");
        assert!(d.is_dir(), "{} is missing", d.display());
        d
    }

    #[test]
    fn reads_real_kernelbench_files_and_writes_them_back_identically() {
        let d = kernelbench_dir();
        for name in [
            "baseline_time_torch.H100_Modal.json",
            "baseline_time_torch_compile_inductor_default.H100_Modal.json",
        ] {
            let p = d.join(name);
            let f = KbFile::load(&p).unwrap();
            assert_eq!(f.0.len(), 3, "{name}: level1..3");
            assert_eq!(f.len(), 250, "{name}");
            let e = f.get("level1", "19_ReLU.py").expect("19_ReLU.py");
            assert_eq!(e.hardware, "NVIDIA H100 80GB HBM3");
            assert_eq!(e.device, "cuda:0");
            assert_eq!(e.num_trials, 100);
            assert!(e.min <= e.mean && e.mean <= e.max);
            // Our writer reproduces their values and order: re-reading gives the same JSON value.
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join(name);
            f.save(&out).unwrap();
            let theirs: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let ours: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
            assert_eq!(theirs, ours, "{name}");
            // Same problem order as theirs (by id within each level).
            let keys = |t: &str| -> Vec<String> {
                t.lines()
                    .filter(|l| l.starts_with("        \"") && !l.starts_with("         "))
                    .map(|l| l.trim().to_string())
                    .collect()
            };
            let their_text = std::fs::read_to_string(&p).unwrap();
            let our_text = std::fs::read_to_string(&out).unwrap();
            assert_eq!(keys(&their_text).len(), 250);
            assert_eq!(keys(&their_text), keys(&our_text), "{name}: order");
        }
        let eager = KbFile::load(&d.join("baseline_time_torch.H100_Modal.json")).unwrap();
        let e = eager
            .get("level1", "1_Square_matrix_multiplication_.py")
            .unwrap();
        assert_eq!((e.mean, e.std, e.min, e.max), (2.66, 0.0199, 2.65, 2.86));
    }
}

//! One history record: a kernel's or a reference's time on one commit and hardware, and where
//! records come from (a `kernelgate pr` report, or the baseline files of `kernelgate baseline`).

use kernelgate_model::{Efficiency, Precision};
use kernelgate_report::{Interval, Report, Verdict};
use kernelgate_timing::baseline::{BaselineEntry, BaselineFile, Variant};
use serde::{Deserialize, Serialize};

/// The commit a run measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// Full commit id.
    pub sha: String,
    /// Committer date, RFC 3339 in UTC (`2026-10-01T10:00:00Z`).
    pub date: String,
    /// First line of the message (untrusted text: rendered inert).
    #[serde(default)]
    pub subject: String,
}

/// What a series times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesKind {
    /// A candidate kernel file.
    Kernel,
    /// The problem's eager PyTorch `Model`.
    Eager,
    /// `torch.compile(Model)`.
    Compile,
}

impl SeriesKind {
    /// The series name of a reference (a kernel's name is its path).
    pub fn reference_name(self) -> Option<&'static str> {
        match self {
            SeriesKind::Kernel => None,
            SeriesKind::Eager => Some("eager"),
            SeriesKind::Compile => Some("torch.compile"),
        }
    }
}

/// One kernel's or one reference's time on one commit and hardware.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub commit: String,
    pub date: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// The device the series was timed on: the GPU's name, or the CPU model for host timings.
    pub device: String,
    pub precision: Precision,
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub cuda: String,
    #[serde(default)]
    pub torch: String,
    /// Problem key, `level1/19_ReLU.py`.
    pub problem: String,
    pub kind: SeriesKind,
    /// The kernel's path, or `eager` / `torch.compile`.
    pub name: String,
    /// Median time (ms); `None` when the kernel ran but was not timed (it failed).
    pub median_ms: Option<f64>,
    /// 95% confidence interval of the median (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_ms: Option<(f64, f64)>,
    /// Whether the kernel was correct (references: always).
    pub correct: bool,
    /// The gate's verdict on the kernel (`None` for references and baseline files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// The op audit's custom share, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_share: Option<f64>,
    /// Eager reference time / this kernel's time, with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_eager: Option<Interval>,
    /// How close the kernel came to the device's limit (a GPU row of a `pr` report; `None` for
    /// references, host rows, baseline files and records written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<Efficiency>,
}

impl Record {
    /// The slot a record fills: one per commit, problem, series and hardware.
    pub fn slot(&self) -> (&str, &str, SeriesKind, &str, &str, Precision) {
        (
            &self.commit,
            &self.problem,
            self.kind,
            &self.name,
            &self.device,
            self.precision,
        )
    }

    /// Timed and correct: a point the drift test and the fastest-kernel table may use.
    pub fn usable(&self) -> bool {
        self.correct && self.median_ms.is_some_and(|m| m.is_finite() && m > 0.0)
    }
}

fn known(s: &str) -> bool {
    !s.is_empty() && s != "none" && s != "unknown"
}

/// The records of a `kernelgate pr` (or `merge`) report: one per evaluated kernel row and one
/// per (problem, device) reference it timed. Skipped and unevaluated rows give none.
pub fn from_report(report: &Report, commit: &Commit) -> Vec<Record> {
    let hw = &report.run.hardware;
    let default_device = if known(&hw.gpu) { &hw.gpu } else { &hw.cpu };
    let mut out: Vec<Record> = Vec::new();
    for row in &report.kernels {
        if row.verdict == Verdict::Skipped || (row.time_spent.is_none() && row.time_ms.is_none()) {
            continue;
        }
        let device = row
            .device
            .clone()
            .filter(|d| known(d))
            .unwrap_or_else(|| default_device.clone());
        if !known(&device) {
            continue;
        }
        let host = device != hw.gpu;
        let base = Record {
            commit: commit.sha.clone(),
            date: commit.date.clone(),
            subject: commit.subject.clone(),
            device: device.clone(),
            precision: row.precision,
            driver: if host {
                "none".into()
            } else {
                hw.driver.clone()
            },
            cuda: if host { "none".into() } else { hw.cuda.clone() },
            torch: hw.torch.clone(),
            problem: row.problem.clone(),
            kind: SeriesKind::Kernel,
            name: row.path.clone(),
            median_ms: row.time_ms,
            ci_ms: row.time_ci_ms,
            correct: row.is_correct(),
            verdict: Some(row.verdict),
            custom_share: row.audit.as_ref().and_then(|a| a.custom_share),
            speedup_eager: row.speedup_eager,
            efficiency: row.efficiency,
        };
        for (kind, ms, ci) in [
            (SeriesKind::Eager, row.reference_ms, row.reference_ci_ms),
            (SeriesKind::Compile, row.compiled_ms, None),
        ] {
            let Some(ms) = ms else { continue };
            let name = kind.reference_name().unwrap_or_default();
            let seen = out.iter().any(|r| {
                r.kind == kind
                    && r.problem == base.problem
                    && r.device == base.device
                    && r.precision == base.precision
            });
            if !seen {
                out.push(Record {
                    kind,
                    name: name.into(),
                    median_ms: Some(ms),
                    ci_ms: ci,
                    correct: true,
                    verdict: None,
                    custom_share: None,
                    speedup_eager: None,
                    efficiency: None,
                    ..base.clone()
                });
            }
        }
        out.push(base);
    }
    out
}

/// The records of committed baseline files (`kernelgate_baselines.json` for references,
/// `kernelgate_kernels.json` for accepted kernels): accepted kernels are correct by construction;
/// a kernel's speedup is the eager median over its median, with the conservative interval.
pub fn from_baselines(files: &[BaselineFile], commit: &Commit) -> Vec<Record> {
    let entries: Vec<&BaselineEntry> = files.iter().flat_map(|f| &f.entries).collect();
    let eager_of = |e: &BaselineEntry| {
        entries.iter().find(|r| {
            r.variant == Variant::Eager
                && r.problem == e.problem
                && r.hardware == e.hardware
                && r.l2 == e.l2
        })
    };
    entries
        .iter()
        .map(|e| {
            let kind = match e.variant {
                Variant::Eager => SeriesKind::Eager,
                Variant::Compile => SeriesKind::Compile,
                Variant::Kernel => SeriesKind::Kernel,
            };
            let speedup_eager = (kind == SeriesKind::Kernel)
                .then(|| eager_of(e))
                .flatten()
                .map(|r| {
                    let (rlo, rhi) = r.stats.ci95_median;
                    let (lo, hi) = e.stats.ci95_median;
                    Interval::new(r.stats.median / e.stats.median, rlo / hi, rhi / lo)
                });
            Record {
                commit: commit.sha.clone(),
                date: commit.date.clone(),
                subject: commit.subject.clone(),
                device: e.hardware.gpu.clone(),
                precision: e.hardware.precision,
                driver: e.hardware.driver.clone(),
                cuda: e.hardware.cuda.clone(),
                torch: e.hardware.torch.clone(),
                problem: e.problem.clone(),
                kind,
                name: e
                    .kernel
                    .clone()
                    .or_else(|| kind.reference_name().map(String::from))
                    .unwrap_or_default(),
                median_ms: Some(e.stats.median),
                ci_ms: Some(e.stats.ci95_median),
                correct: true,
                verdict: None,
                custom_share: None,
                speedup_eager,
                efficiency: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_model::{Backend, Bound};
    use kernelgate_report::{Change, KernelRow, OutcomeKind, OutcomeSummary};

    fn commit() -> Commit {
        Commit {
            sha: "a".repeat(40),
            date: "2026-10-01T10:00:00Z".into(),
            subject: "s".into(),
        }
    }

    fn relu_efficiency() -> Efficiency {
        Efficiency {
            pct: 77.2,
            bound: Bound::Memory,
            achieved: 3705.6,
            peak: 4800.0,
            precision: Precision::Fp32,
        }
    }

    /// A report of one timed, correct GPU row with a reference time.
    fn gpu_report(efficiency: Option<Efficiency>) -> Report {
        let mut report: Report = serde_json::from_value(serde_json::json!({
            "schema": kernelgate_report::SCHEMA,
            "run": {"hardware": {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0",
                                 "torch": "2.11.0", "cpu": "AMD EPYC"}},
        }))
        .unwrap();
        let mut row = KernelRow::new(
            "kernels/relu.py",
            "level1/19_ReLU.py",
            Backend::Cuda,
            Precision::Fp32,
            Change::Added,
            OutcomeSummary::new(OutcomeKind::Correct, ""),
        );
        row.time_ms = Some(0.05);
        row.reference_ms = Some(0.06);
        row.efficiency = efficiency;
        report.kernels.push(row);
        report
    }

    #[test]
    fn a_gpu_rows_efficiency_is_recorded_for_the_kernel_only() {
        let records = from_report(&gpu_report(Some(relu_efficiency())), &commit());
        let kernel = records
            .iter()
            .find(|r| r.kind == SeriesKind::Kernel)
            .unwrap();
        assert_eq!(kernel.efficiency, Some(relu_efficiency()));
        let eager = records
            .iter()
            .find(|r| r.kind == SeriesKind::Eager)
            .unwrap();
        assert_eq!(eager.efficiency, None, "a reference has no efficiency");
    }

    #[test]
    fn efficiency_round_trips_and_is_left_out_when_unknown() {
        let with = from_report(&gpu_report(Some(relu_efficiency())), &commit())
            .pop()
            .unwrap();
        let line = serde_json::to_string(&with).unwrap();
        let json: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(json["efficiency"]["pct"], 77.2);
        assert_eq!(json["efficiency"]["bound"], "memory");
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), with);

        let without = from_report(&gpu_report(None), &commit()).pop().unwrap();
        let line = serde_json::to_string(&without).unwrap();
        assert!(!line.contains("efficiency"), "{line}");
    }

    #[test]
    fn a_record_written_before_efficiency_still_loads() {
        // A line as the store held it before the field existed.
        let old = r#"{"commit":"0123456789abcdef0123456789abcdef01234567","date":"2026-10-01T10:00:00Z","device":"NVIDIA H200","precision":"fp32","driver":"580","cuda":"13.0","torch":"2.11.0","problem":"level1/19_ReLU.py","kind":"kernel","name":"kernels/relu.py","median_ms":0.05,"ci_ms":[0.049,0.051],"correct":true,"verdict":"pass"}"#;
        let r: Record = serde_json::from_str(old).unwrap();
        assert_eq!(r.efficiency, None);
        assert_eq!(r.median_ms, Some(0.05));
        assert!(r.usable());
    }
}

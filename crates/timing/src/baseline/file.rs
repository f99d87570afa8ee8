//! kernelgate's baseline files (`kernelgate_baselines.json`, `kernelgate_kernels.json`): one
//! entry per problem, variant, kernel, hardware key and L2 mode, with its samples.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{read_json, write_json, BaselineError, HardwareKey, FORMAT_VERSION};
use crate::stats::SeriesStats;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::fixtures::{entry, key};
    use crate::baseline::{KbFile, BASELINES_FILE};

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
}

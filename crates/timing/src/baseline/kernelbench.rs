//! KernelBench's baseline format: `{"level1": {"19_ReLU.py": entry}}`, written as their
//! scripts write it, so each side reads the other's files.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{read_json, write_json, BaselineError};
use crate::stats::SeriesStats;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::KB_EAGER_FILE;
    use std::path::PathBuf;

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

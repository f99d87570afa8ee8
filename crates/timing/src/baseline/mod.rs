//! Baseline files: KernelBench's own format (so their scripts read ours and ours read theirs)
//! and kernelgate's richer file keyed by hardware and problem hash. One concept per module:
//! [`hardware_key`] (what a timing is comparable with), [`kernelbench`] (their format), [`file`]
//! (ours), [`stale`] (a live series against a stored one).

use std::path::{Path, PathBuf};

use serde::Serialize;

mod file;
mod hardware_key;
mod kernelbench;
mod stale;

pub use file::{BaselineEntry, BaselineFile, Lookup, Query, Variant, Work};
pub use hardware_key::{hardware_dir_name, hardware_label, HardwareKey};
pub use kernelbench::{KbEntry, KbFile, ProblemFile};
pub use stale::{
    compare_with_entry, compare_with_kb, stale_check, stale_check_kb, Staleness, VsStored,
};

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

/// What the modules' tests share: a hardware key and an eager entry of it.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::stats::SeriesStats;
    use kernelgate_model::Precision;

    pub(crate) fn key(torch: &str) -> HardwareKey {
        HardwareKey {
            gpu: "NVIDIA H200".into(),
            driver: "580.95".into(),
            cuda: "13.0".into(),
            torch: torch.into(),
            precision: Precision::Fp32,
        }
    }

    pub(crate) fn entry(
        problem: &str,
        sha: &str,
        k: HardwareKey,
        samples: Vec<f64>,
    ) -> BaselineEntry {
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
}

//! Timing you can gate on: statistics of timed series, verdicts that do not cry wolf,
//! escaped-work and plausibility checks, and baseline files (KernelBench's and ours).
//!
//! Pure Rust, no GPU: the measuring itself happens in the harness extension (`timer.rs`,
//! `kg_timing.py`), which hands back [`Sample`]s.

pub mod baseline;
pub mod compare;
pub mod integrity;
pub mod plausibility;
pub mod sample;
pub mod stats;

pub use baseline::{
    hardware_dir_name, stale_check, BaselineEntry, BaselineError, BaselineFile, HardwareKey,
    KbEntry, KbFile, Lookup, Query, Staleness, Variant, Work,
};
pub use compare::{compare, mann_whitney_p, Comparison, Verdict};
pub use integrity::{input_reuse, reference_tampered};
pub use plausibility::{
    check_plausibility, efficiency, floor_ms, DeviceSpec, DEFAULT_EXCESSIVE_SPEEDUP,
};
pub use sample::{escaped_work, Sample, Series};
pub use stats::{median, SeriesStats};

/// Default verdict threshold in percent.
pub const DEFAULT_THRESHOLD_PCT: f64 = 2.0;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimingError {
    #[error("no timing samples: the series is empty (did every timed call fail?)")]
    EmptySeries,
    #[error("timing sample {0} is not a finite number of milliseconds")]
    NonFinite(f64),
    #[error("a median time of zero or less cannot be compared (clock resolution too coarse?)")]
    NonPositiveMedian,
    #[error("threshold {0}% is not a non-negative percentage")]
    BadThreshold(f64),
}

//! Baselines on the repository's side, one concept per module; the files themselves (formats,
//! the hardware key, the comparison with a stored series) are `kernelgate_timing::baseline`.
//! - [`record`]: `kernelgate baseline` times the references and accepted kernels on this machine
//!   and writes `results/timing/<HARDWARE>/` ([`record()`]; [`plan`] says what it would time).
//! - [`judge`]: `kernelgate pr` reads them from the base commit and judges a run against them.

pub mod judge;
pub mod record;

pub use record::*;

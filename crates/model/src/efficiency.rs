//! How close a GPU row comes to the hardware's limit: computed once by
//! `kernelgate_timing::efficiency`, carried by the eval result and the report row, shown by the
//! comment (docs/report-format.md#efficiency).

use crate::Precision;
use serde::{Deserialize, Serialize};

/// The limit that bounds a problem's work on its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Moving the problem's bytes at the memory bandwidth takes longest.
    Memory,
    /// Doing the problem's FLOPs at the arithmetic peak for its precision takes longest.
    Compute,
}

impl Bound {
    /// The unit of [`Efficiency::achieved`] and [`Efficiency::peak`].
    pub fn unit(self) -> &'static str {
        match self {
            Bound::Memory => "GB/s",
            Bound::Compute => "TFLOP/s",
        }
    }
}

/// The share of the physical limit a candidate reaches, and the rate it achieves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    /// The limit's time over the candidate's median, in percent (100: at the limit).
    pub pct: f64,
    pub bound: Bound,
    /// The rate the candidate achieves, in [`Bound::unit`]: bytes moved per second (GB/s) or
    /// FLOPs done per second (TFLOP/s).
    pub achieved: f64,
    /// The limit, in the same unit: the device's bandwidth, or its peak for `precision`.
    pub peak: f64,
    /// The precision whose peak applies (fp32: CUDA cores, no tensor cores).
    pub precision: Precision,
}

impl Efficiency {
    /// `77% of memory bandwidth`, `41% of bf16 peak`: the comment's cell.
    pub fn label(&self) -> String {
        match self.bound {
            Bound::Memory => format!("{:.0}% of memory bandwidth", self.pct),
            Bound::Compute => format!("{:.0}% of {} peak", self.pct, self.precision),
        }
    }

    /// `3701 GB/s of 4800 GB/s (memory-bound)`: the achieved rate against the limit.
    pub fn detail(&self) -> String {
        let unit = self.bound.unit();
        let (achieved, peak) = match self.bound {
            Bound::Memory => (format!("{:.0}", self.achieved), format!("{:.0}", self.peak)),
            Bound::Compute => (format!("{:.1}", self.achieved), format!("{:.1}", self.peak)),
        };
        let bound = match self.bound {
            Bound::Memory => "memory-bound".to_string(),
            Bound::Compute if self.precision == Precision::Fp32 => {
                "compute-bound, fp32 on CUDA cores".to_string()
            }
            Bound::Compute => format!("compute-bound, {} tensor cores", self.precision),
        };
        format!("{achieved} {unit} of {peak} {unit} ({bound})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_and_detail_name_the_limit() {
        let relu = Efficiency {
            pct: 77.2,
            bound: Bound::Memory,
            achieved: 3705.6,
            peak: 4800.0,
            precision: Precision::Fp32,
        };
        assert_eq!(relu.label(), "77% of memory bandwidth");
        assert_eq!(relu.detail(), "3706 GB/s of 4800 GB/s (memory-bound)");
        let mm = Efficiency {
            pct: 41.0,
            bound: Bound::Compute,
            achieved: 405.5,
            peak: 989.0,
            precision: Precision::Bf16,
        };
        assert_eq!(mm.label(), "41% of bf16 peak");
        assert_eq!(
            mm.detail(),
            "405.5 TFLOP/s of 989.0 TFLOP/s (compute-bound, bf16 tensor cores)"
        );
        let json = serde_json::to_value(mm).unwrap();
        assert_eq!(json["bound"], "compute");
        assert_eq!(json["precision"], "bf16");
    }
}

//! Physical plausibility: no kernel beats the memory system or the arithmetic units.

use kernelgate_model::{Bound, Efficiency, Finding, Precision, Severity};
use serde::{Deserialize, Serialize};

pub const DEFAULT_EXCESSIVE_SPEEDUP: f64 = 10.0;
pub const RULE_BELOW_FLOOR: &str = "timing/below-physical-floor";
pub const RULE_EXCESSIVE_SPEEDUP: &str = "timing/excessive-speedup";

/// Lower bound on a kernel's time in ms: the larger of moving `bytes_moved` at
/// `bandwidth_gbs` (GB/s, 1e9) and doing `flops` at `peak_tflops` (1e12/s). A zero or unknown
/// rate drops that term.
pub fn floor_ms(bytes_moved: f64, flops: f64, bandwidth_gbs: f64, peak_tflops: f64) -> f64 {
    let mem = if bandwidth_gbs > 0.0 {
        bytes_moved / (bandwidth_gbs * 1e9)
    } else {
        0.0
    };
    let math = if peak_tflops > 0.0 {
        flops / (peak_tflops * 1e12)
    } else {
        0.0
    };
    mem.max(math) * 1e3
}

/// How close `time_ms` comes to the limit of moving `bytes_moved` at `bandwidth_gbs` and doing
/// `flops` at `peak_tflops` (the peak for `precision`, [`DeviceSpec::peak_tflops_for`]): the one
/// computation behind every row's efficiency. `None` when no limit is known or the time is not
/// a positive number.
pub fn efficiency(
    bytes_moved: f64,
    flops: f64,
    bandwidth_gbs: f64,
    peak_tflops: f64,
    precision: Precision,
    time_ms: f64,
) -> Option<Efficiency> {
    let memory_ms = floor_ms(bytes_moved, 0.0, bandwidth_gbs, 0.0);
    let compute_ms = floor_ms(0.0, flops, 0.0, peak_tflops);
    let limit_ms = memory_ms.max(compute_ms);
    if !(limit_ms > 0.0 && limit_ms.is_finite() && time_ms > 0.0 && time_ms.is_finite()) {
        return None;
    }
    let seconds = time_ms * 1e-3;
    let (bound, achieved, peak) = if memory_ms >= compute_ms {
        (Bound::Memory, bytes_moved / seconds / 1e9, bandwidth_gbs)
    } else {
        (Bound::Compute, flops / seconds / 1e12, peak_tflops)
    };
    Some(Efficiency {
        pct: limit_ms / time_ms * 100.0,
        bound,
        achieved,
        peak,
        precision,
    })
}

/// Published peaks of a device: the floor uses the fastest path (dense bf16 tensor cores), so
/// a precision downgrade is caught elsewhere rather than reported as an impossible time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    pub bandwidth_gbs: f64,
    /// Dense fp16/bf16 tensor-core peak, TFLOP/s.
    pub peak_tflops: f64,
    /// fp32 on CUDA cores, TFLOP/s: fp32 problems may not use TF32 tensor cores (KG502), so
    /// this is their efficiency's peak.
    #[serde(default)]
    pub fp32_tflops: f64,
}

impl DeviceSpec {
    /// Datasheet numbers for GPUs seen on runners, by `torch.cuda.get_device_name()`.
    pub fn lookup(gpu_name: &str) -> Option<DeviceSpec> {
        let n = gpu_name.to_ascii_uppercase();
        // (bandwidth GB/s, dense bf16 tensor TFLOP/s, fp32 CUDA-core TFLOP/s), SXM parts
        // unless named.
        let (bw, tf, fp32) = if n.contains("H200") {
            (4800.0, 989.0, 67.0)
        } else if n.contains("H100") && n.contains("PCIE") {
            (2000.0, 756.0, 51.0)
        } else if n.contains("H100") {
            (3350.0, 989.0, 67.0)
        } else if n.contains("B200") {
            (8000.0, 2250.0, 75.0)
        } else if n.contains("A100") {
            (2039.0, 312.0, 19.5)
        } else if n.contains("L40S") {
            (864.0, 362.0, 91.6)
        } else if n.contains("L4") {
            (300.0, 121.0, 30.3)
        } else if n.contains("A10") {
            (600.0, 125.0, 31.2)
        } else {
            return None;
        };
        Some(DeviceSpec {
            bandwidth_gbs: bw,
            peak_tflops: tf,
            fp32_tflops: fp32,
        })
    }

    /// The arithmetic peak a kernel of `precision` may reach: fp32 on CUDA cores, fp16 and bf16
    /// on tensor cores.
    pub fn peak_tflops_for(&self, precision: Precision) -> f64 {
        match precision {
            Precision::Fp32 => self.fp32_tflops,
            Precision::Fp16 | Precision::Bf16 => self.peak_tflops,
        }
    }

    /// The spec with its bandwidth raised to a measured one when that is higher (never lowered:
    /// a floor must stay a lower bound).
    pub fn with_measured_bandwidth(self, measured_gbs: Option<f64>) -> DeviceSpec {
        DeviceSpec {
            bandwidth_gbs: self.bandwidth_gbs.max(measured_gbs.unwrap_or(0.0)),
            ..self
        }
    }
}

/// Findings for a candidate time below the floor (error) or a speedup above `excessive_speedup`
/// (warning: it can be honest against a poor reference, but deserves a human look).
pub fn check_plausibility(
    file: &str,
    candidate_ms: f64,
    floor: Option<f64>,
    speedup: Option<f64>,
    excessive_speedup: f64,
) -> Vec<Finding> {
    let mk =
        |rule: &str, severity, message: String| Finding::runtime(file, rule, severity, message);
    let mut out = Vec::new();
    if let Some(f) = floor.filter(|f| *f > 0.0) {
        if candidate_ms < f {
            out.push(mk(
                RULE_BELOW_FLOOR,
                Severity::Error,
                format!(
                    "{candidate_ms:.4} ms is below the physical floor of {f:.4} ms for the bytes this problem must \
                     move and the FLOPs it must do on this device: the kernel skips work or escapes the timer"
                ),
            ));
        }
    }
    if let Some(s) = speedup {
        if s > excessive_speedup {
            out.push(mk(
                RULE_EXCESSIVE_SPEEDUP,
                Severity::Warning,
                format!(
                    "speedup {s:.1}x exceeds {excessive_speedup}x: check the kernel does all the work the reference \
                     does (set timing.excessive_speedup to change the limit)"
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_by_hand() {
        // ReLU 4096 x 393216 fp32: read + write 2 * 4096*393216*4 B = 12.88 GB at 4800 GB/s = 2.684 ms.
        let bytes = 2.0 * 4096.0 * 393216.0 * 4.0;
        let f = floor_ms(bytes, 0.0, 4800.0, 989.0);
        assert!((f - 2.684354560).abs() < 1e-6, "{f}");
        // 8192^3 matmul: 2*8192^3 = 1.0995e12 FLOP at 989 TFLOP/s = 1.1117 ms (bytes negligible).
        let f = floor_ms(
            3.0 * 8192.0 * 8192.0 * 2.0,
            2.0 * 8192f64.powi(3),
            4800.0,
            989.0,
        );
        assert!((f - 1.111741).abs() < 1e-5, "{f}");
        assert_eq!(floor_ms(1e9, 1e12, 0.0, 0.0), 0.0);
    }

    #[test]
    fn efficiency_of_a_bandwidth_bound_relu() {
        // ReLU 4096 x 393216 fp32 on an H200: 12.88 GB at 4800 GB/s is 2.684 ms; at 3.484 ms
        // the kernel moves 3698 GB/s, 77% of the bandwidth.
        let h200 = DeviceSpec::lookup("NVIDIA H200").unwrap();
        let bytes = 2.0 * 4096.0 * 393216.0 * 4.0;
        let e = efficiency(
            bytes,
            0.0,
            h200.bandwidth_gbs,
            h200.peak_tflops_for(Precision::Fp32),
            Precision::Fp32,
            3.484,
        )
        .unwrap();
        assert_eq!(e.bound, Bound::Memory);
        assert!((e.pct - 2.684354560 / 3.484 * 100.0).abs() < 1e-9, "{e:?}");
        assert!((e.achieved - bytes / 3.484e-3 / 1e9).abs() < 1e-6, "{e:?}");
        assert_eq!(e.peak, 4800.0);
        assert_eq!(e.label(), "77% of memory bandwidth");
    }

    #[test]
    fn efficiency_of_a_flop_bound_matmul_uses_the_precisions_peak() {
        // 8192^3 matmul: 1.0995e12 FLOP. In bf16 at 2.2234 ms it does 494.5 TFLOP/s, half of
        // 989; in fp32 the same time is 7.4x the CUDA-core peak of 67.
        let h200 = DeviceSpec::lookup("NVIDIA H200").unwrap();
        let flops = 2.0 * 8192f64.powi(3);
        let bytes = 3.0 * 8192.0 * 8192.0 * 2.0;
        let bf16 = efficiency(
            bytes,
            flops,
            h200.bandwidth_gbs,
            h200.peak_tflops_for(Precision::Bf16),
            Precision::Bf16,
            2.223482,
        )
        .unwrap();
        assert_eq!(bf16.bound, Bound::Compute);
        assert!((bf16.pct - 50.0).abs() < 1e-3, "{bf16:?}");
        assert!((bf16.achieved - 494.5).abs() < 1e-2, "{bf16:?}");
        assert_eq!(bf16.peak, 989.0);
        assert_eq!(bf16.label(), "50% of bf16 peak");
        let fp32 = efficiency(
            bytes * 2.0,
            flops,
            h200.bandwidth_gbs,
            h200.peak_tflops_for(Precision::Fp32),
            Precision::Fp32,
            20.0,
        )
        .unwrap();
        assert_eq!(fp32.bound, Bound::Compute);
        assert_eq!(fp32.peak, 67.0);
        assert!((fp32.pct - flops / 67e12 * 1e3 / 20.0 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn no_efficiency_without_a_limit_or_a_time() {
        // A CPU row has no bandwidth and no peak: no limit, no efficiency.
        assert_eq!(efficiency(1e9, 1e12, 0.0, 0.0, Precision::Fp32, 1.0), None);
        assert_eq!(
            efficiency(1e9, 0.0, 4800.0, 989.0, Precision::Fp32, 0.0),
            None
        );
        assert_eq!(
            efficiency(1e9, 0.0, 4800.0, 989.0, Precision::Fp32, f64::NAN),
            None
        );
    }

    #[test]
    fn flags() {
        let f = check_plausibility("k.py", 0.5, Some(1.0), Some(3.0), DEFAULT_EXCESSIVE_SPEEDUP);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, RULE_BELOW_FLOOR);
        assert_eq!(f[0].severity, Severity::Error);
        let f = check_plausibility(
            "k.py",
            2.0,
            Some(1.0),
            Some(12.0),
            DEFAULT_EXCESSIVE_SPEEDUP,
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, RULE_EXCESSIVE_SPEEDUP);
        assert!(check_plausibility("k.py", 2.0, Some(1.0), Some(9.9), 10.0).is_empty());
        assert!(check_plausibility("k.py", 2.0, None, None, 10.0).is_empty());
    }

    #[test]
    fn device_lookup_and_measured_bandwidth() {
        let h200 = DeviceSpec::lookup("NVIDIA H200").unwrap();
        assert_eq!(h200.bandwidth_gbs, 4800.0);
        assert!(DeviceSpec::lookup("Intel Xeon").is_none());
        assert_eq!(
            h200.with_measured_bandwidth(Some(4100.0)).bandwidth_gbs,
            4800.0
        );
        assert_eq!(
            h200.with_measured_bandwidth(Some(5000.0)).bandwidth_gbs,
            5000.0
        );
    }
}

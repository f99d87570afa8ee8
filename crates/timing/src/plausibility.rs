//! Physical plausibility: no kernel beats the memory system or the arithmetic units.

use kernelgate_model::{Finding, Severity};
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

/// Published peaks of a device: the floor uses the fastest path (dense bf16 tensor cores), so
/// a precision downgrade is caught elsewhere rather than reported as an impossible time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    pub bandwidth_gbs: f64,
    pub peak_tflops: f64,
}

impl DeviceSpec {
    /// Datasheet numbers for GPUs seen on runners, by `torch.cuda.get_device_name()`.
    pub fn lookup(gpu_name: &str) -> Option<DeviceSpec> {
        let n = gpu_name.to_ascii_uppercase();
        let (bw, tf) = if n.contains("H200") {
            (4800.0, 989.0)
        } else if n.contains("H100") && n.contains("PCIE") {
            (2000.0, 756.0)
        } else if n.contains("H100") {
            (3350.0, 989.0)
        } else if n.contains("B200") {
            (8000.0, 2250.0)
        } else if n.contains("A100") {
            (2039.0, 312.0)
        } else if n.contains("L40S") {
            (864.0, 362.0)
        } else if n.contains("L4") {
            (300.0, 121.0)
        } else if n.contains("A10") {
            (600.0, 125.0)
        } else {
            return None;
        };
        Some(DeviceSpec {
            bandwidth_gbs: bw,
            peak_tflops: tf,
        })
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

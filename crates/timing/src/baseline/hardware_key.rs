//! What a timing is comparable with, and how its device names a folder and a label.

use std::fmt;

use kernelgate_model::Precision;
use serde::{Deserialize, Serialize};

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

/// `NVIDIA_H200 fp32`: the hardware a history series and its store file are named by.
pub fn hardware_label(device: &str, precision: Precision) -> String {
    format!("{} {precision}", hardware_dir_name(device))
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
}

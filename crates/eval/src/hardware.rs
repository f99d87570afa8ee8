//! The hardware key a timing is filed under: put together here and nowhere else.
//!
//! The Python side (`kg_timing.machine`, asked by the eval runner before the candidate is
//! imported and by the baseline's reference child) says what it knows: the GPU's name or the
//! CPU's model, torch and its CUDA. The driver comes from `nvidia-smi`, run here, outside the
//! sandbox (which lets a job execute only from its Python's prefix).

use kernelgate_model::Precision;
use kernelgate_timing::HardwareKey;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// What the harness's Python knows of the machine (`kg_timing.machine`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// `torch.cuda.get_device_name()`, or the CPU's model name (`cpu` when unknown).
    pub gpu: String,
    /// `str(torch.version.cuda)` on a GPU; `none` on the CPU.
    pub cuda: String,
    /// `torch.__version__`.
    pub torch: String,
}

impl Machine {
    /// Whether the Python ran on a GPU (`cuda` is `none` on the CPU).
    pub fn is_gpu(&self) -> bool {
        self.cuda != "none"
    }
}

/// The key timings on `machine` at `precision` are compared and stored under.
pub fn hardware_key(machine: &Machine, precision: Precision) -> HardwareKey {
    static DRIVER: OnceLock<String> = OnceLock::new();
    let driver = if machine.is_gpu() {
        DRIVER.get_or_init(driver_version).clone()
    } else {
        "none".to_string()
    };
    HardwareKey {
        gpu: machine.gpu.clone(),
        driver,
        cuda: machine.cuda.clone(),
        torch: machine.torch.clone(),
        precision,
    }
}

/// First line of `nvidia-smi --query-gpu=driver_version`, `unknown` without one.
fn driver_version() -> String {
    nvidia_smi(&["--query-gpu=driver_version", "--format=csv,noheader"])
        .and_then(|out| out.lines().next().map(|l| l.trim().to_string()))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// `nvidia-smi` with `args`: its stdout, or `None` without a driver (or when it fails). Every
/// question to the driver about the GPUs (count, compute capabilities, driver) goes through here.
pub fn nvidia_smi(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_machine_has_no_driver_and_keeps_what_python_said() {
        let m = Machine {
            gpu: "AMD EPYC 9654".into(),
            cuda: "none".into(),
            torch: "2.15.0+cpu".into(),
        };
        let k = hardware_key(&m, Precision::Fp16);
        assert_eq!(
            (k.gpu.as_str(), k.driver.as_str(), k.cuda.as_str()),
            ("AMD EPYC 9654", "none", "none")
        );
        assert_eq!(k.torch, "2.15.0+cpu");
        assert_eq!(k.precision, Precision::Fp16);
    }

    #[test]
    fn a_gpu_machine_gets_a_driver_from_nvidia_smi_or_unknown() {
        let m = Machine {
            gpu: "NVIDIA H200".into(),
            cuda: "13.0".into(),
            torch: "2.11.0+cu130".into(),
        };
        let k = hardware_key(&m, Precision::Fp32);
        assert_eq!(k.cuda, "13.0");
        assert_ne!(k.driver, "none", "a GPU key always names a driver");
        assert!(!k.driver.is_empty());
    }

    #[test]
    fn a_machine_with_a_field_the_protocol_lacks_is_refused() {
        let e = serde_json::from_str::<Machine>(
            r#"{"gpu": "cpu", "cuda": "none", "torch": "2.15", "driver": "forged"}"#,
        );
        assert!(e.is_err(), "unknown fields are a protocol error");
    }
}

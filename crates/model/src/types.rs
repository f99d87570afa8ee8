//! Precision and backend: the two properties of a kernel every stage needs.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Numeric precision a problem is evaluated in (KernelBench tolerances depend on it).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Fp32,
    Fp16,
    Bf16,
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::Fp32, Precision::Fp16, Precision::Bf16];

    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }

    /// KernelBench's atol = rtol for this precision.
    pub fn tolerance(self) -> f64 {
        match self {
            Precision::Fp32 => 1e-4,
            Precision::Fp16 | Precision::Bf16 => 1e-2,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "fp32" | "float32" => Ok(Precision::Fp32),
            "fp16" | "float16" | "half" => Ok(Precision::Fp16),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            other => Err(format!(
                "unknown precision `{other}` (expected fp32, fp16 or bf16)"
            )),
        }
    }
}

/// How a candidate implements its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cuda,
    Triton,
    Cpp,
    Hip,
    Cute,
    Tilelang,
    Thunderkittens,
}

impl Backend {
    pub const ALL: [Backend; 7] = [
        Backend::Cuda,
        Backend::Triton,
        Backend::Cpp,
        Backend::Hip,
        Backend::Cute,
        Backend::Tilelang,
        Backend::Thunderkittens,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Triton => "triton",
            Backend::Cpp => "cpp",
            Backend::Hip => "hip",
            Backend::Cute => "cute",
            Backend::Tilelang => "tilelang",
            Backend::Thunderkittens => "thunderkittens",
        }
    }

    /// True when the backend needs a GPU to run at all.
    pub fn needs_gpu(self) -> bool {
        !matches!(self, Backend::Cpp)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(s) || (s.eq_ignore_ascii_case("cutlass") && *b == Backend::Cute))
            .ok_or_else(|| {
                format!("unknown backend `{s}` (expected one of cuda, triton, cpp, hip, cute, tilelang, thunderkittens)")
            })
    }
}

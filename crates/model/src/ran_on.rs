//! The device a job ran on, as the harness labels it: `cpu`, or `cuda:<slot> (<GPU name>)`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a job ran. Serialised as the runner's label, so reports and results read as before.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum RanOn {
    /// The host's CPU (`cpu`).
    Cpu,
    /// A CUDA device: its slot among the visible ones and its name (`cuda:0 (NVIDIA H200)`).
    Cuda { slot: u32, name: Option<String> },
    /// A label this version does not know, kept as written.
    Other(String),
}

impl RanOn {
    pub fn parse(label: &str) -> RanOn {
        if label == "cpu" {
            return RanOn::Cpu;
        }
        let Some(rest) = label.strip_prefix("cuda") else {
            return RanOn::Other(label.to_string());
        };
        let (slot, name) = match rest.split_once(' ') {
            Some((slot, name)) => (slot, Some(name)),
            None => (rest, None),
        };
        let slot = match slot {
            "" => Some(0),
            s => s.strip_prefix(':').and_then(|n| n.parse().ok()),
        };
        let name = match name.map(|n| n.trim()) {
            None => Some(None),
            Some(n) => n
                .strip_prefix('(')
                .and_then(|n| n.strip_suffix(')'))
                .map(|n| Some(n.trim().to_string()).filter(|n| !n.is_empty())),
        };
        match (slot, name) {
            (Some(slot), Some(name)) => RanOn::Cuda { slot, name },
            _ => RanOn::Other(label.to_string()),
        }
    }

    pub fn is_cpu(&self) -> bool {
        matches!(self, RanOn::Cpu)
    }

    /// The GPU's name (`NVIDIA H200`); `None` on the CPU or when the label has none.
    pub fn gpu_name(&self) -> Option<&str> {
        match self {
            RanOn::Cuda { name, .. } => name.as_deref(),
            _ => None,
        }
    }

    /// The same device as the parent's slot `slot` (a child sees its one GPU as `cuda:0`).
    pub fn in_slot(self, slot: Option<u32>) -> RanOn {
        match (self, slot) {
            (RanOn::Cuda { name, .. }, Some(slot)) => RanOn::Cuda { slot, name },
            (other, _) => other,
        }
    }
}

impl fmt::Display for RanOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RanOn::Cpu => f.write_str("cpu"),
            RanOn::Cuda { slot, name: None } => write!(f, "cuda:{slot}"),
            RanOn::Cuda {
                slot,
                name: Some(name),
            } => write!(f, "cuda:{slot} ({name})"),
            RanOn::Other(label) => f.write_str(label),
        }
    }
}

impl From<String> for RanOn {
    fn from(label: String) -> RanOn {
        RanOn::parse(&label)
    }
}

impl From<RanOn> for String {
    fn from(d: RanOn) -> String {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_and_print_back_unchanged() {
        for label in [
            "cpu",
            "cuda:0 (NVIDIA H200)",
            "cuda:1 (NVIDIA A100-SXM4-80GB)",
            "cuda:0",
            "mps",
            "cuda:x (odd)",
        ] {
            assert_eq!(RanOn::parse(label).to_string(), label);
        }
        assert!(RanOn::parse("cpu").is_cpu());
        assert_eq!(
            RanOn::parse("cuda:0 (NVIDIA H200)").gpu_name(),
            Some("NVIDIA H200")
        );
        assert_eq!(RanOn::parse("cuda:0").gpu_name(), None);
        assert_eq!(RanOn::parse("cpu").gpu_name(), None);
        assert_eq!(RanOn::parse("mps"), RanOn::Other("mps".into()));
    }

    #[test]
    fn a_childs_slot_becomes_the_parents() {
        let child = RanOn::parse("cuda:0 (NVIDIA H200)");
        assert_eq!(
            child.clone().in_slot(Some(1)).to_string(),
            "cuda:1 (NVIDIA H200)"
        );
        assert_eq!(child.clone().in_slot(None), child);
        assert_eq!(RanOn::Cpu.in_slot(Some(1)), RanOn::Cpu);
    }

    #[test]
    fn serialised_as_the_label() {
        let d: RanOn = serde_json::from_str("\"cuda:0 (NVIDIA H200)\"").unwrap();
        assert_eq!(d.gpu_name(), Some("NVIDIA H200"));
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            "\"cuda:0 (NVIDIA H200)\""
        );
    }
}

//! The runtime op audit: what one untimed call of a candidate's forward really ran, written by
//! the harness (`kg_audit.py`), carried by the eval result and the report row, judged by the
//! policy (`[policy] custom_share_floor_pct / custom_share_warn_pct`, docs/policy.md).

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Who did a piece of the forward's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpClass {
    /// The candidate's own code: its extension, Triton, inline CUDA, custom ops.
    Custom,
    /// ATen's native implementation.
    Pytorch,
    /// A vendor library (cuBLAS, cuDNN, cuFFT, CUTLASS), launched by PyTorch or the candidate.
    Vendor,
    /// An extension call that did no work that counts: it returned a copy of its input or its
    /// result never reaches the output (a decoy).
    Ineffective,
}

impl OpClass {
    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::Custom => "custom",
            OpClass::Pytorch => "PyTorch",
            OpClass::Vendor => "vendor",
            OpClass::Ineffective => "ineffective",
        }
    }
}

/// Where the audit's times come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditClock {
    /// GPU kernel time (torch.profiler / CUPTI).
    Gpu,
    /// Host time of each op and extension call (CPU jobs).
    Cpu,
}

/// One op (or kernel group) and its share of the measured work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// `conv2d`, `addmm`, an extension function (`module.function`), a custom op or a kernel name.
    pub op: String,
    pub class: OpClass,
    /// `cuDNN`, `cuBLAS`, ... for vendor work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// The extension function that called this PyTorch / vendor op from its C++, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_extension: Option<String>,
    pub ms: f64,
    /// Fraction (0..1) of the audit's total measured time.
    #[serde(default)]
    pub share: Option<f64>,
    /// Op calls (CPU) or kernel launches (GPU).
    #[serde(default)]
    pub calls: u32,
}

/// One function of the candidate's extension and what the audit learned about its calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtensionCalls {
    pub function: String,
    pub calls: u32,
    /// Calls whose work does not count (`reason` says why).
    #[serde(default)]
    pub ineffective: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// False when a call was reached in a way the audit could not wrap (its result's lineage
    /// was not followed; its time still counts).
    #[serde(default = "yes")]
    pub checked: bool,
}

fn yes() -> bool {
    true
}

/// The audit of one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpAudit {
    pub clock: AuditClock,
    /// Measured work: custom + PyTorch + vendor + ineffective (ms).
    pub total_ms: f64,
    pub custom_ms: f64,
    /// custom / total, 0..1; `None` when nothing was measured.
    #[serde(default)]
    pub custom_share: Option<f64>,
    /// CPU only: Python between ops and extension calls (not part of the share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glue_ms: Option<f64>,
    /// Host wall time of the audited call (with the audit's own overhead).
    #[serde(default)]
    pub forward_ms: f64,
    /// Largest first.
    #[serde(default)]
    pub entries: Vec<AuditEntry>,
    #[serde(default)]
    pub extension_calls: Vec<ExtensionCalls>,
    #[serde(default)]
    pub extension_modules: Vec<String>,
    /// Distinct ATen ops the call dispatched (`aten.convolution.default`, ...).
    #[serde(default)]
    pub aten_ops: Vec<String>,
    /// The whole audit phase (ms): its cost per eval.
    #[serde(default)]
    pub audit_ms: f64,
}

impl OpAudit {
    /// Work not done by the candidate's effective custom code, largest first.
    pub fn left_to_pytorch(&self) -> impl Iterator<Item = &AuditEntry> {
        self.entries.iter().filter(|e| e.class != OpClass::Custom)
    }

    /// `conv2d → cuDNN 64%, addmm → PyTorch 12%` (at most `n` entries, then `+k more`).
    pub fn describe_left(&self, n: usize) -> String {
        let left: Vec<&AuditEntry> = self.left_to_pytorch().collect();
        let mut s = String::new();
        for (i, e) in left.iter().take(n).enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let who = match (e.class, &e.library) {
                (OpClass::Vendor, Some(lib)) => lib.clone(),
                (OpClass::Ineffective, _) => "no effect".to_string(),
                (c, _) => c.as_str().to_string(),
            };
            let _ = write!(s, "{} → {who} {:.0}%", e.op, e.share.unwrap_or(0.0) * 100.0);
            if let Some(by) = &e.by_extension {
                let _ = write!(s, " (called by {by})");
            }
        }
        if left.len() > n {
            let _ = write!(s, ", +{} more", left.len() - n);
        }
        s
    }

    /// Extension calls that did no work that counts: `ext.f (1 of 2 calls: returned a copy of
    /// its input)`.
    pub fn describe_ineffective(&self) -> String {
        self.extension_calls
            .iter()
            .filter(|c| c.ineffective > 0)
            .map(|c| {
                format!(
                    "{} ({} of {} call(s): {})",
                    c.function,
                    c.ineffective,
                    c.calls,
                    c.reason.as_deref().unwrap_or("no effect")
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `73%` or `n/a`.
    pub fn share_label(&self) -> String {
        match self.custom_share {
            Some(s) => format!("{:.0}%", s * 100.0),
            None => "n/a".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(op: &str, class: OpClass, library: Option<&str>, share: f64) -> AuditEntry {
        AuditEntry {
            op: op.into(),
            class,
            library: library.map(str::to_string),
            by_extension: None,
            ms: share,
            share: Some(share),
            calls: 1,
        }
    }

    #[test]
    fn describes_what_pytorch_still_does_largest_first() {
        let a = OpAudit {
            clock: AuditClock::Gpu,
            total_ms: 1.0,
            custom_ms: 0.2,
            custom_share: Some(0.2),
            glue_ms: None,
            forward_ms: 1.0,
            entries: vec![
                entry("conv2d", OpClass::Vendor, Some("cuDNN"), 0.64),
                entry("ext.relu", OpClass::Custom, None, 0.2),
                entry("addmm", OpClass::Pytorch, None, 0.16),
            ],
            extension_calls: vec![ExtensionCalls {
                function: "ext.copy".into(),
                calls: 2,
                ineffective: 1,
                reason: Some("returned a copy of its input".into()),
                checked: true,
            }],
            extension_modules: vec![],
            aten_ops: vec![],
            audit_ms: 3.0,
        };
        assert_eq!(
            a.describe_left(5),
            "conv2d → cuDNN 64%, addmm → PyTorch 16%"
        );
        assert_eq!(a.describe_left(1), "conv2d → cuDNN 64%, +1 more");
        assert_eq!(a.share_label(), "20%");
        assert_eq!(
            a.describe_ineffective(),
            "ext.copy (1 of 2 call(s): returned a copy of its input)"
        );
        let back: OpAudit = serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
        assert_eq!(back, a);
    }
}

/// The runtime precision audit of one eval (`report.json`): the candidate's and the reference's
/// relative errors against a float64 evaluation of the reference on the same inputs, and the
/// limit the candidate's must stay under (`eval/precision-downgrade` beyond it); or why it was
/// skipped.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PrecisionAudit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_error: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_error: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// The output judged (the worst), its elements compared and whether they were a sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<u64>,
    #[serde(default)]
    pub sampled: bool,
    /// Why no audit was made (memory, no float64 run), when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The verified timed calls the judge put through the audit, picked among all of them after
    /// the timing: a candidate exact only on the calls it expects audited shows here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timed: Vec<TimedPrecisionAudit>,
}

/// One audited timed call's worst output: the errors against the float64 reference and, when
/// the candidate's is well above the reference's own, against float64 references on operands
/// narrowed to each lower format (the one its error follows names the format it computes in).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimedPrecisionAudit {
    pub output: u32,
    pub reference_error: f64,
    pub candidate_error: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub narrowed: Vec<NarrowedError>,
}

/// The candidate's relative error against a float64 reference on operands rounded to `format`,
/// and how its deviation from the exact result follows that reference's: the regression
/// coefficient (near 1: the candidate computes on such operands; near 0: its error is its own),
/// its standard error, and the correlation.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NarrowedError {
    pub format: String,
    pub error: f64,
    pub coefficient: f64,
    pub stderr: f64,
    pub correlation: f64,
}

/// The reference timed alone before the candidate's import, between the candidate's timed calls,
/// and (on a GPU) alone again after them: the numbers behind the `timing/reference-*` findings,
/// kept on every row so a maintainer sees how far the reference moved whatever the verdict.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReferenceCheck {
    /// Median ms of each series.
    pub before_ms: f64,
    pub interleaved_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<f64>,
    /// Later over before: medians of the reference / control ratio per round when both series
    /// have a control (machine-wide slowdowns cancel), else of the ms.
    pub interleaved_ratio: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_ratio: Option<f64>,
    /// Whether the ratios are per round against the control.
    #[serde(default)]
    pub per_control: bool,
}

/// Peak memory of one eval and the harness's memory plan for it (`report.json`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemoryUse {
    /// Torch allocator's peak on the GPU (bytes); `None` on the CPU.
    #[serde(default)]
    pub gpu_peak_bytes: Option<u64>,
    /// Peak resident memory of the eval's process (bytes).
    #[serde(default)]
    pub host_peak_bytes: Option<u64>,
    /// The budget's decision (sizes, what it kept fewer of); `None` on the CPU.
    #[serde(default)]
    pub budget: Option<serde_json::Value>,
}

//! What one job produced: the outcome (one enum, serde tag `kind`), runtime findings, the
//! phase timestamps and the raw timing samples.

use kernelgate_model::Finding;
use kernelgate_timing::{Comparison, Sample, Work};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One trial that exceeded the tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TrialMismatch {
    pub trial: u32,
    pub seed: Option<u64>,
    /// Index of the output (for models returning tuples).
    pub output: u32,
    pub max_abs_error: Option<f64>,
    pub max_rel_error: Option<f64>,
    pub mismatches: u64,
    pub elements: u64,
    pub mismatch_share: f64,
    pub first_mismatch_index: Vec<i64>,
    pub expected: serde_json::Value,
    pub got: serde_json::Value,
    pub nonfinite_outputs: u64,
    /// True for the repeat call on trial 0's inputs (the determinism check).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
}

/// Shape, dtype or device disagreement between the candidate's output and the reference's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Mismatch {
    pub message: String,
    pub trial: Option<u32>,
    pub output: Option<u32>,
    pub expected: serde_json::Value,
    pub got: serde_json::Value,
}

/// The verdict of one job. Every variant but `Passed` fails the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    Passed {
        #[serde(default)]
        trials: u32,
    },
    Incorrect {
        message: String,
        #[serde(default)]
        trials: Vec<TrialMismatch>,
        #[serde(default)]
        passed_trials: u32,
        #[serde(default)]
        total_trials: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        phase: Option<String>,
    },
    ShapeMismatch(Mismatch),
    DtypeMismatch(Mismatch),
    DeviceMismatch(Mismatch),
    NotATensor {
        message: String,
        #[serde(default)]
        trial: Option<u32>,
        #[serde(default)]
        output: Option<u32>,
    },
    InputMutated {
        message: String,
        #[serde(default)]
        trial: Option<u32>,
        #[serde(default)]
        input: Option<u32>,
    },
    OutputAliased {
        message: String,
        #[serde(default)]
        trial: Option<u32>,
        #[serde(default)]
        output: Option<u32>,
    },
    CompileError {
        message: String,
        #[serde(default)]
        log_tail: String,
    },
    RuntimeError {
        message: String,
        #[serde(default)]
        traceback: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trial: Option<u32>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        memory_limit: bool,
    },
    Crash {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// `compile` or `run`: where the child was when it died.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        phase: Option<String>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        traceback: String,
    },
    Timeout {
        /// `compile` or `run`.
        phase: String,
        limit_s: f64,
        message: String,
    },
    /// kernelgate's runner failed after the candidate's code ran (a bug of ours, or a
    /// candidate tampering with the runner): fails the row.
    HarnessError {
        message: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        traceback: String,
    },
    /// The machine or kernelgate failed before any candidate code ran (no child, out of GPU
    /// memory in the reference's phase, a driver error at start-up): not the candidate's
    /// doing, so `pr` retries it once and shows the row as neutral.
    Infrastructure {
        message: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        traceback: String,
    },
}

/// What torch says when CUDA is missing (no toolkit, no driver, no device).
const NO_CUDA: [&str; 7] = [
    "CUDA_HOME environment variable is not set",
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
    "Torch not compiled with CUDA enabled",
    "CUDA driver initialization failed",
    "no CUDA-capable device is detected",
    "nvcc: not found",
];

impl Outcome {
    /// Every text the outcome shows (message, reason, log tail, traceback), for rewriting.
    pub fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            Outcome::Passed { .. } => Vec::new(),
            Outcome::ShapeMismatch(m) | Outcome::DtypeMismatch(m) | Outcome::DeviceMismatch(m) => {
                vec![&mut m.message]
            }
            Outcome::Incorrect { message, .. }
            | Outcome::NotATensor { message, .. }
            | Outcome::InputMutated { message, .. }
            | Outcome::OutputAliased { message, .. }
            | Outcome::Timeout { message, .. } => vec![message],
            Outcome::CompileError { message, log_tail } => vec![message, log_tail],
            Outcome::RuntimeError {
                message, traceback, ..
            }
            | Outcome::HarnessError { message, traceback }
            | Outcome::Infrastructure { message, traceback } => vec![message, traceback],
            Outcome::Crash {
                reason, traceback, ..
            } => vec![reason, traceback],
        }
    }

    /// True when the failure is torch reporting that CUDA is missing, rather than the candidate
    /// failing: on a machine without a GPU the kernel is skipped, not failed. The one answer to
    /// "no CUDA", for `eval` and `pr` alike.
    pub fn torch_found_no_cuda(&self) -> bool {
        let text = match self {
            Outcome::CompileError { message, log_tail } => format!("{message}\n{log_tail}"),
            Outcome::RuntimeError {
                memory_limit: false,
                message,
                traceback,
                ..
            } => format!("{message}\n{traceback}"),
            Outcome::Crash {
                reason, traceback, ..
            } => format!("{reason}\n{traceback}"),
            _ => return false,
        };
        NO_CUDA.iter().any(|m| text.contains(m))
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Passed { .. } => "passed",
            Outcome::Incorrect { .. } => "incorrect",
            Outcome::ShapeMismatch(_) => "shape_mismatch",
            Outcome::DtypeMismatch(_) => "dtype_mismatch",
            Outcome::DeviceMismatch(_) => "device_mismatch",
            Outcome::NotATensor { .. } => "not_a_tensor",
            Outcome::InputMutated { .. } => "input_mutated",
            Outcome::OutputAliased { .. } => "output_aliased",
            Outcome::CompileError { .. } => "compile_error",
            Outcome::RuntimeError { .. } => "runtime_error",
            Outcome::Crash { .. } => "crash",
            Outcome::Timeout { .. } => "timeout",
            Outcome::HarnessError { .. } => "harness_error",
            Outcome::Infrastructure { .. } => "infrastructure",
        }
    }

    pub fn passed(&self) -> bool {
        matches!(self, Outcome::Passed { .. })
    }

    /// One line for tables and annotations.
    pub fn summary(&self) -> String {
        match self {
            Outcome::Passed { trials } => format!("passed {trials} correctness trials"),
            Outcome::Incorrect { message, trials, .. } => match trials.first() {
                Some(t) => format!(
                    "{message}; trial {}: {} of {} elements differ ({:.2}%), max abs error {}, max rel error {}, first at {:?}",
                    t.trial,
                    t.mismatches,
                    t.elements,
                    t.mismatch_share * 100.0,
                    fmt_opt(t.max_abs_error),
                    fmt_opt(t.max_rel_error),
                    t.first_mismatch_index
                ),
                None => message.clone(),
            },
            Outcome::ShapeMismatch(m) | Outcome::DtypeMismatch(m) | Outcome::DeviceMismatch(m) => m.message.clone(),
            Outcome::NotATensor { message, .. }
            | Outcome::InputMutated { message, .. }
            | Outcome::OutputAliased { message, .. }
            | Outcome::CompileError { message, .. }
            | Outcome::RuntimeError { message, .. }
            | Outcome::Timeout { message, .. }
            | Outcome::HarnessError { message, .. }
            | Outcome::Infrastructure { message, .. } => message.clone(),
            Outcome::Crash { reason, .. } => reason.clone(),
        }
    }
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3e}"))
        .unwrap_or_else(|| "n/a".into())
}

/// Raw samples per series (`reference`, `candidate`, `base`) and the comparisons made from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TimingResult {
    pub samples: BTreeMap<kernelgate_timing::Series, Vec<Sample>>,
    /// Reference (base side) against candidate (head side): `speedup()` is reference / candidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_reference: Option<Comparison>,
    /// PR base kernel against head kernel: the regression check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_base: Option<Comparison>,
    /// The least time any correct kernel needs for this problem on this GPU; `None` on CPU, on a
    /// GPU without datasheet numbers or when the work could not be counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Floor>,
    /// How close the candidate's median comes to the limit of its work on this GPU; `None`
    /// wherever `floor` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<kernelgate_model::Efficiency>,
    /// The reference alone before the import, between the calls and after them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_check: Option<kernelgate_model::ReferenceCheck>,
}

impl TimingResult {
    /// The event times (ms) of `series`; none when it was not timed.
    pub fn event_ms(&self, series: kernelgate_timing::Series) -> Vec<f64> {
        self.samples
            .get(&series)
            .map(|s| kernelgate_timing::sample::event_ms(s))
            .unwrap_or_default()
    }
}

/// Bytes every input read once and every output written once, and the FLOPs torch's
/// `FlopCounterMode` counts on the reference (matmuls, convolutions; 0 when it knows none of
/// its operators; `None` when not counted: CPU jobs skip it, see `JobSpec::count_flops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemWork {
    pub input_bytes: u64,
    pub output_bytes: u64,
    #[serde(default)]
    pub flops: Option<u64>,
}

impl ProblemWork {
    /// The baseline files' form (uncounted FLOPs as 0).
    pub fn to_work(&self) -> Work {
        Work {
            input_bytes: self.input_bytes,
            output_bytes: self.output_bytes,
            flops: self.flops.unwrap_or(0),
        }
    }
}

/// The physical floor of one problem on one GPU: the larger of moving its bytes at the
/// bandwidth and doing its FLOPs at the peak (`kernelgate_timing::floor_ms`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub floor_ms: f64,
    /// `memory` or `compute`: the term that sets the floor.
    pub bound: String,
    /// The GPU name the datasheet numbers were looked up by.
    pub gpu: String,
    /// Datasheet bandwidth raised to the measured one, GB/s; 0 when the bytes term is dropped
    /// (warm L2: the inputs may sit in L2, which is faster than the datasheet's memory).
    pub bandwidth_gbs: f64,
    /// Copy bandwidth the harness measured on the device (cold L2 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_bandwidth_gbs: Option<f64>,
    pub peak_tflops: f64,
}

/// One timed phase of a job, in milliseconds (for the phase table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub name: String,
    pub ms: f64,
}

/// How the child process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// Everything `run_job` learned about one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    pub problem: String,
    pub kernel: String,
    /// `cpu` or `cuda:0 (NVIDIA H200)`; `None` when the child never got that far.
    pub device: Option<kernelgate_model::RanOn>,
    pub outcome: Outcome,
    /// Runtime findings (line 0: they have no place in the source).
    pub findings: Vec<Finding>,
    pub timing: Option<TimingResult>,
    /// The least work the problem needs, counted once on the reference when timing was asked for.
    #[serde(default)]
    pub work: Option<ProblemWork>,
    /// What the candidate's forward really ran (custom vs PyTorch work), from one untimed call
    /// after correctness; `None` when the job did not pass correctness or the audit failed (a
    /// warning finding `eval/audit-failed` says why).
    #[serde(default)]
    pub audit: Option<kernelgate_model::OpAudit>,
    /// Peak GPU and host memory of the eval, and the harness's memory budget.
    #[serde(default)]
    pub memory: Option<kernelgate_model::MemoryUse>,
    /// The precision audit against a float64 reference.
    #[serde(default)]
    pub precision_audit: Option<kernelgate_model::PrecisionAudit>,
    /// The seed the run used: report it so `--seed` can reproduce the run.
    pub seed: u64,
    /// Correctness trials the runner ran: all of them when they passed, up to the failing one
    /// otherwise; `None` when the runner never got to them.
    #[serde(default)]
    pub trials_run: Option<u32>,
    /// True when the seed was drawn at random (secret until the run ended).
    pub seed_random: bool,
    pub torch: Option<String>,
    /// What the runner knew of the machine before the candidate was imported: the hardware
    /// key's part ([`crate::hardware_key`]); `None` when the child never got that far.
    #[serde(default)]
    pub machine: Option<crate::Machine>,
    pub phases: Vec<Phase>,
    pub exit: ExitInfo,
    pub stdout_tail: String,
    pub stderr_tail: String,
    /// How the child was confined (JSON: `full`, `partial (...)`, `unavailable (...)`, `off`);
    /// `None` when no child was started.
    #[serde(default)]
    pub sandbox: Option<kernelgate_model::SandboxLevel>,
    /// The extensions the candidate's import built or loaded as an earlier build left them.
    #[serde(default)]
    pub extensions: Vec<ExtensionBuild>,
    /// torch's build directory the job used (`TORCH_EXTENSIONS_DIR` in the child).
    #[serde(default)]
    pub extensions_dir: Option<String>,
    /// The precompiled `torch/extension.h` entry on the child's `CPATH` (`kernelgate pch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precompiled_header: Option<String>,
    /// Where the candidate's build came from when the job uses the build store: loaded from
    /// it, or compiled (and kept, or why not). `None`: no store, or nothing built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_store: Option<crate::store::StoreUse>,
}

/// One compiled extension the candidate's import needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtensionBuild {
    /// The extension's name (its folder under the build directory).
    pub name: String,
    /// The library the process loaded.
    pub library: String,
    /// Compiled by this import; false: loaded as an earlier build (or `python kernel.py`) left it.
    pub built: bool,
    /// An earlier build of this name was there and was replaced (other sources, flags or torch).
    #[serde(default)]
    pub rebuilt: bool,
}

impl EvalResult {
    /// One line on the kernel's extension builds: loaded as an earlier build left them, or compiled
    /// now (and why an earlier build of the same name could not be loaded).
    pub fn build_note(&self) -> Option<String> {
        let r = self;
        if r.extensions.is_empty() {
            return None;
        }
        let shown = r.extensions_dir.as_deref().map(home_relative);
        let dir = shown.as_deref().unwrap_or("the job's build directory");
        let names = |built: bool| -> Vec<&str> {
            r.extensions
                .iter()
                .filter(|e| e.built == built)
                .map(|e| e.name.as_str())
                .collect()
        };
        let (built, reused) = (names(true), names(false));
        use crate::store::StoreUse;
        let kept = match &r.build_store {
            Some(StoreUse::Store) => {
                return Some(format!(
                    "loaded {} from the runner's build store (built earlier from the same files, \
                     flags, torch and compiler): nothing compiled",
                    reused.join(", ")
                ))
            }
            Some(StoreUse::Built) => "; kept in the runner's build store".to_string(),
            Some(StoreUse::Rebuilt { why }) => format!(
                "; the build store's entry was damaged ({why}): removed, and this build kept"
            ),
            Some(StoreUse::BuiltNotKept { why }) => {
                format!("; not kept in the runner's build store: {why}")
            }
            None => String::new(),
        };
        if built.is_empty() {
            return Some(format!(
                "loaded {} as built earlier in {dir} (same sources, flags and torch): nothing compiled",
                reused.join(", ")
            ));
        }
        let secs = r
            .phases
            .iter()
            .find(|p| p.name == "compile")
            .map(|p| format!(" in {:.1} s", p.ms / 1000.0))
            .unwrap_or_default();
        let rebuilt: Vec<&str> = r
            .extensions
            .iter()
            .filter(|e| e.rebuilt)
            .map(|e| e.name.as_str())
            .collect();
        let header = match &r.precompiled_header {
            Some(_) => " (torch/extension.h precompiled where the flags allow)",
            None => "",
        };
        let hint = match &r.precompiled_header {
            Some(_) => "",
            None => "; `kernelgate pch` once on this machine precompiles torch/extension.h for C++ builds",
        };
        if r.build_store.is_some() {
            return Some(format!(
                "compiled {}{secs}{header}{kept}{hint}",
                built.join(", ")
            ));
        }
        Some(if rebuilt.is_empty() {
            format!(
                "compiled {}{secs}{header} into {dir}; the next eval of the same source loads it{hint}",
                built.join(", ")
            )
        } else {
            format!(
                "compiled {}{secs}{header}: the earlier build of {} in {dir} was made from other \
                 sources, flags or torch (torch rebuilds when any of them differs){hint}",
                built.join(", "),
                rebuilt.join(", ")
            )
        })
    }

    /// A result before its child has said anything: passed with no trials, nothing measured.
    pub fn new(problem: String, kernel: String, seed: u64, seed_random: bool) -> EvalResult {
        EvalResult {
            problem,
            kernel,
            device: None,
            outcome: Outcome::Passed { trials: 0 },
            findings: Vec::new(),
            timing: None,
            work: None,
            audit: None,
            memory: None,
            precision_audit: None,
            extensions: Vec::new(),
            extensions_dir: None,
            precompiled_header: None,
            build_store: None,
            seed,
            seed_random,
            trials_run: None,
            torch: None,
            machine: None,
            phases: Vec::new(),
            exit: ExitInfo::default(),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            sandbox: None,
        }
    }

    pub fn passed(&self) -> bool {
        self.outcome.passed()
    }
}

/// A path under the home directory as `~/...`, as a contributor types it.
fn home_relative(path: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && path.starts_with(&format!("{home}/")) => {
            format!("~{}", &path[home.len()..])
        }
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_without_cuda_is_recognised_and_candidate_errors_are_not() {
        let compile = |message: &str, log_tail: &str| Outcome::CompileError {
            message: message.into(),
            log_tail: log_tail.into(),
        };
        let runtime = |message: &str, memory_limit: bool| Outcome::RuntimeError {
            message: message.into(),
            traceback: String::new(),
            trial: None,
            memory_limit,
        };
        assert!(compile(
            "building the extension failed",
            "OSError: CUDA_HOME environment variable is not set. Please set it"
        )
        .torch_found_no_cuda());
        assert!(
            runtime("RuntimeError: Found no NVIDIA driver on your system", false)
                .torch_found_no_cuda()
        );
        assert!(!compile("error: expected ';'", "").torch_found_no_cuda());
        // The candidate's own failures stay failures, whatever their text.
        assert!(!runtime("No CUDA GPUs are available", true).torch_found_no_cuda());
        assert!(!Outcome::Incorrect {
            message: "No CUDA GPUs are available".into(),
            trials: vec![],
            passed_trials: 0,
            total_trials: 5,
            phase: None,
        }
        .torch_found_no_cuda());
    }

    fn with_builds(builds: &[(&str, bool, bool)]) -> EvalResult {
        let mut r = EvalResult::new("p".into(), "k".into(), 1, false);
        r.extensions_dir = Some("/runner/ext/py312_cu130".into());
        r.phases.push(Phase {
            name: "compile".into(),
            ms: 61_800.0,
        });
        r.extensions = builds
            .iter()
            .map(|&(name, built, rebuilt)| ExtensionBuild {
                name: name.into(),
                library: format!("/runner/ext/py312_cu130/{name}/{name}.so"),
                built,
                rebuilt,
            })
            .collect();
        r
    }

    #[test]
    fn the_build_note_says_loaded_compiled_or_why_it_compiled_again() {
        assert_eq!(with_builds(&[]).build_note(), None, "no extension, no line");
        assert_eq!(
            with_builds(&[("kg_relu", false, false)]).build_note().unwrap(),
            "loaded kg_relu as built earlier in /runner/ext/py312_cu130 (same sources, flags and torch): nothing compiled"
        );
        assert_eq!(
            with_builds(&[("kg_relu", true, false)])
                .build_note()
                .unwrap(),
            "compiled kg_relu in 61.8 s into /runner/ext/py312_cu130; the next eval of the same \
             source loads it; `kernelgate pch` once on this machine precompiles torch/extension.h \
             for C++ builds"
        );
        let mut offered = with_builds(&[("kg_relu", true, false)]);
        offered.precompiled_header = Some("/root/.cache/kernelgate/pch/0358b56c".into());
        assert_eq!(
            offered.build_note().unwrap(),
            "compiled kg_relu in 61.8 s (torch/extension.h precompiled where the flags allow) into \
             /runner/ext/py312_cu130; the next eval of the same source loads it"
        );
        let again = with_builds(&[("kg_relu", true, true), ("kg_gelu", false, false)])
            .build_note()
            .unwrap();
        assert!(
            again.starts_with("compiled kg_relu in 61.8 s: the earlier build of kg_relu in /runner/ext/py312_cu130 was made from other sources"),
            "{again}"
        );
    }

    #[test]
    fn outcome_json_is_tagged_by_kind() {
        let o = Outcome::Timeout {
            phase: "run".into(),
            limit_s: 2.0,
            message: "x".into(),
        };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["kind"], "timeout");
        assert_eq!(v["phase"], "run");
        let back: Outcome = serde_json::from_value(v).unwrap();
        assert_eq!(back, o);
        assert_eq!(back.kind(), "timeout");
    }

    #[test]
    fn runner_json_parses_with_missing_optional_fields() {
        let o: Outcome = serde_json::from_str(
            r#"{"kind":"incorrect","message":"1 of 5","trials":[{"trial":2,"mismatches":3,"elements":10,
            "mismatch_share":0.3,"max_abs_error":0.5,"first_mismatch_index":[0,1],"expected":1.0,"got":null}]}"#,
        )
        .unwrap();
        match &o {
            Outcome::Incorrect { trials, .. } => {
                assert_eq!(trials[0].trial, 2);
                assert_eq!(trials[0].first_mismatch_index, vec![0, 1]);
            }
            other => panic!("{other:?}"),
        }
        assert!(o.summary().contains("3 of 10 elements differ"));
        let shape: Outcome = serde_json::from_str(
            r#"{"kind":"shape_mismatch","message":"m","expected":[2],"got":[3]}"#,
        )
        .unwrap();
        assert_eq!(shape.kind(), "shape_mismatch");
        assert!(!shape.passed());
    }
}

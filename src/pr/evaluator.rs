//! The gate's seams: where a job runs ([`Device`]), what evaluating and linting one kernel
//! return ([`Evaluation`], [`RunFacts`]) and the traits the pipeline and the scheduler call
//! ([`Evaluator`], [`Linter`]). `adapters` implements them over the harness and the linter;
//! tests implement them with fakes. Both `run` and `schedule` import from here, never from
//! each other's internals.

use kernelgate_model::Finding;
use kernelgate_report::{ComparisonSummary, Flag, Interval, OutcomeKind, OutcomeSummary};

use super::baselines::RunKey;
use super::plan::Job;

/// Where a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda(u32),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

/// GPUs to use: `CUDA_VISIBLE_DEVICES` when set (its entries are renumbered 0..n by CUDA), else
/// `nvidia-smi -L`; no GPU means one CPU worker.
pub fn detect_devices(
    cuda_visible: Option<&str>,
    nvidia_smi_list: impl FnOnce() -> Option<String>,
) -> Vec<Device> {
    let count = match cuda_visible {
        Some(v) => v
            .split(',')
            .map(str::trim)
            .take_while(|s| !s.is_empty() && *s != "-1")
            .count(),
        None => nvidia_smi_list()
            .map(|out| out.lines().filter(|l| l.starts_with("GPU ")).count())
            .unwrap_or(0),
    };
    if count == 0 {
        vec![Device::Cpu]
    } else {
        (0..count as u32).map(Device::Cuda).collect()
    }
}

/// `nvidia-smi -L`, or `None` when there is no driver.
pub fn nvidia_smi_list() -> Option<String> {
    kernelgate_eval::nvidia_smi(&["-L"])
}

/// What the harness and timing tell us about one kernel.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub outcome: OutcomeSummary,
    /// Runtime findings (no span: `line == 0`).
    pub findings: Vec<Finding>,
    pub time_ms: Option<f64>,
    pub time_ci_ms: Option<(f64, f64)>,
    /// The candidate against the device's limit (GPU rows with a known floor).
    pub efficiency: Option<kernelgate_model::Efficiency>,
    pub reference_ms: Option<f64>,
    pub reference_ci_ms: Option<(f64, f64)>,
    pub compiled_ms: Option<f64>,
    pub speedup_eager: Option<Interval>,
    pub speedup_compile: Option<Interval>,
    /// Head vs base version (ratio = head / base time).
    pub vs_base: Option<ComparisonSummary>,
    pub flags: Vec<Flag>,
    /// Where and how the candidate ran, as the harness reported it.
    pub facts: RunFacts,
    /// Hardware key and L2 mode of the run, for committed baselines (`None`: no device reported).
    pub run_key: Option<RunKey>,
    /// Event times (ms) of the candidate and the live reference, for comparisons with stored
    /// samples.
    pub candidate_samples_ms: Vec<f64>,
    pub reference_samples_ms: Vec<f64>,
    /// The harness's op audit (custom share), for the policy.
    pub audit: Option<kernelgate_model::OpAudit>,
    /// The harness's phases (name, ms).
    pub phases: Vec<(String, f64)>,
    pub memory: Option<kernelgate_model::MemoryUse>,
    pub precision_audit: Option<kernelgate_model::PrecisionAudit>,
    pub reference_check: Option<kernelgate_model::ReferenceCheck>,
}

/// What the harness reported about the candidate's run, typed: the row and the run's hardware
/// read these, never the display blob (`outcome.details`) that carries them into report.json.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFacts {
    /// The device the harness ran on (`NVIDIA H200`, `cpu`).
    pub device: Option<kernelgate_model::RanOn>,
    /// torch's version in the child.
    pub torch: Option<String>,
    /// The seed the run used.
    pub seed: Option<u64>,
    /// How the child was confined (`None`: no child was started).
    pub sandbox: Option<kernelgate_model::SandboxLevel>,
}

impl Evaluation {
    /// A job that was not run: nothing to evaluate on this runner (`message` says why).
    pub fn skipped(message: impl Into<String>) -> Evaluation {
        Evaluation::ended(OutcomeKind::Skipped, message)
    }

    /// An evaluation that ended as `kind` with nothing measured: a job that could not run, or
    /// the start of one whose measurements are filled in.
    pub fn ended(kind: OutcomeKind, message: impl Into<String>) -> Evaluation {
        Evaluation {
            outcome: OutcomeSummary::new(kind, message),
            findings: Vec::new(),
            time_ms: None,
            time_ci_ms: None,
            efficiency: None,
            reference_ms: None,
            reference_ci_ms: None,
            compiled_ms: None,
            speedup_eager: None,
            speedup_compile: None,
            vs_base: None,
            flags: Vec::new(),
            facts: RunFacts::default(),
            run_key: None,
            candidate_samples_ms: Vec::new(),
            reference_samples_ms: Vec::new(),
            audit: None,
            phases: Vec::new(),
            memory: None,
            precision_audit: None,
            reference_check: None,
        }
    }
}

/// Runs one kernel (correctness, timing, base-vs-head) on one device. Must not panic on a bad
/// kernel: every failure of the candidate is an outcome.
pub trait Evaluator: Send + Sync {
    fn evaluate(&self, job: &Job, device: Device) -> Evaluation;
    /// Whether the kernel runs on the CPU whatever the device (a CPU C++ extension): on a GPU
    /// runner it gets a CPU worker instead of a GPU.
    fn runs_on_cpu(&self, _job: &Job) -> bool {
        false
    }
    /// On a GPU runner, CPU lanes with CPUs of their own ([`super::cores`]): that many CPU
    /// workers, each starting as soon as its kernel is built. `None`: one CPU worker on every
    /// CPU, held until no build is left (builds would disturb its timing).
    fn cpu_lanes(&self) -> Option<usize> {
        None
    }
    /// Whether [`Evaluator::build`] has work to do ahead of the device for this kernel.
    fn needs_build(&self, _job: &Job) -> bool {
        false
    }
    /// The compile stage, on CPU cores ahead of the device. Never a verdict: `Err` says why it
    /// did not build, and the eval that follows reports the truth.
    fn build(&self, _job: &Job) -> Result<(), String> {
        Ok(())
    }
    /// Starts what can start before `device` is free for `job` (its process); the next
    /// [`Evaluator::evaluate`] of `job` on `device` uses it.
    fn prepare(&self, _job: &Job, _device: Device) {}
    /// Lets go of what [`Evaluator::prepare`] started when `job` will not be evaluated there.
    fn discard(&self, _job: &Job, _device: Device) {}
    /// The worker of `device` waits for work it may take; `ready` kernels of its lane are built
    /// and held back (the CPU lane while builds share its cores). Nothing to do for a real
    /// evaluator; the scheduler's tests see what it waited on.
    fn waiting(&self, _device: Device, _ready: usize) {}
}

/// Static checks of one kernel file.
pub trait Linter: Send + Sync {
    fn lint(&self, job: &Job) -> Result<Vec<Finding>, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_from_env_or_nvidia_smi() {
        assert_eq!(
            detect_devices(Some("0,1"), || None),
            vec![Device::Cuda(0), Device::Cuda(1)]
        );
        assert_eq!(
            detect_devices(Some(""), || panic!("not consulted")),
            vec![Device::Cpu]
        );
        assert_eq!(detect_devices(Some("-1"), || None), vec![Device::Cpu]);
        let smi = "GPU 0: NVIDIA H200 (UUID: GPU-1)\nGPU 1: NVIDIA H200 (UUID: GPU-2)\nGPU 2: NVIDIA H200 (UUID: GPU-3)\n";
        assert_eq!(detect_devices(None, || Some(smi.into())).len(), 3);
        assert_eq!(detect_devices(None, || None), vec![Device::Cpu]);
    }
}

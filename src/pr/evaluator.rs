//! The gate's seams: where a job runs ([`Device`]), what evaluating one kernel returns
//! ([`Evaluated`]: the harness's result, or why there is none) and the traits the pipeline and
//! the scheduler call ([`Evaluator`], [`Linter`]). `adapters` implements them over the harness and the linter;
//! tests implement them with fakes. Both `run` and `schedule` import from here, never from
//! each other's internals.

use kernelgate_eval::{EvalResult, Outcome};
use kernelgate_model::Finding;

use super::plan::Job;
use crate::baseline::judge::RunKey;

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

/// What evaluating one kernel on one device came to: the harness's result, or why there is
/// none. The pipeline moves it onto the kernel's row (`adapters::convert`).
#[derive(Debug, Clone)]
pub enum Evaluated {
    /// The harness ran the job: its result, paths shown as the repository names them.
    Ran {
        result: Box<EvalResult>,
        /// Hardware key and L2 mode of the run, for committed baselines (`None`: the child
        /// reported no machine).
        run_key: Option<RunKey>,
    },
    /// Not evaluated on this runner, through nothing the candidate did (no problem file, or a
    /// kernel that needs a GPU this runner lacks): neutral.
    Skipped {
        reason: String,
        /// The machine a child reported before torch found no CUDA on it: the row names it.
        run_key: Option<RunKey>,
    },
    /// kernelgate could not evaluate the kernel (its job could not be put together, or the
    /// evaluator failed): fails the row.
    Error(String),
}

impl Evaluated {
    /// The harness's result, with no hardware key.
    pub fn ran(result: EvalResult) -> Evaluated {
        Evaluated::Ran {
            result: Box::new(result),
            run_key: None,
        }
    }

    /// A job that was not run: nothing to evaluate on this runner (`reason` says why).
    pub fn skipped(reason: impl Into<String>) -> Evaluated {
        Evaluated::Skipped {
            reason: reason.into(),
            run_key: None,
        }
    }

    /// The hardware key and L2 mode of the machine the job reached, if it reached one.
    pub fn run_key(&self) -> Option<&RunKey> {
        match self {
            Evaluated::Ran { run_key, .. } | Evaluated::Skipped { run_key, .. } => run_key.as_ref(),
            Evaluated::Error(_) => None,
        }
    }

    /// The machine or kernelgate failed before any candidate code ran: worth one more try.
    pub fn is_infrastructure(&self) -> bool {
        matches!(self, Evaluated::Ran { result, .. }
            if matches!(result.outcome, Outcome::Infrastructure { .. }))
    }

    /// The harness's phases (name, ms), in order; none without a run.
    pub fn phases(&self) -> Vec<(String, f64)> {
        match self {
            Evaluated::Ran { result, .. } => result
                .phases
                .iter()
                .map(|p| (p.name.clone(), p.ms))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Where the kernel's extension build came from (the build store, or compiled now).
    pub fn build_source(&self) -> Option<kernelgate_report::BuildSource> {
        use kernelgate_eval::StoreUse;
        use kernelgate_report::BuildSource;
        match self {
            Evaluated::Ran { result, .. } => result.build_store.as_ref().map(|u| match u {
                StoreUse::Store => BuildSource::Store,
                StoreUse::Built => BuildSource::Built,
                StoreUse::Rebuilt { .. } => BuildSource::Rebuilt,
                StoreUse::BuiltNotKept { .. } => BuildSource::NotKept,
            }),
            _ => None,
        }
    }

    /// A run of the harness that ended in `outcome` with nothing measured: the fakes of the
    /// pipeline's tests.
    #[cfg(test)]
    pub(crate) fn ended(outcome: Outcome) -> Evaluated {
        let mut result = EvalResult::new("level1/3_ReLU".into(), "k.py".into(), 1, false);
        result.outcome = outcome;
        Evaluated::ran(result)
    }
}

/// Runs one kernel (correctness, timing, base-vs-head) on one device. Must not panic on a bad
/// kernel: every failure of the candidate is an outcome.
pub trait Evaluator: Send + Sync {
    fn evaluate(&self, job: &Job, device: Device) -> Evaluated;
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

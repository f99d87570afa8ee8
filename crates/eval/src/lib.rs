//! The CLI side of the harness: one job = one candidate kernel against one problem, run in a
//! child process (the runner's Python importing the `kernelgate_harness` extension) with its
//! own process group and PID namespace, time and memory limits, an allow-listed environment
//! and an authenticated result channel. [`run_job`] never fails on a candidate: every way a
//! candidate can go wrong is an [`Outcome`].
//!
//! A job's path through the crate: `job` (the [`JobSpec`] and its one builder) → `launch` (the
//! child started: interpreter, harness, sandbox, environment) → `child` (supervision) →
//! `conclude` (the runner's result into an [`EvalResult`]) with `summary` (the timing
//! comparisons, their integrity checks and the physical floor).

mod child;
mod conclude;
mod error;
mod exec;
mod extensions;
mod hardware;
mod interpreter;
mod job;
mod launch;
pub mod locate;
pub mod outcome;
mod pch;
mod pidns;
pub mod protocol;
pub mod sandbox;
mod shown;
pub mod store;
mod summary;

pub use child::{
    allowed_cpus, passes_to_child, run_script, spawn_streaming, Script, ScriptEnd, StreamingScript,
    CHILD_ENV_VAR,
};
use conclude::conclude;
pub use conclude::{
    RULE_HARNESS_HOOKED, RULE_PRECISION_DOWNGRADE, RULE_STRAY_PROCESS, RULE_TORCH_PATCHED,
};
pub use error::EvalError;
pub use extensions::{extensions_subdir, ExtensionsDir};
pub use hardware::{hardware_key, nvidia_smi, Machine};
pub use job::{runner_python, JobRequest, JobSpec, Stage};
use launch::{start, Started};
pub use locate::{find_harness, find_python, libcuda_present, HARNESS_PACKAGE};
pub use outcome::{
    EvalResult, ExitInfo, ExtensionBuild, Floor, Mismatch, Outcome, Phase, ProblemWork,
    TimingResult, TrialMismatch,
};
pub use pch::{build_pch, pch_root, PchBuild, PCH_DIR_ENV};
pub use protocol::HARNESS_PROTOCOL;
pub use sandbox::{SandboxLevel, SandboxMode};
pub use shown::ShownPaths;
pub use store::{BuildStore, StoreError, StoreUse, BUILD_STORE_ENV};
pub use summary::physical_floor;

/// Runs one job to an outcome. Never panics on candidate behaviour and never returns an error:
/// set-up problems are `harness_error` outcomes with a message saying what to fix.
pub fn run_job(spec: &JobSpec) -> EvalResult {
    prepare_job(spec).finish()
}

/// A job whose child process is started (confined, importing torch) but not yet given its job:
/// start the next job on a device while the current one runs, then [`PreparedJob::finish`] it
/// when the device is free. The limits' clocks start at `finish`.
pub struct PreparedJob {
    spec: JobSpec,
    result: EvalResult,
    /// `None`: nothing to start (a build-only job whose build is in the build store).
    started: Option<Result<Started, EvalError>>,
}

/// Starts the job's child process; see [`PreparedJob`].
pub fn prepare_job(spec: &JobSpec) -> PreparedJob {
    let (seed, seed_random) = match spec.seed {
        Some(s) => (s, false),
        None => (rand::random::<u32>() as u64, true),
    };
    let mut result = EvalResult::new(
        spec.problem_label
            .clone()
            .unwrap_or_else(|| spec.problem.display().to_string()),
        spec.kernel_label
            .clone()
            .unwrap_or_else(|| spec.kernel.display().to_string()),
        seed,
        seed_random,
    );
    if let Some(entry) = launch::stored_build(spec) {
        // Built before, by this runner, from the same files and toolchain: nothing to do.
        result.outcome = Outcome::Passed { trials: 0 };
        result.build_store = Some(StoreUse::Store);
        result.extensions_dir = Some(entry.display().to_string());
        return PreparedJob {
            started: None,
            spec: spec.clone(),
            result,
        };
    }
    PreparedJob {
        started: Some(start(spec, seed)),
        spec: spec.clone(),
        result,
    }
}

impl PreparedJob {
    /// Runs the job to its end; never fails on a candidate (every failure is an [`Outcome`]).
    pub fn finish(self) -> EvalResult {
        let PreparedJob {
            spec,
            mut result,
            started,
        } = self;
        let Some(started) = started else {
            return result;
        };
        // Started ahead, before a build it would compile was kept in the build store: a fresh
        // process loads that build instead (a torch import, not a compile).
        let started = match started {
            Ok(s) if s.stale() => {
                drop(s);
                start(&spec, result.seed)
            }
            other => other,
        };
        if let Err(e) = started.and_then(|s| conclude(&spec, s, &mut result)) {
            let message = e.to_string();
            result.outcome = match e {
                EvalError::KernelSource(why) => Outcome::CompileError {
                    message: format!("{}: {why}", result.kernel),
                    log_tail: String::new(),
                },
                // A required sandbox that cannot be had must fail, not pass as neutral.
                EvalError::Sandbox(_) => Outcome::HarnessError {
                    message,
                    traceback: String::new(),
                },
                _ => Outcome::Infrastructure {
                    message,
                    traceback: String::new(),
                },
            };
        }
        result
    }
}

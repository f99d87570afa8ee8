//! The job: one candidate against one problem, as the child runs it. [`JobSpec::build`] is the
//! one place a command's request and the repository's config become a job.

use kernelgate_model::config::TimingConfig;
use kernelgate_model::{Device, Precision};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::EvalError;
use crate::{find_python, ExtensionsDir, SandboxMode};

/// One evaluation. Commands build it with [`JobSpec::build`] from the config and a
/// [`JobRequest`]; [`JobSpec::new`] (every field public) is for tests and tools.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The problem file (`KernelBench/level1/19_ReLU.py`).
    pub problem: PathBuf,
    /// The candidate (`kernels/.../19_ReLU.py`, defines `ModelNew`).
    pub kernel: PathBuf,
    /// The PR's base version of the kernel, timed against the head for the regression check.
    pub base_kernel: Option<PathBuf>,
    /// The files the kernel's build reads besides itself (`kernelgate_model::deps`: sources it
    /// loads, headers they include): the child may read them, and its build is keyed by them.
    pub sources: Vec<PathBuf>,
    /// The same for [`JobSpec::base_kernel`].
    pub base_sources: Vec<PathBuf>,
    /// [`JobSpec::sources`] (and [`JobSpec::base_sources`]) are every file the builds read:
    /// every path the kernel loads was resolved (`kernelgate_model::deps`). Only such a build
    /// is kept in the build store ([`ExtensionsDir::Store`]), whose key is made of them.
    pub sources_known: bool,
    /// Names used in the result (e.g. `level1/19_ReLU` and a repo-relative kernel path).
    pub problem_label: Option<String>,
    pub kernel_label: Option<String>,
    pub device: Device,
    pub precision: Precision,
    /// Correctness trials (KernelBench: 5).
    pub trials: u32,
    /// `None`: a secret random seed, reported in the result afterwards. `Some(42)`: KernelBench's.
    pub seed: Option<u64>,
    pub compile_timeout: Duration,
    pub run_timeout: Duration,
    /// Host memory limit for the whole job (0: none).
    pub memory_limit_mb: u64,
    /// `None`: correctness only.
    pub timing: Option<TimingConfig>,
    /// GPU index on a multi-GPU runner (sets `CUDA_VISIBLE_DEVICES`).
    pub gpu: Option<u32>,
    /// The runner's Python; `None`: [`find_python`] from the current directory.
    pub python: Option<PathBuf>,
    /// The harness cdylib; `None`: [`find_harness`].
    pub harness: Option<PathBuf>,
    /// Where the job's `load_inline`/`load` builds go ([`ExtensionsDir`]).
    pub extensions_dir: ExtensionsDir,
    /// The names of the extensions the kernel builds, as its source states them
    /// (`kernelgate_lint::embedded::extension_names`); `None`: not all known. In torch's own
    /// directory ([`ExtensionsDir::Torch`]) the child may write only these names' build
    /// directories; without them the job builds in its own directory.
    pub extension_names: Option<Vec<String>>,
    /// Extra trials on signed/scaled inputs (0 to 2).
    pub shifted_trials: u32,
    /// Generate inputs directly on the GPU (fast; different random values than KernelBench's
    /// CPU generation for the same seed). Ignored on CPU.
    pub inputs_on_device: bool,
    /// Count the reference's FLOPs for the physical floor (timing jobs). `None`: only when the
    /// job may run on a GPU, the one place a floor is computed; the count's first use imports
    /// `torch._dynamo` (seconds), which a CPU job would pay for nothing.
    pub count_flops: Option<bool>,
    /// Run the op audit after correctness (one extra, untimed call; `EvalResult::audit`).
    pub audit: bool,
    /// The sandbox around the child ([`SandboxMode::Auto`] by default).
    pub sandbox: SandboxMode,
    /// Only import the candidate (and base) kernel, building its extensions into
    /// `extensions_dir`, with no GPU visible: the compile stage that runs ahead of the GPU. The
    /// outcome is never a verdict; the eval that follows loads the build.
    pub build_only: bool,
    /// The base kernel was built ahead, by a build-only job of its own, in the shared cache
    /// ([`ExtensionsDir::Keyed`]): the eval loads that build from a directory its process may
    /// only read, so no candidate can change the build later jobs load. Otherwise the base
    /// builds in the eval, in a directory of the job's own.
    pub base_prebuilt: bool,
    /// Progress lines on stderr as the child moves from phase to phase (a lone `eval`; `pr`
    /// prints its own).
    pub progress: bool,
    /// The CPUs the child may run on (its affinity, and as many CPU threads for torch); `None`:
    /// every CPU kernelgate may use. `pr` gives each CPU lane its own cores on a GPU runner.
    pub cpus: Option<Vec<usize>>,
}

impl JobSpec {
    pub fn new(problem: impl Into<PathBuf>, kernel: impl Into<PathBuf>) -> JobSpec {
        JobSpec {
            problem: problem.into(),
            kernel: kernel.into(),
            base_kernel: None,
            sources: Vec::new(),
            base_sources: Vec::new(),
            sources_known: false,
            problem_label: None,
            kernel_label: None,
            device: Device::Auto,
            precision: Precision::Fp32,
            trials: 5,
            seed: None,
            compile_timeout: Duration::from_secs(300),
            run_timeout: Duration::from_secs(120),
            memory_limit_mb: 16384,
            timing: None,
            gpu: None,
            python: None,
            harness: None,
            extensions_dir: ExtensionsDir::PerJob,
            extension_names: None,
            shifted_trials: 1,
            inputs_on_device: true,
            count_flops: None,
            audit: true,
            sandbox: SandboxMode::Auto,
            build_only: false,
            base_prebuilt: false,
            progress: false,
            cpus: None,
        }
    }
}

impl JobSpec {
    /// The one job builder: the job as the repository's `kernelgate.toml` describes it
    /// (`[harness]` limits and trials, `[timing]`, `[sandbox]`, `[defaults]` device and
    /// precision, the runner's Python by [`runner_python`]) with what the command asks in `req`.
    /// `eval`, `pr` (its builds, prepared processes and evals) and `baseline` all build here.
    pub fn build(
        cfg: &kernelgate_model::Config,
        repo: &Path,
        problem: impl Into<PathBuf>,
        kernel: impl Into<PathBuf>,
        req: &JobRequest,
    ) -> Result<JobSpec, EvalError> {
        let h = &cfg.harness;
        let mut spec = JobSpec::new(problem, kernel);
        spec.device = req.device.unwrap_or(cfg.defaults.device);
        spec.precision = req.precision.unwrap_or(cfg.defaults.precision);
        spec.trials = h.trials;
        spec.compile_timeout = Duration::from_secs(h.compile_timeout_s);
        spec.run_timeout = Duration::from_secs(h.run_timeout_s);
        spec.memory_limit_mb = req.memory_limit_mb.unwrap_or(h.memory_limit_mb);
        spec.python = Some(runner_python(cfg, repo));
        spec.sandbox = SandboxMode::resolve(cfg.sandbox.enabled, cfg.sandbox.required)?;
        spec.problem_label = req.problem_label.clone();
        spec.kernel_label = req.kernel_label.clone();
        spec.seed = req.seed;
        spec.gpu = req.gpu;
        spec.harness = req.harness.clone();
        spec.extensions_dir = req.extensions_dir.clone();
        spec.extension_names = req.extension_names.clone();
        if let Some(n) = req.shifted_trials {
            spec.shifted_trials = n;
        }
        spec.inputs_on_device = !req.host_inputs;
        spec.progress = req.progress;
        spec.cpus = req.cpus.clone();
        spec.sources = req.sources.clone();
        spec.sources_known = req.sources_known;
        match req.stage {
            Stage::Eval => {
                spec.timing = (!req.no_timing).then(|| cfg.timing.clone());
                spec.audit = !req.no_audit;
                spec.base_kernel = req.base_kernel.clone();
                spec.base_sources = req.base_sources.clone();
                spec.base_prebuilt = spec.base_kernel.is_some() && req.base_prebuilt;
            }
            // Only the import: what the eval that follows loads.
            Stage::Build => {
                spec.build_only = true;
                spec.timing = None;
                spec.audit = false;
            }
        }
        Ok(spec)
    }
}

/// Which part of an evaluation a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stage {
    /// Correctness, then timing and the op audit unless the request turns them off.
    #[default]
    Eval,
    /// Only import the candidate, building its extensions (no GPU visible, no timing, no audit,
    /// no base kernel): the compile stage ahead of the GPU.
    Build,
}

/// What a command asks of one job beyond the repository's config: the one input of
/// [`JobSpec::build`] besides the config and the files, so no command patches a spec.
/// `Default` is a plain eval as the config describes it.
#[derive(Debug, Clone, Default)]
pub struct JobRequest {
    pub stage: Stage,
    /// Names in the result (`level1/19_ReLU`, the repository's kernel path).
    pub problem_label: Option<String>,
    pub kernel_label: Option<String>,
    /// The PR's base version of the kernel (eval stage only).
    pub base_kernel: Option<PathBuf>,
    /// The kernel's dependency set besides itself ([`JobSpec::sources`]).
    pub sources: Vec<PathBuf>,
    /// The base kernel's ([`JobSpec::base_sources`]; eval stage only).
    pub base_sources: Vec<PathBuf>,
    /// The dependency sets are complete ([`JobSpec::sources_known`]).
    pub sources_known: bool,
    /// The base was built ahead into the keyed cache ([`JobSpec::base_prebuilt`]).
    pub base_prebuilt: bool,
    /// `None`: `[defaults] device`.
    pub device: Option<Device>,
    /// `None`: `[defaults] precision`.
    pub precision: Option<Precision>,
    /// `None`: a secret random seed.
    pub seed: Option<u64>,
    /// Correctness only.
    pub no_timing: bool,
    pub no_audit: bool,
    /// Inputs generated on the host, as KernelBench does.
    pub host_inputs: bool,
    /// GPU index on a multi-GPU runner.
    pub gpu: Option<u32>,
    pub extensions_dir: ExtensionsDir,
    /// The extensions the kernel builds ([`JobSpec::extension_names`]).
    pub extension_names: Option<Vec<String>>,
    /// `None`: `[harness] memory_limit_mb`.
    pub memory_limit_mb: Option<u64>,
    /// `None`: the harness default.
    pub shifted_trials: Option<u32>,
    pub progress: bool,
    pub cpus: Option<Vec<usize>>,
    /// The harness cdylib; `None`: [`crate::find_harness`] when the job starts.
    pub harness: Option<PathBuf>,
}

/// The runner's Python, in the documented order (docs/config.md, `[harness] python`):
/// `[harness] python`, else [`find_python`] (`$KERNELGATE_PYTHON`, the interpreter beside an
/// installed `kernelgate`, `<repo>/.venv/bin/python`, `python3`).
pub fn runner_python(cfg: &kernelgate_model::Config, repo: &Path) -> PathBuf {
    match &cfg.harness.python {
        Some(p) => p.clone(),
        None => find_python(repo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_from_the_config_carries_every_harness_setting() {
        let mut cfg = kernelgate_model::Config::default();
        cfg.harness.trials = 3;
        cfg.harness.compile_timeout_s = 7;
        cfg.harness.run_timeout_s = 9;
        cfg.harness.memory_limit_mb = 512;
        cfg.defaults.precision = Precision::Bf16;
        cfg.defaults.device = Device::Cpu;
        cfg.sandbox.enabled = false;
        cfg.harness.python = Some(PathBuf::from("/opt/kg/bin/python"));
        let spec =
            JobSpec::build(&cfg, Path::new("."), "p.py", "k.py", &JobRequest::default()).unwrap();
        assert_eq!(
            (spec.trials, spec.compile_timeout, spec.run_timeout),
            (3, Duration::from_secs(7), Duration::from_secs(9))
        );
        assert_eq!(
            (spec.memory_limit_mb, spec.precision),
            (512, Precision::Bf16)
        );
        assert_eq!(spec.device, Device::Cpu);
        assert_eq!(spec.timing, Some(cfg.timing.clone()));
        // `[harness] python` comes first (docs/config.md), whatever KERNELGATE_PYTHON says.
        assert_eq!(spec.python, Some(PathBuf::from("/opt/kg/bin/python")));
        cfg.harness.python = None;
        assert_eq!(
            runner_python(&cfg, Path::new(".")),
            find_python(Path::new("."))
        );
    }

    #[test]
    fn the_request_overrides_the_config_and_the_build_stage_only_imports() {
        let mut cfg = kernelgate_model::Config::default();
        cfg.harness.memory_limit_mb = 512;
        cfg.defaults.device = Device::Cpu;
        let request = JobRequest {
            kernel_label: Some("kernels/a.py".into()),
            base_kernel: Some("base/a.py".into()),
            base_prebuilt: true,
            device: Some(Device::Cuda),
            precision: Some(Precision::Fp16),
            seed: Some(42),
            memory_limit_mb: Some(2048),
            shifted_trials: Some(0),
            host_inputs: true,
            cpus: Some(vec![2, 3]),
            ..JobRequest::default()
        };
        let spec = JobSpec::build(&cfg, Path::new("."), "p.py", "k.py", &request).unwrap();
        assert_eq!(
            (spec.device, spec.precision),
            (Device::Cuda, Precision::Fp16)
        );
        assert_eq!((spec.memory_limit_mb, spec.seed), (2048, Some(42)));
        assert_eq!((spec.shifted_trials, spec.inputs_on_device), (0, false));
        assert_eq!(spec.base_kernel, Some(PathBuf::from("base/a.py")));
        assert!(spec.base_prebuilt && spec.audit && spec.timing.is_some() && !spec.build_only);
        assert_eq!(spec.cpus, Some(vec![2, 3]));

        let build = JobRequest {
            stage: Stage::Build,
            ..request.clone()
        };
        let spec = JobSpec::build(&cfg, Path::new("."), "p.py", "k.py", &build).unwrap();
        assert!(spec.build_only);
        assert_eq!((spec.timing.is_none(), spec.audit), (true, false));
        assert_eq!((spec.base_kernel, spec.base_prebuilt), (None, false));

        // A base that was not built ahead builds in the eval; no base, nothing prebuilt.
        let no_base = JobRequest {
            base_kernel: None,
            ..request
        };
        let spec = JobSpec::build(&cfg, Path::new("."), "p.py", "k.py", &no_base).unwrap();
        assert!(!spec.base_prebuilt);
        let timing_off = JobRequest {
            no_timing: true,
            no_audit: true,
            ..JobRequest::default()
        };
        let spec = JobSpec::build(&cfg, Path::new("."), "p.py", "k.py", &timing_off).unwrap();
        assert_eq!((spec.timing.is_none(), spec.audit), (true, false));
    }
}

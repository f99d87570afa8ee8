//! `kernelgate eval` as a library operation: one candidate against one problem, in an isolated
//! child process. The command parses flags into [`EvalOptions`] and prints the [`LocalEval`].

use anyhow::{bail, Context};
use kernelgate_eval::{EvalResult, ExtensionsDir, JobRequest, JobSpec};
use kernelgate_model::{Config, Device, Precision, ProblemSet, Severity};
use std::path::{Path, PathBuf};

/// Where the eval's extension builds go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Builds {
    /// torch's own build directory: what `python kernel.py` built is loaded.
    #[default]
    TorchDefault,
    /// A shared cache with one build per kernel source, as `pr` keeps it.
    Keyed(PathBuf),
    /// A fresh directory, removed afterwards.
    Fresh,
}

/// What a local eval is asked to do (the flags of `kernelgate eval`).
#[derive(Debug, Clone, Default)]
pub struct EvalOptions {
    /// A file path or a dataset key; `None`: the kernel's mapping.
    pub problem: Option<String>,
    pub kernel: PathBuf,
    pub base_kernel: Option<PathBuf>,
    pub device: Option<Device>,
    /// `None`: a secret random seed.
    pub seed: Option<u64>,
    /// `None`: the kernel's mapping, else `[defaults] precision`.
    pub precision: Option<Precision>,
    pub memory_limit_mb: Option<u64>,
    pub no_timing: bool,
    pub no_audit: bool,
    pub gpu: Option<u32>,
    pub builds: Builds,
    pub shifted_trials: u32,
    pub host_inputs: bool,
}

/// A finished local eval.
#[derive(Debug)]
pub struct LocalEval {
    /// Paths in it as the user gave them.
    pub result: EvalResult,
    /// torch found no CUDA on a CPU run: the machine cannot judge this kernel (neutral, as
    /// `kernelgate pr` rows say `skipped — needs a GPU`), not the candidate's failure.
    pub needs_gpu: bool,
}

impl LocalEval {
    /// 0 when the kernel passed with no error finding (or the machine cannot judge it), else 1.
    pub fn exit_code(&self) -> i32 {
        if self.needs_gpu {
            return 0;
        }
        let failing_finding = self
            .result
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error);
        if self.result.passed() && !failing_finding {
            0
        } else {
            1
        }
    }
}

/// Runs one eval as `kernelgate.toml` in `repo` (already loaded into `config`) and `opts` ask.
pub fn eval(repo: &Path, config: &Config, opts: &EvalOptions) -> anyhow::Result<LocalEval> {
    if !opts.kernel.is_file() {
        bail!(
            "{}: no such kernel file (give the path of a Python file defining ModelNew)",
            opts.kernel.display()
        );
    }
    let (problem, problem_label, mapped_precision) = match &opts.problem {
        Some(q) => {
            let (p, label) = resolve_problem(repo, config, q)?;
            (p, label, None)
        }
        None => {
            let (p, label, precision) = mapped_problem(repo, config, &opts.kernel)?;
            (p, label, Some(precision))
        }
    };
    if let Some(b) = &opts.base_kernel {
        if !b.is_file() {
            bail!("{}: no such base kernel file", b.display());
        }
    }
    let harness = kernelgate_eval::find_harness()?;
    let request = JobRequest {
        problem_label: Some(problem_label),
        base_kernel: opts.base_kernel.clone(),
        // What the kernel's build reads besides itself: read by the child, keying its build.
        sources: kernelgate_model::deps::sources_on_disk(repo, &opts.kernel),
        base_sources: opts
            .base_kernel
            .as_deref()
            .map(|b| kernelgate_model::deps::sources_on_disk(repo, b))
            .unwrap_or_default(),
        device: opts.device,
        // --precision, else the kernel's mapping (when it chose the problem), else the config.
        precision: opts.precision.or(mapped_precision),
        seed: opts.seed,
        memory_limit_mb: opts.memory_limit_mb,
        no_timing: opts.no_timing,
        no_audit: opts.no_audit,
        host_inputs: opts.host_inputs,
        gpu: opts.gpu,
        harness: Some(harness),
        extensions_dir: match &opts.builds {
            Builds::Keyed(d) => ExtensionsDir::Keyed(d.clone()),
            Builds::Fresh => ExtensionsDir::PerJob,
            Builds::TorchDefault => ExtensionsDir::torch_default().unwrap_or_default(),
        },
        // In torch's own directory the child writes only the builds its source names.
        extension_names: kernelgate_model::read_source(&opts.kernel)
            .ok()
            .and_then(|src| kernelgate_lint::embedded::extension_names(&src)),
        shifted_trials: Some(opts.shifted_trials),
        progress: true,
        ..JobRequest::default()
    };
    let spec = JobSpec::build(config, repo, &problem, &opts.kernel, &request)?;
    eprintln!(
        "kernelgate eval: {} against {}: starting the harness (torch import, reference)...",
        opts.kernel.display(),
        spec.problem_label.as_deref().unwrap_or("?")
    );
    let mut result = kernelgate_eval::run_job(&spec);
    // `kernelgate pr` leaves the excessive-speedup flag to its policy; a lone eval has none.
    if let Some(c) = result.timing.as_ref().and_then(|t| t.vs_reference.as_ref()) {
        let file = result.kernel.clone();
        result
            .findings
            .extend(kernelgate_timing::check_plausibility(
                &file,
                c.head.median,
                None,
                Some(c.speedup().0),
                config.timing.excessive_speedup,
            ));
    }
    // The kernel and problem as given, not as the runner's absolute paths.
    let mut shown = kernelgate_eval::ShownPaths::default();
    for path in [opts.kernel.as_path(), problem.as_path()] {
        shown.add(path, path.display().to_string());
    }
    shown.apply_outcome(&mut result.outcome);
    let needs_gpu = needs_gpu(&result);
    Ok(LocalEval { result, needs_gpu })
}

/// A file path when it exists, else a key of the dataset named by the config.
fn resolve_problem(repo: &Path, config: &Config, query: &str) -> anyhow::Result<(PathBuf, String)> {
    let as_path = PathBuf::from(query);
    let candidates = [as_path.clone(), repo.join(&as_path)];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        let label = ProblemSet::load(&repo.join(&config.dataset.root))
            .ok()
            .and_then(|set| set.by_path(p).map(|pr| pr.key.clone()))
            .unwrap_or_else(|| query.to_string());
        return Ok((p.clone(), label));
    }
    let root = repo.join(&config.dataset.root);
    let set = ProblemSet::load(&root).with_context(|| {
        format!(
            "`{query}` is not a file, and the dataset at {} could not be loaded to look it up",
            root.display()
        )
    })?;
    let problem = set
        .find(query)
        .with_context(|| format!("looking up --problem in {}", root.display()))?;
    Ok((problem.path.clone(), problem.key.clone()))
}

/// The problem and precision the kernel's directive or path maps it to (`kernelgate kernels`).
fn mapped_problem(
    repo: &Path,
    config: &Config,
    kernel: &Path,
) -> anyhow::Result<(PathBuf, String, Precision)> {
    let spec = config.dataset_spec(repo);
    let set = spec.load().with_context(|| {
        format!("--problem not given, and the problems to map the kernel to could not be loaded from {spec}")
    })?;
    let k = kernelgate_model::Kernel::resolve_one(repo, kernel, config, &set).map_err(|e| {
        anyhow::anyhow!(
            "--problem not given, and {} maps to no problem: {e}\n  help: pass --problem KEY \
             (`kernelgate problems` lists them), or add `# kernelgate: problem=level1/19_ReLU` \
             near the top of the kernel",
            kernel.display()
        )
    })?;
    let p = set.get(&k.problem_key).with_context(|| {
        format!(
            "{} maps to {}, which is not a problem",
            kernel.display(),
            k.problem_key
        )
    })?;
    Ok((p.path.clone(), p.key.clone(), k.precision))
}

/// A CPU run whose failure is torch reporting that CUDA is missing.
fn needs_gpu(r: &EvalResult) -> bool {
    let on_cpu = r
        .device
        .as_ref()
        .is_none_or(kernelgate_model::RanOn::is_cpu);
    on_cpu && r.outcome.torch_found_no_cuda()
}

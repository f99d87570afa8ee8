//! Starting a job's child: the interpreter, the harness, the sandbox, the environment the
//! runner sees (extension builds, GPUs, nvcc), up to the moment it waits for its job.

use kernelgate_model::Device;

use crate::child;
use crate::error::EvalError;
use crate::extensions::{ExtensionsDir, TorchBuilds};
use crate::hardware::nvidia_smi;
use crate::job::JobSpec;
use crate::locate::{find_harness, find_python, libcuda_present};
use crate::pch;
use crate::protocol::{Job, JobTiming, HARNESS_PROTOCOL};
use crate::store::{BuildSettings, BuildStore, Lookup, StoreKey};

use std::path::{Path, PathBuf};

/// A job's child, started and waiting for its job.
pub(crate) struct Started {
    pub(crate) spawned: child::Spawned,
    pub(crate) python: PathBuf,
    /// What kernelgate publishes into the build store once the job built (a store miss).
    pub(crate) publish: Option<Publish>,
    /// The build came from the build store (a hit): loaded read-only.
    pub(crate) from_store: bool,
    /// Builds of this job (the head's, the base's) not in the build store when the process
    /// started: one there by the time the job is given (a build job ended meanwhile) means a
    /// fresh process that loads it ([`Started::stale`]).
    pub(crate) missed: Vec<(BuildStore, StoreKey)>,
    /// Deleted with the job: the child's working directory, result file and logs.
    pub(crate) _dir: tempfile::TempDir,
}

impl Started {
    /// A build this process would compile is in the build store now: it was started before
    /// its build job ended (`pr` starts processes ahead). Starting it again loads the build.
    pub(crate) fn stale(&self) -> bool {
        self.missed
            .iter()
            .any(|(store, key)| matches!(store.lookup(key), Lookup::Hit(_)))
    }
}

/// A build store miss: where the job builds and the key kernelgate publishes it under.
pub(crate) struct Publish {
    pub(crate) store: BuildStore,
    pub(crate) key: StoreKey,
    /// The job's own staging directory (`TORCH_EXTENSIONS_DIR` in the child).
    pub(crate) staging: PathBuf,
    /// The entry found was corrupt (why): removed, built again.
    pub(crate) corrupt: Option<String>,
}

/// The build store's key of one build of a job, and the store (`None`: the job does not use
/// the store: another extensions directory, or a dependency set not all known).
fn store_key(spec: &JobSpec, python: &Path, build_key: &str) -> Option<(BuildStore, StoreKey)> {
    let ExtensionsDir::Store(store) = &spec.extensions_dir else {
        return None;
    };
    if !spec.sources_known {
        return None;
    }
    let problem = std::fs::read(&spec.problem).ok()?;
    let switch = nvcc_side_by_side(
        &spec.extensions_dir,
        std::env::var(NVCC_PARALLEL_ENV).ok().as_deref(),
    );
    let settings = BuildSettings {
        arch_list: cuda_arch_list(),
        kernelgate: vec![
            format!("{NVCC_PARALLEL_ENV}={switch}"),
            format!(
                "pch={}",
                pch::job_pch_root().map_or("none".into(), |p| p.display().to_string())
            ),
        ],
    };
    Some((
        store.clone(),
        StoreKey::for_build(build_key, &problem, python, &settings),
    ))
}

/// A build-only job whose build is in the build store: nothing to start (`None`: start it).
pub(crate) fn stored_build(spec: &JobSpec) -> Option<PathBuf> {
    if !spec.build_only {
        return None;
    }
    let python = job_python(spec);
    let src = kernelgate_model::read_source(&spec.kernel).ok()?;
    let key = kernelgate_model::deps::build_key(&spec.kernel, &src, &spec.sources);
    let (store, key) = store_key(spec, &python, &key)?;
    match store.lookup(&key) {
        Lookup::Hit(entry) => Some(entry),
        _ => None,
    }
}

/// The job's interpreter. The child starts in its own directory: a relative path to it (not a
/// bare name looked up on `PATH`) must not move with it.
fn job_python(spec: &JobSpec) -> PathBuf {
    let python = spec
        .python
        .clone()
        .unwrap_or_else(|| find_python(Path::new(".")));
    if python.components().count() > 1 && python.is_relative() {
        std::env::current_dir()
            .map(|c| c.join(&python))
            .unwrap_or(python)
    } else {
        python
    }
}

pub(crate) fn start(spec: &JobSpec, seed: u64) -> Result<Started, EvalError> {
    let harness = match &spec.harness {
        Some(h) => h.clone(),
        None => find_harness()?,
    };
    let harness = std::fs::canonicalize(&harness).unwrap_or(harness);
    let python = job_python(spec);
    // An unreadable or non-UTF-8 kernel is the candidate's failure, not the harness's.
    let kernel_src = kernelgate_model::read_source(&spec.kernel)
        .map_err(|e| EvalError::KernelSource(e.to_string()))?;
    let base_src = match &spec.base_kernel {
        Some(b) => Some(
            std::fs::read_to_string(b).map_err(|source| EvalError::Read {
                path: b.clone(),
                source,
            })?,
        ),
        None => None,
    };
    std::fs::metadata(&spec.problem).map_err(|source| EvalError::Read {
        path: spec.problem.clone(),
        source,
    })?;
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let cpu_backend = kernelgate_model::classify(None, &kernel_src, None).runs_on_cpu;
    // CPU-only C++ kernels run on the CPU even under `--device cuda` (they cannot take CUDA tensors).
    let may_use_gpu =
        spec.device != Device::Cpu && !cpu_backend && !spec.build_only && libcuda_present();

    let dir = tempfile::Builder::new()
        .prefix("kernelgate-job-")
        .tempdir()
        .map_err(|source| EvalError::Read {
            path: std::env::temp_dir(),
            source,
        })?;
    let job_id: String = format!("{:016x}", rand::random::<u64>());
    let mut job = Job {
        protocol: HARNESS_PROTOCOL,
        job_id,
        problem: abs(&spec.problem).display().to_string(),
        kernel: abs(&spec.kernel).display().to_string(),
        base_kernel: spec
            .base_kernel
            .as_deref()
            .map(|p| abs(p).display().to_string()),
        base_extensions_dir: None,
        base_prebuilt: false,
        prebuilt: false,
        device: spec.device,
        cpu_backend,
        precision: spec.precision,
        tolerance: spec.precision.tolerance(),
        trials: spec.trials.max(1),
        seed,
        shifted_trials: spec.shifted_trials.min(2),
        inputs_on_device: spec.inputs_on_device,
        count_flops: spec.count_flops.unwrap_or(may_use_gpu),
        audit: spec.audit,
        build_only: spec.build_only,
        timing: spec.timing.as_ref().map(|t| JobTiming {
            warmup: t.warmup,
            min_samples: t.min_samples,
            max_samples: t.max_samples,
            budget_s: t.budget_s,
            ci_target_pct: t.ci_target_pct,
            l2: t.l2,
            input_sets: 3,
        }),
        result_path: String::new(),
        progress_path: String::new(),
        sandbox: None,
        spawn_unix: None,
    };
    // The child works in its own directory: a relative cache path would land there.
    let absolute = |d: &Path| {
        if d.is_relative() {
            std::env::current_dir()
                .map(|c| c.join(d))
                .unwrap_or_else(|_| d.to_path_buf())
        } else {
            d.to_path_buf()
        }
    };
    // Builds are keyed by everything they read: an edited `.cu` or header is a new build.
    let kernel_key = kernelgate_model::deps::build_key(&spec.kernel, &kernel_src, &spec.sources);
    let base_key = match (&spec.base_kernel, &base_src) {
        (Some(b), Some(src)) => Some(kernelgate_model::deps::build_key(
            b,
            src,
            &spec.base_sources,
        )),
        _ => None,
    };
    // torch's own directory: the child writes only the builds its source names; where they
    // are not all known, it builds in its own directory instead.
    let torch_builds = match &spec.extensions_dir {
        ExtensionsDir::Torch { root, exact } => {
            let builds = TorchBuilds::new(
                &absolute(root),
                *exact,
                &python,
                spec.extension_names.as_deref(),
            );
            if builds.is_none() {
                eprintln!(
                    "note: {} builds in a fresh directory, not torch's own: the names of the \
                     extensions it builds are not all plain strings in its source (give \
                     `load_inline` a literal `name=` to reuse torch's builds)",
                    spec.kernel.display()
                );
            }
            builds
        }
        _ => None,
    };
    let extensions_dir = match (&spec.extensions_dir, &torch_builds) {
        (ExtensionsDir::Torch { .. }, None) => ExtensionsDir::PerJob,
        (d, _) => d.clone(),
    };
    let mut dirs = extensions_dir.job_dirs(
        dir.path(),
        &kernel_key,
        base_key.as_deref(),
        spec.base_prebuilt,
    );
    // The build store: a verified entry is loaded read-only; a miss builds in the job's own
    // staging directory, which kernelgate publishes once the job built. The base's build is
    // only ever read from the store: one the eval builds lies where the candidate's process
    // can write, and is never published.
    let mut publish = None;
    let mut from_store = None;
    let mut missed = Vec::new();
    if let Some((store, key)) = store_key(spec, &python, &kernel_key) {
        match store.lookup(&key) {
            Lookup::Hit(entry) => from_store = Some(entry),
            found => {
                missed.push((store.clone(), key.clone()));
                publish = Some(Publish {
                    store,
                    key,
                    staging: absolute(&dirs.head),
                    corrupt: match found {
                        Lookup::Corrupt(why) => Some(why),
                        _ => None,
                    },
                })
            }
        }
    }
    if let Some(bkey) = &base_key {
        if let Some((store, key)) = store_key(spec, &python, bkey) {
            match store.lookup(&key) {
                Lookup::Hit(entry) => {
                    dirs.base = Some(entry);
                    dirs.base_read_only = true;
                }
                _ => missed.push((store, key)),
            }
        }
    }
    let ext_dir = match (&torch_builds, &from_store) {
        (_, Some(entry)) => entry.clone(),
        (Some(b), None) => b.dir.clone(),
        (None, None) => absolute(&dirs.head),
    };
    job.prebuilt = from_store.is_some();
    let base_ext_dir = dirs.base.as_deref().map(absolute);
    job.base_extensions_dir = base_ext_dir.as_ref().map(|d| d.display().to_string());
    job.base_prebuilt = dirs.base_read_only;
    let mut env = vec![(
        "TORCH_EXTENSIONS_DIR".to_string(),
        ext_dir.display().to_string(),
    )];
    if let Some(b) = &torch_builds {
        // The runner looks for the builds of these names only (it may not list the folder).
        env.push(("KERNELGATE_TORCH_BUILDS".into(), b.names.join(":")));
    }
    if let Some(gpu) = spec.gpu {
        let parent = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        env.push((
            "CUDA_VISIBLE_DEVICES".into(),
            visible_device(parent.as_deref(), gpu),
        ));
    }
    if !may_use_gpu {
        // Keep a CPU job (and a build) off the GPU even where one exists.
        env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
    }
    if spec.build_only
        || matches!(
            extensions_dir,
            ExtensionsDir::Keyed(_) | ExtensionsDir::Store(_)
        )
    {
        // The build (no GPU visible) and the eval must compile for the same architectures,
        // or the eval rebuilds what the build left. A job that builds for itself keeps the
        // environment's own list, as `python kernel.py` does, so it can load that build.
        if let Some(arch) = cuda_arch_list() {
            env.push(("TORCH_CUDA_ARCH_LIST".into(), arch));
        }
    }
    let switch = nvcc_side_by_side(
        &extensions_dir,
        std::env::var(NVCC_PARALLEL_ENV).ok().as_deref(),
    );
    env.push((NVCC_PARALLEL_ENV.into(), switch.into()));
    if may_use_gpu && spec.audit && std::env::var("KERNELGATE_WARM_PROFILER").as_deref() == Ok("1")
    {
        // Opt-in only: the profiler started at load saves its start (2-6 s) in the audit, but
        // on the H200 it made a short reference read up to 1.8x slower between the candidate's
        // calls, in its own process and in the eval beside it (docs/timing.md, issue 28).
        env.push(("KERNELGATE_WARM_PROFILER".into(), "1".into()));
    }
    if spec.build_only && std::env::var_os("MAX_JOBS").is_none() {
        // Several builds run at once: two compiler processes each.
        env.push(("MAX_JOBS".into(), "2".into()));
    }
    // The precompiled torch header (`kernelgate pch`): read, never written, by the child.
    let pch_root = pch::job_pch_root();
    if let Some(root) = &pch_root {
        env.push((pch::PCH_DIR_ENV.into(), root.display().to_string()));
    }
    // What is granted to the sandboxed child must exist.
    let build_dirs: Vec<PathBuf> = match (&torch_builds, &from_store) {
        // A store entry is read, never written.
        (_, Some(_)) => Vec::new(),
        (Some(b), None) => b.writable(),
        (None, None) if extensions_dir.is_shared() => vec![ext_dir.clone()],
        (None, None) => Vec::new(),
    };
    for d in &build_dirs {
        let _ = std::fs::create_dir_all(d);
    }
    if let Some(d) = &base_ext_dir {
        // Granted to the child (read-only when prebuilt), so it must exist.
        let _ = std::fs::create_dir_all(d);
    }
    let spawned = child::spawn(child::Launch {
        python: &python,
        harness: &harness,
        job,
        dir: dir.path(),
        compile_timeout: spec.compile_timeout,
        run_timeout: spec.run_timeout,
        memory_limit_bytes: spec.memory_limit_mb.saturating_mul(1 << 20),
        rlimit_as: !may_use_gpu,
        env,
        sandbox: spec.sandbox,
        progress: spec.progress,
        cpus: spec.cpus.clone(),
        keep_fds: Vec::new(),
        gpu: may_use_gpu,
        judge_workers: judge_workers(spec),
        read_files: [
            Some(&spec.problem),
            Some(&spec.kernel),
            spec.base_kernel.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|p| abs(p))
        .chain(kernel_dir(&abs(&spec.kernel)))
        // The files its build reads (a `.cu` under `csrc/`, a shared header), and its base's:
        // regular files only (a link would grant whatever it names).
        .chain(
            spec.sources
                .iter()
                .chain(&spec.base_sources)
                .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
                .map(|p| abs(p)),
        )
        // A prebuilt base's directory is read, never written: later jobs load that build.
        .chain(base_ext_dir.clone().filter(|_| dirs.base_read_only))
        // So is the candidate's build from the store.
        .chain(from_store.clone())
        .chain(pch_root)
        .collect(),
        write_dirs: build_dirs
            .into_iter()
            .chain(base_ext_dir.clone().filter(|_| !dirs.base_read_only))
            .collect(),
    })
    .map_err(|e| launch_error(e, &python))?;
    Ok(Started {
        spawned,
        python,
        publish,
        from_store: from_store.is_some(),
        missed,
        _dir: dir,
    })
}

pub(crate) fn launch_error(e: child::LaunchError, python: &Path) -> EvalError {
    match e {
        child::LaunchError::Io(source) => EvalError::Spawn {
            python: python.to_path_buf(),
            source,
        },
        child::LaunchError::Sandbox(e) => EvalError::Sandbox(e),
        child::LaunchError::Exec(e) => EvalError::Spawn {
            python: python.to_path_buf(),
            source: std::io::Error::other(e),
        },
    }
}

/// The kernel's own directory, which the job may read: kernels load sources kept beside them
/// (`load(sources=[".../kernel.cu"])`), tables and headers. Not when it is a repository's root
/// (its `.git` holds the remote's URL and maybe credentials) or the filesystem's root.
fn kernel_dir(kernel: &Path) -> Option<PathBuf> {
    let dir = kernel.parent()?;
    let is_root = dir.parent().is_none() || dir.join(".git").exists();
    (!is_root).then(|| dir.to_path_buf())
}

/// The variable that switches nvcc's host and device steps side by side (`kg_nvcc.py`).
const NVCC_PARALLEL_ENV: &str = "KERNELGATE_NVCC_PARALLEL";

/// The child's `KERNELGATE_NVCC_PARALLEL`: on for builds kept per source (`pr`, `baseline`)
/// unless this process has it `0` (proven on the GPU: docs/eval.md). torch writes the wrapper
/// into `build.ninja`, so a build and its eval agree; a build for the contributor's own
/// directory keeps nvcc as torch finds it, or `python kernel.py`'s build would not be reused.
/// Always set in the child, which would otherwise inherit this process's value.
fn nvcc_side_by_side(dir: &ExtensionsDir, ours: Option<&str>) -> &'static str {
    match dir {
        ExtensionsDir::Keyed(_) | ExtensionsDir::Store(_) if ours != Some("0") => "1",
        _ => "0",
    }
}

/// `TORCH_CUDA_ARCH_LIST` for extension builds: the environment's own when set, else the
/// compute capabilities of this machine's GPUs (`nvidia-smi`), e.g. `9.0`; `None` without GPUs.
fn cuda_arch_list() -> Option<String> {
    static ARCH: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ARCH.get_or_init(|| {
        if let Some(v) = std::env::var("TORCH_CUDA_ARCH_LIST")
            .ok()
            .filter(|v| !v.is_empty())
        {
            return Some(v);
        }
        let out = nvidia_smi(&["--query-gpu=compute_cap", "--format=csv,noheader"])?;
        let mut caps: Vec<String> = out
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .collect();
        caps.sort();
        caps.dedup();
        (!caps.is_empty()).then(|| caps.join(";"))
    })
    .clone()
}

/// What the child's `CUDA_VISIBLE_DEVICES` must say for GPU `index` of this process: the
/// index-th entry of our own list when one is set (CUDA renumbers visible GPUs from 0, so `2,3`
/// makes GPU 1 the physical GPU 3, or a UUID), else the index itself.
fn visible_device(parent: Option<&str>, index: u32) -> String {
    parent
        .and_then(|list| {
            list.split(',')
                .map(str::trim)
                .take_while(|e| !e.is_empty() && *e != "-1")
                .nth(index as usize)
        })
        .map(str::to_string)
        .unwrap_or_else(|| index.to_string())
}

/// The workers the harness's judge starts for a job: the candidate's, and with timing the
/// reference's and the base version's. A build job has none (it only compiles, and is confined
/// before its exec).
fn judge_workers(spec: &JobSpec) -> usize {
    if spec.build_only {
        return 0;
    }
    let timed = spec.timing.is_some();
    1 + usize::from(timed) + usize::from(timed && spec.base_kernel.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_on_gpu_n_sees_the_nth_visible_gpu() {
        assert_eq!(visible_device(None, 1), "1");
        assert_eq!(visible_device(Some(""), 0), "0");
        assert_eq!(visible_device(Some("2,3"), 0), "2");
        assert_eq!(visible_device(Some("2, 3"), 1), "3");
        assert_eq!(visible_device(Some("GPU-aa,GPU-bb"), 1), "GPU-bb");
        // Fewer entries than the index: the index (CUDA then reports no device, an outcome).
        assert_eq!(visible_device(Some("5"), 1), "1");
    }

    #[test]
    fn nvcc_side_by_side_is_on_for_kept_builds_unless_turned_off() {
        let keyed = ExtensionsDir::Keyed("/runner/ext".into());
        assert_eq!(nvcc_side_by_side(&keyed, Some("1")), "1");
        assert_eq!(nvcc_side_by_side(&keyed, None), "1");
        assert_eq!(nvcc_side_by_side(&keyed, Some("0")), "0");
        // The contributor's own build directory and a job's throwaway one: nvcc as torch finds
        // it, even where this process has the switch on (the child inherits the environment).
        let torch = ExtensionsDir::Torch {
            root: "/home/u/.cache/torch_extensions".into(),
            exact: false,
        };
        assert_eq!(nvcc_side_by_side(&torch, Some("1")), "0");
        assert_eq!(nvcc_side_by_side(&ExtensionsDir::PerJob, Some("1")), "0");
    }
}

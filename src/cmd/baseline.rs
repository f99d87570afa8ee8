//! `kernelgate baseline`: time the references on this machine and write the baseline files
//! under `results/timing/<HARDWARE>/` (KernelBench's two formats and kernelgate's own).
//!
//! Only the repository's own problem files run here (no candidate code), in one child process
//! of the runner's Python importing the harness extension's `kg_timing.baseline`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use kernelgate_model::{Config, Device};
use kernelgate_timing::baseline::{BASELINES_FILE, KB_COMPILE_FILE, KB_EAGER_FILE, KERNELS_FILE};
use kernelgate_timing::{
    hardware_dir_name, stale_check, BaselineEntry, BaselineFile, HardwareKey, KbEntry, KbFile,
    Lookup, Query, Sample, SeriesStats, Staleness, Variant, Work,
};
use serde::Deserialize;

use crate::cli::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only problems of this level.
    #[arg(long)]
    pub level: Option<u32>,
    /// Only these problems (`level1/3_ReLU`, `3_ReLU` or a path); repeatable.
    #[arg(long = "problem", value_name = "KEY")]
    pub problems: Vec<String>,
    /// Also time `torch.compile` (inductor, default mode) of each reference.
    #[arg(long)]
    pub compile: bool,
    /// Only `torch.compile`, not eager.
    #[arg(long, conflicts_with = "compile")]
    pub compile_only: bool,
    /// auto | cuda | cpu (default: `[defaults] device`).
    #[arg(long)]
    pub device: Option<String>,
    /// Folder name under results/timing/ (default: from the device name, e.g. NVIDIA_H200).
    #[arg(long)]
    pub hardware: Option<String>,
    /// Also time the accepted kernels of this checkout (normally `main`) through the isolated
    /// harness into `kernelgate_kernels.json`, so pull requests compare against them.
    #[arg(long)]
    pub kernels: bool,
    /// Whole-run limit in seconds (default: 60 s per problem and variant, plus 120 s).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Print what the run would time as JSON (with `--kernels`: each kernel and its mapping,
    /// as `kernelgate kernels` maps it) and exit without running anything.
    #[arg(long)]
    pub plan: bool,
    #[command(flatten)]
    pub eval: crate::cli::EvalOptions,
}

#[derive(Deserialize)]
struct ChildOut {
    hardware: ChildHardware,
    device: String,
    l2: String,
    #[serde(default)]
    bandwidth_gbs: Option<f64>,
    #[serde(default)]
    idle_sync_ms: Option<f64>,
    results: Vec<ChildResult>,
}

#[derive(Deserialize)]
struct ChildHardware {
    gpu: String,
    driver: String,
    cuda: String,
    torch: String,
}

#[derive(Deserialize)]
struct ChildResult {
    problem: String,
    variant: String,
    #[serde(default)]
    samples: Vec<Sample>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    traceback: Option<String>,
    #[serde(default)]
    input_bytes: Option<u64>,
    #[serde(default)]
    output_bytes: Option<u64>,
    #[serde(default)]
    flops: Option<u64>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    args.eval.apply(&mut cfg)?;
    let spec = cfg.dataset_spec(&cli.repo);
    let set = spec
        .load()
        .with_context(|| format!("loading problems from {spec}"))?;
    let problems = kernelgate::baseline::select_problems(&set, args.level, &args.problems)?;
    if args.plan {
        print_plan(&cli.repo, &cfg, &set, &problems, args.kernels)?;
        return Ok(0);
    }
    let device = match args.device.as_deref() {
        Some(d @ ("auto" | "cuda" | "cpu")) => d.to_string(),
        Some(d) => bail!("--device {d}: expected auto, cuda or cpu"),
        None => match cfg.defaults.device {
            Device::Auto => "auto".to_string(),
            d => d.as_str().to_string(),
        },
    };
    let precision = cfg.defaults.precision;
    let variants: Vec<&str> = if args.compile_only {
        vec!["compile"]
    } else if args.compile || cfg.timing.compile_baseline {
        vec!["eager", "compile"]
    } else {
        vec!["eager"]
    };

    let python = cfg
        .harness
        .python
        .clone()
        .unwrap_or_else(|| kernelgate_eval::find_python(&cli.repo));
    let harness = kernelgate_eval::find_harness()?;
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    let module = work.path().join("kernelgate_harness.so");
    std::os::unix::fs::symlink(
        std::fs::canonicalize(&harness).unwrap_or(harness.clone()),
        &module,
    )
    .with_context(|| {
        format!(
            "linking {} into {}",
            harness.display(),
            work.path().display()
        )
    })?;
    let t = &cfg.timing;
    let job = serde_json::json!({
        "problems": problems.iter().map(|p| serde_json::json!({
            "key": p.key,
            "path": std::fs::canonicalize(&p.path).unwrap_or(p.path.clone()),
        })).collect::<Vec<_>>(),
        "variants": variants,
        "device": device,
        "precision": precision.as_str(),
        "seed": 42,
        "input_sets": 3,
        "timing": {
            "warmup": t.warmup.max(5),  // KernelBench warms references up 5 times
            "min_samples": t.min_samples.max(30),
            "max_samples": t.max_samples.max(100),
            "budget_s": t.budget_s,
            "ci_target_pct": t.ci_target_pct,
            "l2": match t.l2 { kernelgate_model::L2Mode::Cold => "cold", kernelgate_model::L2Mode::Warm => "warm" },
        },
    });
    let job_path = work.path().join("job.json");
    let out_path = work.path().join("result.json");
    std::fs::write(&job_path, job.to_string())?;
    let limit = Duration::from_secs(
        args.timeout
            .unwrap_or(120 + 60 * (problems.len() * variants.len()) as u64 + t.budget_s as u64),
    );
    eprintln!(
        "timing {} reference(s) x {} on {device} with {} ...",
        problems.len(),
        variants.join("+"),
        python.display()
    );
    let timed_out = run_child(&python, work.path(), &job_path, &out_path, limit)?;
    let text = std::fs::read_to_string(&out_path).with_context(|| {
        format!(
            "the baseline child wrote no result to {} before it was stopped",
            out_path.display()
        )
    })?;
    let out: ChildOut =
        serde_json::from_str(&text).context("parsing the baseline child's result")?;

    let key = HardwareKey {
        gpu: out.hardware.gpu.clone(),
        driver: out.hardware.driver.clone(),
        cuda: out.hardware.cuda.clone(),
        torch: out.hardware.torch.clone(),
        precision,
    };
    let hw_dir = args
        .hardware
        .clone()
        .unwrap_or_else(|| hardware_dir_name(&key.gpu));
    let dir = cfg.results_root(&cli.repo).join("timing").join(&hw_dir);
    let kb_device = if out.device.starts_with("cuda") {
        "cuda:0".to_string()
    } else {
        out.device.clone()
    };
    let ours_path = dir.join(BASELINES_FILE);
    let mut ours = BaselineFile::load_or_default(&ours_path)?;
    let mut kb_eager = KbFile::load_or_default(&dir.join(KB_EAGER_FILE))?;
    let mut kb_compile = KbFile::load_or_default(&dir.join(KB_COMPILE_FILE))?;
    let commit = git_head(&cli.repo);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);

    println!(
        "{:<32} {:<8} {:>11} {:>21} {:>5} {:>9}  NOTE",
        "PROBLEM", "VARIANT", "MEDIAN ms", "95% CI of median", "N", "CV %"
    );
    let mut failed = 0;
    let mut noisy = 0;
    let max_cv = cfg.timing.baseline_max_cv_pct;
    let mut wrote_eager = false;
    let mut wrote_compile = false;
    for r in &out.results {
        let Some(p) = problems.iter().find(|p| p.key == r.problem) else {
            continue;
        };
        let variant = if r.variant == "compile" {
            Variant::Compile
        } else {
            Variant::Eager
        };
        if let Some(e) = &r.error {
            failed += 1;
            println!(
                "{:<32} {:<8} {:>11} {:>21} {:>5} {:>9}  FAILED: {e}",
                p.key, r.variant, "-", "-", "-", "-"
            );
            if let Some(tb) = &r.traceback {
                eprintln!("{}: {} traceback:\n{tb}", p.path.display(), r.variant);
            }
            continue;
        }
        let ms: Vec<f64> = r.samples.iter().map(|s| s.ms).collect();
        let stats = match SeriesStats::from_samples(&ms) {
            Ok(s) => s,
            Err(e) => {
                failed += 1;
                println!("{:<32} {:<8} FAILED: {e}", p.key, r.variant);
                continue;
            }
        };
        if stats.robust_cv_pct() > max_cv {
            // Too wide a spread to compare pull requests against: keep what is stored.
            noisy += 1;
            println!(
                "{:<32} {:<8} {:>11.4} {:>21} {:>5} {:>9.3}  NOT WRITTEN: too noisy (robust CV {:.1}% > {max_cv}%)",
                p.key,
                r.variant,
                stats.median,
                format!("{:.4}..{:.4}", stats.ci95_median.0, stats.ci95_median.1),
                stats.n,
                stats.cv_pct(),
                stats.robust_cv_pct(),
            );
            continue;
        }
        let q = Query {
            problem: &p.key,
            problem_sha256: &p.sha256,
            variant,
            kernel: None,
            hardware: &key,
            l2: &out.l2,
        };
        let note = match ours.lookup(&q) {
            Lookup::Match(prev) => match stale_check(&ms, prev, cfg.timing.threshold_pct) {
                Ok(Staleness::Stale { ratio, .. }) => {
                    format!("replaces a baseline {:+.1}% away", (ratio - 1.0) * 100.0)
                }
                Ok(Staleness::Fresh { ratio }) => format!(
                    "agrees with the stored baseline ({:+.1}%)",
                    (ratio - 1.0) * 100.0
                ),
                Err(_) => String::new(),
            },
            Lookup::ProblemChanged { .. } => {
                "problem changed since the stored baseline".to_string()
            }
            Lookup::KeyMismatch { .. } | Lookup::Missing => "new".to_string(),
        };
        println!(
            "{:<32} {:<8} {:>11.4} {:>21} {:>5} {:>9.3}  {note}",
            p.key,
            r.variant,
            stats.median,
            format!("{:.4}..{:.4}", stats.ci95_median.0, stats.ci95_median.1),
            stats.n,
            stats.cv_pct()
        );
        let level = format!("level{}", p.level);
        let kb = KbEntry::from_stats(&stats, &key.gpu, &kb_device);
        match variant {
            Variant::Compile => {
                kb_compile.insert(&level, &p.file_name(), kb);
                wrote_compile = true;
            }
            _ => {
                kb_eager.insert(&level, &p.file_name(), kb);
                wrote_eager = true;
            }
        }
        ours.upsert(BaselineEntry {
            problem: p.key.clone(),
            problem_sha256: p.sha256.clone(),
            variant,
            kernel: None,
            kernel_sha256: None,
            hardware: key.clone(),
            l2: out.l2.clone(),
            stats,
            samples_ms: ms,
            commit: commit.clone(),
            recorded_at: now,
            work: match (r.input_bytes, r.output_bytes) {
                (Some(i), Some(o)) => Some(Work {
                    input_bytes: i,
                    output_bytes: o,
                    flops: r.flops.unwrap_or(0),
                }),
                _ => None,
            },
        });
    }
    if wrote_eager {
        kb_eager.save(&dir.join(KB_EAGER_FILE))?;
    }
    if wrote_compile {
        kb_compile.save(&dir.join(KB_COMPILE_FILE))?;
    }
    if wrote_eager || wrote_compile {
        ours.save(&ours_path)?;
    }
    let mut wrote_kernels = false;
    if args.kernels {
        let (k_failed, k_noisy, k_wrote) = time_kernels(
            cli,
            &cfg,
            &set,
            &problems,
            &key,
            &out.l2,
            &dir,
            commit.as_deref(),
            now,
        )?;
        failed += k_failed;
        noisy += k_noisy;
        wrote_kernels = k_wrote;
    }
    if let Some(bw) = out.bandwidth_gbs {
        eprintln!("measured device copy bandwidth: {bw:.0} GB/s");
    }
    if let Some(s) = out.idle_sync_ms {
        eprintln!("idle context synchronise: {:.1} us", s * 1e3);
    }
    let shown = dir
        .strip_prefix(&cli.repo)
        .unwrap_or(&dir)
        .display()
        .to_string();
    if wrote_eager || wrote_compile || wrote_kernels {
        eprintln!("wrote {shown} ({key})");
    } else {
        eprintln!("wrote nothing: no sample was both timed and quiet enough; {shown} is unchanged");
    }
    if noisy > 0 {
        eprintln!(
            "warning: {noisy} sample(s) too noisy to be a baseline (robust coefficient of variation, \
             0.74 x IQR / median, above [timing] baseline_max_cv_pct = {max_cv}%): not written. Re-run on an idle runner \
             (no other jobs, fixed clocks), or raise baseline_max_cv_pct in kernelgate.toml"
        );
        failed += noisy;
    }
    let missing =
        problems.len() * variants.len() - out.results.len().min(problems.len() * variants.len());
    if timed_out || missing > 0 {
        eprintln!("{missing} problem/variant pair(s) not timed before the limit");
        failed += missing;
    }
    if failed > 0 {
        eprintln!(
            "{failed} reference(s) or kernel(s) failed to time or were too noisy; their previous baselines, if any, are kept"
        );
        return Ok(1);
    }
    Ok(0)
}

/// Times every accepted kernel of the selected problems through `kernelgate_eval::run_job`
/// (full correctness checks first) and records the candidate series under the reference's
/// hardware key. Returns how many failed.
#[allow(clippy::too_many_arguments)]
fn time_kernels(
    cli: &Cli,
    cfg: &Config,
    set: &kernelgate_model::ProblemSet,
    problems: &[&kernelgate_model::Problem],
    key: &HardwareKey,
    l2: &str,
    dir: &Path,
    commit: Option<&str>,
    now: u64,
) -> anyhow::Result<(usize, usize, bool)> {
    let (kernels, errors) = kernelgate::baseline::kernel_plan(&cli.repo, cfg, set, problems);
    for e in &errors {
        eprintln!("warning: {e}");
    }
    let path = dir.join(KERNELS_FILE);
    let mut file = BaselineFile::load_or_default(&path)?;
    // One torch extensions folder for every kernel of the run (kernels sharing a source compile
    // once); TORCH_EXTENSIONS_DIR, torch's own variable, keeps them across runs.
    let scratch = tempfile::Builder::new()
        .prefix("kernelgate-ext-")
        .tempdir()?;
    let extensions = std::env::var_os("TORCH_EXTENSIONS_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let mut failed = 0;
    let mut noisy = 0;
    let mut wrote = false;
    for k in &kernels {
        let Some(p) = problems.iter().find(|p| p.key == k.problem_key) else {
            continue;
        };
        if k.precision != key.precision {
            println!(
                "{:<32} {:<8} skipped: a {} kernel; this run times {} (pass --precision {})",
                k.path.display(),
                "kernel",
                k.precision,
                key.precision,
                k.precision
            );
            continue;
        }
        let kpath = if k.path.is_absolute() {
            k.path.clone()
        } else {
            cli.repo.join(&k.path)
        };
        let source = std::fs::read_to_string(&kpath)
            .with_context(|| format!("reading {}", kpath.display()))?;
        let mut spec = kernelgate_eval::JobSpec::new(&p.path, &kpath);
        spec.problem_label = Some(p.key.clone());
        spec.kernel_label = Some(k.path.display().to_string());
        spec.precision = k.precision;
        spec.seed = Some(42);
        spec.timing = Some(cfg.timing.clone());
        spec.python = cfg.harness.python.clone();
        spec.compile_timeout = Duration::from_secs(cfg.harness.compile_timeout_s);
        spec.run_timeout = Duration::from_secs(cfg.harness.run_timeout_s);
        spec.memory_limit_mb = cfg.harness.memory_limit_mb;
        spec.extensions_dir = Some(extensions.clone());
        spec.sandbox =
            kernelgate_eval::SandboxMode::resolve(cfg.sandbox.enabled, cfg.sandbox.required)?;
        if !key.cuda.is_empty() && key.cuda != "none" {
            spec.device = Device::Cuda;
        } else {
            spec.device = Device::Cpu;
        }
        let r = kernelgate_eval::run_job(&spec);
        // CPU-only C++ kernels run on the CPU even on a GPU runner: record them under the key
        // of where they ran, as `kernelgate pr` looks them up.
        let kernel_key = match (r.device.as_deref(), r.torch.as_deref()) {
            (Some("cpu"), Some(torch)) if key.cuda != "none" => {
                let python = spec
                    .python
                    .clone()
                    .unwrap_or_else(|| kernelgate_eval::find_python(Path::new(".")));
                kernelgate::pr::adapters::hardware_key("cpu", torch, k.precision, &python)
            }
            _ => key.clone(),
        };
        let samples = r.timing.as_ref().and_then(|t| t.samples.get("candidate"));
        let ms: Vec<f64> = samples
            .map(|s| s.iter().map(|x| x.ms).collect())
            .unwrap_or_default();
        let stats = match (r.passed(), SeriesStats::from_samples(&ms)) {
            (true, Ok(st)) => st,
            _ => {
                failed += 1;
                println!(
                    "{:<32} {:<8} FAILED: {}",
                    k.path.display(),
                    "kernel",
                    r.outcome.summary()
                );
                continue;
            }
        };
        let too_noisy = stats.robust_cv_pct() > cfg.timing.baseline_max_cv_pct;
        println!(
            "{:<32} {:<8} {:>11.4} {:>21} {:>5} {:>9.3}  {}",
            k.path.display(),
            "kernel",
            stats.median,
            format!("{:.4}..{:.4}", stats.ci95_median.0, stats.ci95_median.1),
            stats.n,
            stats.cv_pct(),
            if too_noisy {
                format!(
                    "NOT WRITTEN: too noisy (robust CV {:.1}% > {}%)",
                    stats.robust_cv_pct(),
                    cfg.timing.baseline_max_cv_pct
                )
            } else {
                p.key.to_string()
            }
        );
        if too_noisy {
            noisy += 1;
            continue;
        }
        file.upsert(BaselineEntry {
            problem: p.key.clone(),
            problem_sha256: p.sha256.clone(),
            variant: Variant::Kernel,
            kernel: Some(k.path.display().to_string()),
            kernel_sha256: Some(kernelgate_model::hash::hashes(&source).0),
            hardware: kernel_key,
            l2: l2.to_string(),
            stats,
            samples_ms: ms,
            commit: commit.map(str::to_string),
            recorded_at: now,
            work: None,
        });
        wrote = true;
    }
    if wrote {
        file.save(&path)?;
    }
    Ok((failed, noisy, wrote))
}

/// `--plan`: the problems, variants and kernels a run would time, as JSON.
fn print_plan(
    repo: &Path,
    cfg: &Config,
    set: &kernelgate_model::ProblemSet,
    problems: &[&kernelgate_model::Problem],
    kernels: bool,
) -> anyhow::Result<()> {
    let (kernels, errors) = if kernels {
        kernelgate::baseline::kernel_plan(repo, cfg, set, problems)
    } else {
        Default::default()
    };
    let plan = serde_json::json!({
        "problems": problems.iter().map(|p| &p.key).collect::<Vec<_>>(),
        "kernels": kernels.iter().map(|k| serde_json::json!({
            "path": k.path, "problem": k.problem_key, "backend": k.backend,
            "precision": k.precision, "mapped_by": k.mapped_by,
        })).collect::<Vec<_>>(),
        "errors": errors.iter().map(|e| serde_json::json!({
            "path": e.path(), "line": e.line(), "message": e.to_string(),
        })).collect::<Vec<_>>(),
    });
    println!("{}", serde_json::to_string_pretty(&plan)?);
    Ok(())
}

/// Runs the child with a scrubbed environment and a wall-clock limit. `Ok(true)`: the limit
/// was hit (the child's partial result, written after every problem, is still used).
fn run_child(
    python: &Path,
    dir: &Path,
    job: &Path,
    out: &Path,
    limit: Duration,
) -> anyhow::Result<bool> {
    let code = "import sys, kernelgate_harness as h\n\
                h.timing_module().baseline(open(sys.argv[1]).read(), sys.argv[2])\n";
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(code).arg(job).arg(out).current_dir(dir);
    cmd.env_clear();
    for (k, v) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if !kernelgate_eval::is_secret_var(&name) && name != "PYTHONPATH" {
            cmd.env(&k, &v);
        }
    }
    cmd.env("PYTHONPATH", dir).env("PYTHONUNBUFFERED", "1");
    cmd.env("TORCHINDUCTOR_CACHE_DIR", dir.join("inductor"));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().with_context(|| {
        format!(
            "starting {} (set KERNELGATE_PYTHON or [harness] python to a Python with torch)",
            python.display()
        )
    })?;
    let mut stdout = child.stdout.take();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let mut text = String::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_string(&mut text);
            }
            if !status.success() {
                bail!(
                    "the baseline child ({}) exited with {status}; its output:\n{}",
                    python.display(),
                    text.chars()
                        .rev()
                        .take(4000)
                        .collect::<String>()
                        .chars()
                        .rev()
                        .collect::<String>()
                );
            }
            return Ok(false);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!(
                "timing the references took longer than {} s: stopped; keeping the problems finished so far \
                 (raise --timeout or select fewer problems)",
                limit.as_secs()
            );
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn git_head(repo: &Path) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

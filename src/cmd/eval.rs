//! `kernelgate eval`: one candidate against one problem, in an isolated child process.

use kernelgate::ops::eval::{Builds, EvalOptions};
use kernelgate_eval::{EvalResult, Outcome};
use kernelgate_model::{Config, Severity};
use std::path::PathBuf;

use crate::cli::{Cli, DeviceArg};

pub use crate::cli::Format;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Problem: a file path, or a dataset key such as `level1/19_ReLU`. Default: the kernel's
    /// `# kernelgate: problem=...` directive or its path mapping, as `kernelgate kernels` shows.
    #[arg(long)]
    pub problem: Option<String>,
    /// Candidate kernel file (defines `ModelNew`).
    #[arg(long)]
    pub kernel: PathBuf,
    /// Previous version of the kernel, timed against `--kernel` (regression check).
    #[arg(long)]
    pub base_kernel: Option<PathBuf>,
    /// Where to run: CUDA when a GPU and its driver are present (auto), or forced.
    #[arg(long, value_enum)]
    pub device: Option<DeviceArg>,
    /// A number (42 reproduces KernelBench), or `random` (default: secret, reported afterwards).
    #[arg(long, default_value = "random", value_parser = parse_seed)]
    pub seed: SeedArg,
    /// Host memory limit for the job, MiB.
    #[arg(long)]
    pub memory_limit: Option<u64>,
    /// Correctness only.
    #[arg(long)]
    pub no_timing: bool,
    /// Skip the op audit (the extra, untimed call that measures the custom share).
    #[arg(long)]
    pub no_audit: bool,
    /// GPU index (sets CUDA_VISIBLE_DEVICES for the job).
    #[arg(long)]
    pub gpu: Option<u32>,
    /// A shared extensions cache with one build per kernel source, as `pr` keeps it. Default:
    /// torch's own build directory, so what `python kernel.py` (or an earlier eval) built with
    /// the same sources, flags and torch is loaded, not compiled again.
    #[arg(long, conflicts_with = "fresh_build")]
    pub extensions_dir: Option<PathBuf>,
    /// Build the kernel's extensions in a fresh directory that is removed afterwards.
    #[arg(long)]
    pub fresh_build: bool,
    /// Extra trials on signed/scaled inputs (0-2).
    #[arg(long, default_value_t = 1)]
    pub shifted_trials: u32,
    /// Generate inputs on the CPU as KernelBench does (slow for large problems; bit-identical inputs).
    #[arg(long)]
    pub host_inputs: bool,
    /// human (alias: table) or json.
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    #[command(flatten)]
    pub eval: crate::cli::EvalOptions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedArg {
    Random,
    Fixed(u64),
}

fn parse_seed(s: &str) -> Result<SeedArg, String> {
    if s.eq_ignore_ascii_case("random") {
        return Ok(SeedArg::Random);
    }
    s.parse::<u64>()
        .map(SeedArg::Fixed)
        .map_err(|_| format!("`{s}` is not a seed: give a non-negative integer (42 reproduces KernelBench) or `random`"))
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let mut config = Config::load(&cli.repo, cli.config.as_deref())?;
    args.eval.apply(&mut config)?;
    let opts = EvalOptions {
        problem: args.problem.clone(),
        kernel: args.kernel.clone(),
        base_kernel: args.base_kernel.clone(),
        device: args.device.map(Into::into),
        seed: match args.seed {
            SeedArg::Random => None,
            SeedArg::Fixed(s) => Some(s),
        },
        precision: args.eval.precision,
        memory_limit_mb: args.memory_limit,
        no_timing: args.no_timing,
        no_audit: args.no_audit,
        gpu: args.gpu,
        builds: match &args.extensions_dir {
            Some(d) => Builds::Keyed(d.clone()),
            None if args.fresh_build => Builds::Fresh,
            None => Builds::TorchDefault,
        },
        shifted_trials: args.shifted_trials,
        host_inputs: args.host_inputs,
    };
    let local = kernelgate::ops::eval::eval(&cli.repo, &config, &opts)?;
    let result = &local.result;
    match args.format {
        Format::Json => {
            let mut v = to_json(result);
            v["needs_gpu"] = local.needs_gpu.into();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Human if local.needs_gpu => {
            println!("problem  {}", result.problem);
            println!("kernel   {}", result.kernel);
            println!("device   {}", shown_device(result.device.as_ref()));
            println!(
                "outcome  SKIPPED — needs a GPU: torch found no CUDA on this machine ({}); run it \
                 on a GPU machine",
                result.outcome.summary().lines().next().unwrap_or("").trim()
            );
        }
        Format::Human => print_table(result),
    }
    Ok(local.exit_code())
}

/// The `--format json` object: the keys the issue fixes, plus seed, phases and log tails.
pub fn to_json(r: &EvalResult) -> serde_json::Value {
    serde_json::json!({
        "problem": r.problem,
        "kernel": r.kernel,
        "device": r.device,
        "outcome": r.outcome,
        "findings": r.findings.iter().map(|f| serde_json::json!({
            "rule": f.rule, "severity": f.severity, "message": f.message,
        })).collect::<Vec<_>>(),
        "timing": r.timing,
        "floor_ms": r.timing.as_ref().and_then(|t| t.floor.as_ref()).map(|f| f.floor_ms),
        "work": r.work,
        "audit": r.audit,
        "memory": r.memory,
        "precision_audit": r.precision_audit,
        "seed": r.seed,
        "seed_random": r.seed_random,
        "sandbox": r.sandbox,
        "extensions": r.extensions,
        "extensions_dir": r.extensions_dir,
        "precompiled_header": r.precompiled_header,
        "build": r.build_note(),
        "torch": r.torch,
        "phases": r.phases,
        "exit": r.exit,
        "stdout_tail": r.stdout_tail,
        "stderr_tail": r.stderr_tail,
    })
}

fn print_table(r: &EvalResult) {
    println!("problem  {}", r.problem);
    println!("kernel   {}", r.kernel);
    println!("device   {}", shown_device(r.device.as_ref()));
    println!(
        "seed     {}{}",
        r.seed,
        if r.seed_random {
            " (random; pass --seed to reproduce)"
        } else {
            ""
        }
    );
    if let Some(level) = &r.sandbox {
        println!("sandbox  {level}");
    }
    if let Some(note) = r.build_note() {
        println!("build    {note}");
    }
    let failing = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let verdict = if r.passed() && failing > 0 {
        format!("PASSED BUT {failing} FAILING FINDING(S)")
    } else if r.passed() {
        "PASSED".to_string()
    } else {
        r.outcome.kind().to_uppercase()
    };
    println!("outcome  {verdict}: {}", r.outcome.summary());
    match &r.outcome {
        Outcome::CompileError { log_tail, .. } if !log_tail.is_empty() => {
            println!("\ncompiler log (tail):\n{}", indent(log_tail));
        }
        Outcome::RuntimeError { traceback, .. } | Outcome::Crash { traceback, .. }
            if !traceback.is_empty() =>
        {
            println!("\ntraceback (tail):\n{}", indent(traceback));
        }
        _ => {}
    }
    if !r.findings.is_empty() {
        println!("\nfindings");
        for f in &r.findings {
            println!("  {:7} {}: {}", f.severity.as_str(), f.rule, f.message);
        }
    }
    if let Some(a) = &r.audit {
        println!(
            "\nop audit ({} time, {:.1} ms)",
            match a.clock {
                kernelgate_model::AuditClock::Gpu => "GPU",
                kernelgate_model::AuditClock::Cpu => "CPU",
            },
            a.audit_ms
        );
        println!("  custom share {} of {:.4} ms", a.share_label(), a.total_ms);
        for e in &a.entries {
            let who = match (&e.library, &e.by_extension) {
                (Some(lib), _) => format!("{} ({lib})", e.class.as_str()),
                (None, Some(by)) => format!("{} (called by {by})", e.class.as_str()),
                _ => e.class.as_str().to_string(),
            };
            println!(
                "  {:>5.1}%  {:.4} ms  {:30} {who}",
                e.share.unwrap_or(0.0) * 100.0,
                e.ms,
                e.op
            );
        }
        let ineffective = a.describe_ineffective();
        if !ineffective.is_empty() {
            println!("  no effect: {ineffective}");
        }
    }
    if let Some(t) = &r.timing {
        println!("\ntiming");
        for (name, s) in &t.samples {
            let ms: Vec<f64> = s.iter().map(|x| x.ms).collect();
            if let Ok(st) = kernelgate_timing::SeriesStats::from_samples(&ms) {
                let floor = match (&t.floor, name) {
                    (Some(f), kernelgate_timing::Series::Candidate) => {
                        format!("  floor {:.4} ms", f.floor_ms)
                    }
                    _ => String::new(),
                };
                println!(
                    "  {name:10} median {:.4} ms  IQR {:.4} ms  n {}{floor}",
                    st.median, st.iqr, st.n
                );
            }
        }
        println!("  {}", floor_line(r));
        if let Some(c) = &t.vs_reference {
            let (s, (lo, hi)) = c.speedup();
            println!(
                "  speedup over reference {s:.3}x (95% CI {lo:.3}-{hi:.3}), {}",
                c.verdict.as_str()
            );
        }
        if let Some(c) = &t.vs_base {
            println!(
                "  against base {:+.2}% ({})",
                c.change_pct(),
                c.verdict.as_str()
            );
        }
    }
    if !r.phases.is_empty() {
        println!("\nphases (ms)");
        for p in &r.phases {
            println!("  {:20} {:10.1}", p.name, p.ms);
        }
    }
    if !r.passed() && !r.stderr_tail.trim().is_empty() {
        println!("\nstderr (tail):\n{}", indent(r.stderr_tail.trim_end()));
    }
}

/// How the physical floor was set, or why there is none.
fn floor_line(r: &EvalResult) -> String {
    let work = match &r.work {
        Some(w) => format!(
            "{} B in, {} B out, {}",
            w.input_bytes,
            w.output_bytes,
            w.flops
                .map(|f| format!("{f} FLOP"))
                .unwrap_or_else(|| "FLOPs not counted".into())
        ),
        None => "work not counted".into(),
    };
    match r.timing.as_ref().and_then(|t| t.floor.as_ref()) {
        Some(f) => format!(
            "floor {:.4} ms ({}-bound; {work}; {} at {:.0} GB/s{}, {:.0} TFLOP/s)",
            f.floor_ms,
            f.bound,
            f.gpu,
            f.bandwidth_gbs,
            f.measured_bandwidth_gbs
                .map(|m| format!(" (measured {m:.0})"))
                .unwrap_or_default(),
            f.peak_tflops
        ),
        None => {
            let why = match r
                .device
                .as_ref()
                .and_then(kernelgate_model::RanOn::gpu_name)
            {
                None => "the CPU has no datasheet bandwidth".to_string(),
                Some(_) if r.work.is_none() => "the problem's work could not be counted".into(),
                Some(g) if kernelgate_timing::DeviceSpec::lookup(g).is_none() => {
                    format!("no datasheet numbers for {g}")
                }
                Some(_) => "a warm L2 bounds no bytes and no FLOPs were counted".into(),
            };
            format!("floor none: {why} ({work})")
        }
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn shown_device(d: Option<&kernelgate_model::RanOn>) -> String {
    d.map_or_else(|| "-".to_string(), ToString::to_string)
}

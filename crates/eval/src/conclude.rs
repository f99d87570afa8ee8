//! Concluding a started job: the child gets its job and is supervised; what it reported (its
//! authenticated result) becomes the [`EvalResult`]: outcome, runtime findings, typed audit,
//! timing with its integrity checks and the physical floor.

use kernelgate_model::config::L2Mode;
use kernelgate_model::{Finding, RanOn, Severity};
use kernelgate_timing::Series;

use crate::child;
use crate::error::EvalError;
use crate::job::JobSpec;
use crate::outcome::{EvalResult, Outcome, Phase};
use crate::protocol::RunnerResult;
use crate::sandbox::{self, SandboxLevel};

use crate::launch::{launch_error, Publish, Started};
use crate::store::StoreUse;
use crate::summary::{efficiency, physical_floor, summarise_timing};
use std::path::Path;

/// Runtime finding: processes of the candidate outlived its job outside the job's group.
pub const RULE_STRAY_PROCESS: &str = "eval/stray-process";
/// The harness found a PyTorch function, Tensor method or the reference's module code replaced
/// after the candidate's import (`kg_integrity`).
pub const RULE_TORCH_PATCHED: &str = "eval/torch-patched";
/// The harness found hooks that run candidate code inside PyTorch's operations: RecordFunction
/// callbacks, a mode left on the stack, a replaced dispatcher entry of an `aten` op.
pub const RULE_HARNESS_HOOKED: &str = "eval/harness-hooked";
/// The candidate's error against a float64 reference is far beyond the reference's own.
pub const RULE_PRECISION_DOWNGRADE: &str = "eval/precision-downgrade";

/// Gives the started child its job, supervises it and turns what it reported into the result.
pub(crate) fn conclude(
    spec: &JobSpec,
    job: Started,
    result: &mut EvalResult,
) -> Result<(), EvalError> {
    let started = std::time::Instant::now();
    let Started {
        spawned,
        python,
        publish,
        from_store,
        missed: _,
        _dir,
    } = job;
    let report = spawned.supervise().map_err(|e| launch_error(e, &python))?;
    result.sandbox = Some(report.sandbox.clone());
    match &report.sandbox {
        SandboxLevel::Off => eprintln!(
            "warning: the sandbox is OFF for {}: the candidate ran unconfined (it could read the \
             runner's files and secrets); unset {} / set [sandbox] enabled = true",
            result.kernel,
            sandbox::SANDBOX_ENV
        ),
        SandboxLevel::Unavailable(reason) => eprintln!(
            "warning: sandbox: unavailable ({reason}): {} ran unconfined",
            result.kernel
        ),
        _ => {}
    }

    result.exit = report.exit.clone();
    result.stdout_tail = report.stdout_tail.clone();
    result.stderr_tail = report.stderr_tail.clone();
    let signal_name = |s: i32| match s {
        libc::SIGSEGV => "SIGSEGV".to_string(),
        libc::SIGBUS => "SIGBUS".to_string(),
        libc::SIGABRT => "SIGABRT".to_string(),
        libc::SIGKILL => "SIGKILL".to_string(),
        libc::SIGFPE => "SIGFPE".to_string(),
        libc::SIGILL => "SIGILL".to_string(),
        other => format!("signal {other}"),
    };
    result.outcome = match report.ended {
        child::Ended::Result(payload) => absorb(&payload, spec, result),
        child::Ended::Forged => Outcome::Crash {
            reason: "the result channel held a forged or corrupted result (bad HMAC): something in the \
                     candidate's process wrote the harness's result file"
                .into(),
            signal: report.exit.signal,
            exit_code: report.exit.code,
            phase: report.phase.clone(),
            traceback: String::new(),
        },
        child::Ended::NoResult if report.phase.is_none() => Outcome::Infrastructure {
            message: format!(
                "the child process ({}) ended before the harness started ({}); stderr: {}",
                python.display(),
                match (report.exit.code, report.exit.signal) {
                    (_, Some(s)) => format!("killed by {}", signal_name(s)),
                    (Some(c), _) => format!("exit status {c}"),
                    _ => "no status".into(),
                },
                report.stderr_tail.trim()
            ),
            traceback: String::new(),
        },
        child::Ended::NoResult => Outcome::Crash {
            reason: match (report.exit.signal, report.exit.code) {
                (Some(s), _) => format!(
                    "the process was killed by {} during the {} phase",
                    signal_name(s),
                    report.phase.as_deref().unwrap_or("?")
                ),
                (None, Some(c)) => format!(
                    "the process exited with status {c} during the {} phase without a result: the candidate \
                     ended the process (os._exit, sys.exit from a thread, abort)",
                    report.phase.as_deref().unwrap_or("?")
                ),
                _ => "the process ended without a result".into(),
            },
            signal: report.exit.signal,
            exit_code: report.exit.code,
            phase: report.phase.clone(),
            traceback: String::new(),
        },
        child::Ended::Timeout { phase, limit } => Outcome::Timeout {
            message: format!(
                "the {phase} phase ran past its limit of {} s; the process group was killed{}",
                limit.as_secs_f64(),
                if phase == "compile" { " (raise it with --compile-timeout)" } else { " (raise it with --run-timeout)" }
            ),
            phase,
            limit_s: limit.as_secs_f64(),
        },
        child::Ended::MemoryKilled { rss_bytes } => Outcome::Crash {
            reason: format!(
                "memory limit: the job used {} MiB of host memory, over the limit of {} MiB; the process group was killed",
                rss_bytes >> 20,
                spec.memory_limit_mb
            ),
            signal: Some(libc::SIGKILL),
            exit_code: None,
            phase: report.phase.clone(),
            traceback: String::new(),
        },
    };
    if let Outcome::HarnessError { message, .. } | Outcome::Infrastructure { message, .. } =
        &mut result.outcome
    {
        if message.contains("No module named 'torch'") {
            // Name the interpreter and how to pick another.
            *message = format!(
                "{} cannot import torch (No module named 'torch'): set KERNELGATE_PYTHON (or \
                 `[harness] python` in kernelgate.toml) to a Python with torch, or run `{} -m pip \
                 install torch`",
                python.display(),
                python.display()
            );
        }
    }
    if report.strays > 0 {
        // Work that outlives the job can run on the GPU during the next candidate's timing.
        result.findings.push(Finding::runtime(
            result.kernel.clone(),
            RULE_STRAY_PROCESS,
            Severity::Error,
            format!(
                "{} process(es) of the candidate left the job's process group (setsid/setpgid) and \
                 were still running when it ended; they were killed. A candidate must not leave \
                 processes behind",
                report.strays
            ),
        ));
    }
    if from_store {
        result.build_store = Some(StoreUse::Store);
    }
    if let Some(p) = publish {
        let t0 = std::time::Instant::now();
        result.build_store = keep_build(p, result, report.strays);
        if result.build_store.is_some() {
            result.phases.push(Phase {
                name: "store_publish".into(),
                ms: t0.elapsed().as_secs_f64() * 1000.0,
            });
        }
    }
    result.phases.push(Phase {
        name: "job_wall".into(),
        ms: started.elapsed().as_secs_f64() * 1000.0,
    });
    Ok(())
}

/// Publishes what a job built in its staging directory into the build store, when the job may
/// be trusted to have built only there: its sandbox confined its writes, no process of it
/// outlived it, and the extensions it built lie in its staging directory. `None`: it built
/// nothing (no extension, or its import failed).
fn keep_build(p: Publish, result: &EvalResult, strays: usize) -> Option<StoreUse> {
    let built: Vec<String> = result
        .extensions
        .iter()
        .filter(|e| e.built && Path::new(&e.library).starts_with(&p.staging))
        .map(|e| e.name.clone())
        .collect();
    if built.is_empty() {
        return None;
    }
    let not_kept = |why: &str| Some(StoreUse::BuiltNotKept { why: why.into() });
    match &result.sandbox {
        Some(SandboxLevel::Full | SandboxLevel::Partial(_)) => {}
        _ => return not_kept("the sandbox did not confine the job's writes"),
    }
    if strays > 0 {
        return not_kept("processes of the job outlived it");
    }
    if matches!(
        result.outcome,
        Outcome::Timeout { .. } | Outcome::Infrastructure { .. } | Outcome::HarnessError { .. }
    ) {
        return not_kept("the job did not end cleanly");
    }
    match p.store.publish(&p.key, &p.staging, &built) {
        Ok(_) => Some(match p.corrupt {
            Some(why) => StoreUse::Rebuilt { why },
            None => StoreUse::Built,
        }),
        Err(e) => not_kept(&e.to_string()),
    }
}

/// Takes the runner's (authenticated) result into `result` and returns the outcome: runtime
/// findings, timing comparisons, the escaped-work and physical-floor checks.
fn absorb(payload: &str, spec: &JobSpec, result: &mut EvalResult) -> Outcome {
    let r = match serde_json::from_str::<RunnerResult>(payload) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Infrastructure {
                message: format!("the runner's result does not parse: {e}"),
                traceback: payload.chars().take(2000).collect(),
            }
        }
    };
    if let Some(seed) = r.seed.filter(|s| *s != result.seed) {
        // The result is authenticated: a runner that ran another seed is a bug of ours.
        return Outcome::HarnessError {
            message: format!(
                "the runner reports seed {seed}, not its job's {}: the CLI and the harness disagree",
                result.seed
            ),
            traceback: String::new(),
        };
    }
    result.trials_run = r.trials_run;
    result.device = r.device.map(|d| d.in_slot(spec.gpu));
    result.torch = r.torch;
    result.machine = r.machine;
    result.work = r.work;
    result.memory = r.memory;
    result.precision_audit = r.precision_audit;
    result.extensions = r.extensions;
    result.extensions_dir = r.extensions_dir;
    result.precompiled_header = r.precompiled_header;
    result.phases = r
        .phases
        .into_iter()
        .map(|(name, ms)| Phase { name, ms })
        .collect();
    let file = result.kernel.clone();
    result.findings = r
        .findings
        .into_iter()
        .map(|f| {
            Finding::runtime(
                file.clone(),
                format!("eval/{}", f.rule),
                f.severity,
                f.message,
            )
        })
        .collect();
    if let Some(samples) = r.timing {
        let on_gpu = result.device.as_ref().and_then(RanOn::gpu_name).is_some();
        let mut timing = summarise_timing(samples, spec, &file, on_gpu, &mut result.findings);
        let l2 = spec.timing.as_ref().map(|t| t.l2).unwrap_or(L2Mode::Cold);
        timing.floor = physical_floor(
            result.device.as_ref(),
            result.work.as_ref(),
            r.bandwidth_gbs,
            l2,
        );
        let mut reached = None;
        if let (Some(floor), Some(c)) = (&timing.floor, timing.samples.get(&Series::Candidate)) {
            let ms = kernelgate_timing::sample::event_ms(c);
            if let Ok(st) = kernelgate_timing::SeriesStats::from_samples(&ms) {
                reached = result
                    .work
                    .as_ref()
                    .and_then(|w| efficiency(floor, w, spec.precision, st.median));
                // The excessive speedup is the policy's (it sees the row's speedup); only the floor here.
                result
                    .findings
                    .extend(kernelgate_timing::check_plausibility(
                        &file,
                        st.median,
                        Some(floor.floor_ms),
                        None,
                        f64::INFINITY,
                    ));
            }
        }
        timing.efficiency = reached;
        result.timing = Some(timing);
    }
    if let Some(audit) = r.audit.filter(|a| !a.is_null()) {
        match serde_json::from_value::<kernelgate_model::OpAudit>(audit) {
            Ok(a) => result.audit = Some(a),
            Err(e) => result.findings.push(Finding::runtime(
                file.clone(),
                "eval/audit-failed",
                Severity::Warning,
                format!("the op audit's result does not parse ({e}); the custom share is unknown"),
            )),
        }
    }
    r.outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_timing::plausibility::RULE_BELOW_FLOOR;

    fn blank(kernel: &str) -> EvalResult {
        EvalResult::new("level1/19_ReLU".into(), kernel.into(), 1, false)
    }

    /// A runner result as `runner.py` writes it: candidate at `cand_ms`, reference at 10x that.
    fn payload(device: &str, bytes: u64, flops: u64, bw: Option<f64>, cand_ms: f64) -> String {
        let series = |base: f64| {
            (0..12)
                .map(|i| serde_json::json!({"ms": base * (1.0 + 0.001 * i as f64), "trailing_sync_ms": 0.001, "wall_ms": base}))
                .collect::<Vec<_>>()
        };
        serde_json::json!({
            "outcome": {"kind": "passed", "trials": 5},
            "findings": [],
            "phases": [["total", 1.0]],
            "device": device,
            "torch": "2.11.0",
            "timing": {"reference": series(cand_ms * 10.0), "candidate": series(cand_ms)},
            "work": {"input_bytes": bytes / 2, "output_bytes": bytes / 2, "flops": flops},
            "bandwidth_gbs": bw,
        })
        .to_string()
    }

    fn run(payload: &str, l2: L2Mode) -> EvalResult {
        let mut spec = JobSpec::new("p.py", "k.py");
        spec.timing = Some(kernelgate_model::config::TimingConfig {
            l2,
            ..kernelgate_model::config::TimingConfig::default()
        });
        let mut r = blank("kernels/relu.py");
        r.outcome = absorb(payload, &spec, &mut r);
        r
    }

    fn below_floor(r: &EvalResult) -> Vec<&Finding> {
        r.findings
            .iter()
            .filter(|f| f.rule == RULE_BELOW_FLOOR)
            .collect()
    }

    // 4.8 GB at the H200's 4800 GB/s: a floor of exactly 1 ms.
    const GB4_8: u64 = 4_800_000_000;

    #[test]
    fn below_the_floor_is_an_error_finding_on_the_kernel() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, Some(3841.0), 0.5),
            L2Mode::Cold,
        );
        assert!(r.passed());
        assert_eq!(r.work.unwrap().input_bytes, GB4_8 / 2);
        let floor = r.timing.as_ref().unwrap().floor.clone().unwrap();
        assert!((floor.floor_ms - 1.0).abs() < 1e-12, "{floor:?}");
        assert_eq!(floor.bound, "memory");
        assert_eq!(floor.gpu, "NVIDIA H200");
        // Measured below the datasheet: the datasheet stays (the floor must stay a lower bound).
        assert_eq!(floor.bandwidth_gbs, 4800.0);
        assert_eq!(floor.measured_bandwidth_gbs, Some(3841.0));
        let f = below_floor(&r);
        assert_eq!(f.len(), 1, "{:?}", r.findings);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(f[0].file, "kernels/relu.py");
        assert!(f[0].message.contains("1.0000 ms"), "{}", f[0].message);
        // Only the floor: the excessive speedup (10x here) is the policy's to flag.
        assert!(r
            .findings
            .iter()
            .all(|f| f.rule != kernelgate_timing::plausibility::RULE_EXCESSIVE_SPEEDUP));
    }

    #[test]
    fn above_the_floor_gives_no_finding() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, None, 1.2),
            L2Mode::Cold,
        );
        assert!(r.timing.as_ref().unwrap().floor.is_some());
        assert!(below_floor(&r).is_empty(), "{:?}", r.findings);
        // 1 ms of bytes in about 1.2 ms (the samples spread by 1.1%): 83% of the bandwidth,
        // 4000 GB/s.
        let e = r.timing.as_ref().unwrap().efficiency.unwrap();
        assert_eq!(e.bound, kernelgate_model::Bound::Memory);
        assert!((e.pct - 100.0 / 1.2).abs() < 1.0, "{e:?}");
        assert!((e.achieved - 4000.0).abs() < 40.0, "{e:?}");
        assert!((e.achieved / 4800.0 * 100.0 - e.pct).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn a_higher_measured_bandwidth_lowers_the_floor() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, Some(9600.0), 0.6),
            L2Mode::Cold,
        );
        let floor = r.timing.as_ref().unwrap().floor.clone().unwrap();
        assert!((floor.floor_ms - 0.5).abs() < 1e-12, "{floor:?}");
        assert!(below_floor(&r).is_empty());
    }

    #[test]
    fn flops_set_the_floor_when_they_dominate() {
        // 989e9 FLOP at 989 TFLOP/s: 1 ms; the bytes give 1 us.
        let r = run(
            &payload(
                "cuda:0 (NVIDIA H200)",
                4_800_000,
                989_000_000_000,
                None,
                0.9,
            ),
            L2Mode::Cold,
        );
        let floor = r.timing.as_ref().unwrap().floor.clone().unwrap();
        assert_eq!(floor.bound, "compute");
        assert!((floor.floor_ms - 1.0).abs() < 1e-9, "{floor:?}");
        // An fp32 job's efficiency is against the CUDA cores' 67 TFLOP/s, not the floor's 989.
        let e = r.timing.as_ref().unwrap().efficiency.unwrap();
        assert_eq!(e.bound, kernelgate_model::Bound::Compute);
        assert_eq!(e.peak, 67.0);
        assert!((e.achieved - 989.0 / 0.9).abs() < 11.0, "{e:?}");
        assert!((e.achieved / 67.0 * 100.0 - e.pct).abs() < 1e-9, "{e:?}");
        assert_eq!(below_floor(&r).len(), 1);
    }

    #[test]
    fn warm_l2_drops_the_bytes_term() {
        let r = run(
            &payload("cuda:0 (NVIDIA H200)", GB4_8, 0, None, 0.5),
            L2Mode::Warm,
        );
        assert!(r.timing.as_ref().unwrap().floor.is_none());
        assert!(below_floor(&r).is_empty());
    }

    #[test]
    fn unknown_gpu_cpu_or_uncounted_work_give_no_floor() {
        for device in ["cuda:0 (Mystery Accelerator 9000)", "cpu"] {
            let r = run(
                &payload(device, GB4_8, 0, Some(3000.0), 0.001),
                L2Mode::Cold,
            );
            assert!(r.timing.as_ref().unwrap().floor.is_none(), "{device}");
            assert!(r.timing.as_ref().unwrap().efficiency.is_none(), "{device}");
            assert!(below_floor(&r).is_empty(), "{device}: {:?}", r.findings);
        }
        let mut v: serde_json::Value =
            serde_json::from_str(&payload("cuda:0 (NVIDIA H200)", GB4_8, 0, None, 0.001)).unwrap();
        v["work"] = serde_json::Value::Null;
        let r = run(&v.to_string(), L2Mode::Cold);
        assert!(r.work.is_none());
        assert!(r.timing.as_ref().unwrap().floor.is_none());
        assert!(below_floor(&r).is_empty());
    }

    #[test]
    fn results_without_work_fields_still_parse() {
        let r = run(
            r#"{"outcome": {"kind": "passed", "trials": 5}, "device": "cpu"}"#,
            L2Mode::Cold,
        );
        assert!(r.passed());
        assert!(r.work.is_none() && r.timing.is_none());
        // An authenticated result that does not parse is kernelgate's fault, not the candidate's.
        let r = run("not json", L2Mode::Cold);
        assert_eq!(r.outcome.kind(), "infrastructure");
    }

    #[test]
    fn the_audit_is_typed_and_a_malformed_one_is_a_warning_not_a_lost_result() {
        let mut v: serde_json::Value =
            serde_json::from_str(&payload("cpu", 1000, 0, None, 0.5)).unwrap();
        v["audit"] = serde_json::json!({
            "clock": "cpu", "total_ms": 2.0, "custom_ms": 0.5, "custom_share": 0.25, "glue_ms": 1.0,
            "forward_ms": 3.0, "audit_ms": 9.0, "extension_modules": ["ext"], "aten_ops": ["aten.mm.default"],
            "entries": [
                {"op": "mm", "class": "pytorch", "library": null, "by_extension": null, "ms": 1.5, "share": 0.75, "calls": 1},
                {"op": "ext.relu", "class": "custom", "library": null, "by_extension": null, "ms": 0.5, "share": 0.25, "calls": 1}
            ],
            "extension_calls": [{"function": "ext.relu", "calls": 1, "ineffective": 0, "reason": null, "checked": true}]
        });
        let r = run(&v.to_string(), L2Mode::Cold);
        assert!(r.passed(), "{:?}", r.outcome);
        let a = r.audit.expect("typed audit");
        assert_eq!(a.custom_share, Some(0.25));
        assert_eq!(a.describe_left(3), "mm → PyTorch 75%");
        v["audit"] = serde_json::json!({"clock": "sundial"});
        let r = run(&v.to_string(), L2Mode::Cold);
        assert!(
            r.passed(),
            "a bad audit must not cost the result: {:?}",
            r.outcome
        );
        assert!(r.audit.is_none());
        assert!(r
            .findings
            .iter()
            .any(|f| f.rule == "eval/audit-failed" && f.severity == Severity::Warning));
    }
}

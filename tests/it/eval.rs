//! `kernelgate eval` end to end: the real CLI, the real child process, the real harness
//! extension and real torch (CPU). Every fixture is asserted by its exact outcome kind.
//!
//! Needs the harness extension built next to the CLI (`cargo build -p kernelgate-harness`,
//! which `scripts/test.sh` does) and a Python with torch (`KERNELGATE_PYTHON` or `.venv`).
//! C++ fixtures share one torch extensions cache under `target/` so reruns skip compiling.

use crate::common::{python, root, test_extensions_dir};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn fixture(rel: &str) -> String {
    root()
        .join("tests/fixtures/eval")
        .join(rel)
        .display()
        .to_string()
}

fn cli() -> Command {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"));
    let lib = exe.parent().unwrap().join("libkernelgate_harness.so");
    assert!(
        lib.is_file() || std::env::var_os("KERNELGATE_HARNESS").is_some(),
        "{} is missing: run `cargo build -p kernelgate-harness` before these tests",
        lib.display()
    );
    let mut cmd = Command::new(exe);
    cmd.env("KERNELGATE_PYTHON", python()).current_dir(root());
    cmd
}

/// The one entry `kernelgate pch` built under `$KERNELGATE_PCH_DIR` (scripts/test.sh builds it),
/// or None.
fn pch_entry() -> Option<PathBuf> {
    let root = std::env::var_os("KERNELGATE_PCH_DIR")?;
    let mut entries = std::fs::read_dir(root)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("manifest.json").is_file());
    let entry = entries.next()?;
    entries.next().is_none().then_some(entry)
}

fn ext_dir() -> String {
    let d = test_extensions_dir();
    d.display().to_string()
}

/// Runs `kernelgate eval --device cpu --format json` on two fixtures with `args` and `env`;
/// returns (exit code, parsed JSON).
fn eval_json(problem: &str, kernel: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let mut cmd = cli();
    cmd.args([
        "eval",
        "--problem",
        &fixture(problem),
        "--kernel",
        &fixture(kernel),
    ])
    .args(["--device", "cpu", "--format", "json"])
    .args(["--extensions-dir", &ext_dir()])
    .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run kernelgate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from kernelgate eval ({e}); stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

/// Correctness only, KernelBench's seed 42.
fn eval_with(problem: &str, kernel: &str, extra: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    eval_json(
        problem,
        kernel,
        &[&["--seed", "42", "--no-timing"], extra].concat(),
        env,
    )
}

/// With timing (the timed-call checks run), seed 1.
fn eval_timed(problem: &str, kernel: &str, extra: &[&str]) -> (i32, Value) {
    eval_json(problem, kernel, &[&["--seed", "1"], extra].concat(), &[])
}

fn eval(problem: &str, kernel: &str) -> (i32, Value) {
    eval_with(problem, kernel, &[], &[])
}

#[track_caller]
fn assert_kind(v: &Value, code: i32, kind: &str) {
    assert_eq!(v["outcome"]["kind"], kind, "outcome: {:#}", v);
    assert_eq!(
        code,
        if kind == "passed" { 0 } else { 1 },
        "exit code for {kind}: {:#}",
        v
    );
}

fn has_finding(v: &Value, rule: &str) -> bool {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["rule"] == rule)
}

// ---- honest kernels ---------------------------------------------------------------------------

#[test]
fn honest_cpp_relu_passes_and_reports_the_seed() {
    let (code, v) = eval("problems/relu.py", "kernels/honest_relu.py");
    assert_kind(&v, code, "passed");
    assert_eq!(v["outcome"]["trials"], 5);
    assert_eq!(v["seed"], 42);
    assert_eq!(v["seed_random"], false);
    assert_eq!(v["device"], "cpu");
    assert!(v["timing"].is_null());
    // Identity-like problems warn that weak outputs would pass; an honest kernel has no other finding.
    assert!(!has_finding(&v, "eval/shifted-inputs"), "{v:#}");
}

#[test]
fn honest_reduction_in_another_order_passes() {
    let (code, v) = eval("problems/row_sum.py", "kernels/honest_row_sum_blocked.py");
    assert_kind(&v, code, "passed");
    assert!(v["findings"].as_array().unwrap().is_empty(), "{v:#}");
}

#[test]
fn honest_python_kernel_passes_with_a_random_secret_seed_by_default() {
    let mut cmd = cli();
    let out = cmd
        .args([
            "eval",
            "--problem",
            &fixture("problems/relu.py"),
            "--kernel",
            &fixture("kernels/python_relu.py"),
        ])
        .args(["--device", "cpu", "--no-timing", "--format", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_kind(&v, out.status.code().unwrap(), "passed");
    assert_eq!(v["seed_random"], true);
    assert!(v["seed"].as_u64().is_some());
    let phases: Vec<&str> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for p in [
        "torch_import",
        "input_generation",
        "reference",
        "compile",
        "candidate_trials",
        "checks",
        "total",
    ] {
        assert!(phases.contains(&p), "phase {p} missing from {phases:?}");
    }
}

#[test]
fn secrets_never_reach_the_candidate() {
    let (code, v) = eval_with(
        "problems/relu.py",
        "kernels/env_probe.py",
        &[],
        &[
            ("GITHUB_TOKEN", "ghp_x"),
            ("MY_API_SECRET", "s"),
            ("ACTIONS_RUNTIME_TOKEN", "t"),
            // Even when a runner names it to be passed on.
            ("KERNELGATE_CHILD_ENV", "MY_API_SECRET"),
        ],
    );
    assert_kind(&v, code, "passed");
}

// ---- hacks caught at run time -----------------------------------------------------------------

#[test]
fn output_never_written_is_incorrect() {
    let (code, v) = eval("problems/relu.py", "kernels/never_written.py");
    assert_kind(&v, code, "incorrect");
    let t = &v["outcome"]["trials"][0];
    assert!(t["mismatches"].as_u64().unwrap() > 0, "{v:#}");
}

#[test]
fn zeroing_inputs_is_input_mutated() {
    let (code, v) = eval("problems/relu.py", "kernels/inputs_zeroed.py");
    assert_kind(&v, code, "input_mutated");
    assert_eq!(v["outcome"]["input"], 0);
}

#[test]
fn in_place_returning_the_input_is_output_aliased() {
    let (code, v) = eval("problems/relu.py", "kernels/inplace.py");
    assert_kind(&v, code, "output_aliased");
    assert!(
        v["outcome"]["message"]
            .as_str()
            .unwrap()
            .contains("input 0"),
        "{v:#}"
    );
}

#[test]
fn pointer_keyed_static_cache_is_output_aliased() {
    // The judge refills one shared buffer per call: the second trial's input has the first
    // one's pointer and new content, and the cached output (copied out by the worker) is stale.
    let (code, v) = eval("problems/relu.py", "kernels/ptr_cache.py");
    assert_kind(&v, code, "incorrect");
    assert_eq!(
        v["outcome"]["trials"][0]["trial"], 1,
        "the second trial reuses the first one's input pointer: {v:#}"
    );
}

#[test]
fn pointer_cache_switched_on_only_while_timed_is_caught_in_the_timing_loop() {
    // Honest through every correctness trial; the timed calls see refreshed inputs.
    let (code, v) = eval_timed("problems/relu.py", "kernels/ptr_cache_when_timed.py", &[]);
    assert_eq!(code, 1, "{v:#}");
    let kind = v["outcome"]["kind"].as_str().unwrap();
    assert!(
        kind == "incorrect" || kind == "output_aliased",
        "{kind}: {v:#}"
    );
    let msg = v["outcome"]["message"].as_str().unwrap();
    assert!(msg.contains("while being timed"), "{msg}");
}

#[test]
fn cheating_only_while_timed_is_incorrect() {
    // It tells the phases apart by the collector, which the worker keeps off for every call
    // alike (the judge's timing needs no change in the candidate's process): it cheats on every
    // call, correctness trials too, with timing and without.
    for (code, v) in [
        eval_timed("problems/relu.py", "kernels/phase_detect.py", &[]),
        eval("problems/relu.py", "kernels/phase_detect.py"),
    ] {
        assert_kind(&v, code, "incorrect");
        assert_eq!(v["outcome"]["trials"][0]["trial"], 0, "{v:#}");
    }
}

#[test]
fn correct_for_two_calls_then_wrong_is_incorrect() {
    let (code, v) = eval("problems/relu.py", "kernels/first_n_correct.py");
    assert_kind(&v, code, "incorrect");
    assert_eq!(v["outcome"]["trials"][0]["trial"], 2);
    assert_eq!(v["outcome"]["passed_trials"], 2);
}

#[test]
fn finishing_on_a_background_thread_is_incorrect() {
    let (code, v) = eval("problems/relu.py", "kernels/background_thread.py");
    assert_kind(&v, code, "incorrect");
}

#[test]
fn a_process_that_leaves_the_job_group_is_killed_and_fails_the_job() {
    // In the job's own extensions directory: the one place outside the job it may write.
    let name = format!("stray-daemon-{}.pid", std::process::id());
    let source = std::fs::read_to_string(fixture("kernels/stray_daemon.py")).unwrap();
    let pidfile = kernelgate_eval::extensions_subdir(Path::new(&ext_dir()), &source).join(&name);
    let _ = std::fs::remove_file(&pidfile);
    let (code, v) = eval_with(
        "problems/relu.py",
        "kernels/stray_daemon.py",
        &[],
        &[
            ("KG_TEST_STRAY_PIDFILE", &name),
            // Passed on to the job's child (its environment is an allow-list).
            ("KERNELGATE_CHILD_ENV", "KG_TEST_STRAY_PIDFILE"),
        ],
    );
    // Its numbers are right; what it left running is not.
    assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
    assert!(has_finding(&v, "eval/stray-process"), "{v:#}");
    assert_eq!(code, 1, "{v:#}");
    let pid = std::fs::read_to_string(&pidfile).expect("the daemon started and wrote its pid");
    let _ = std::fs::remove_file(&pidfile);
    let stat = format!("/proc/{}/stat", pid.trim());
    let deadline = Instant::now() + Duration::from_secs(5);
    // Gone, or a zombie waiting for init to reap it: not running either way.
    while std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z ")) {
        assert!(
            Instant::now() < deadline,
            "the daemon {} still runs",
            pid.trim()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // An honest kernel leaves nothing behind and gets no such finding.
    let (code, v) = eval("problems/relu.py", "kernels/python_relu.py");
    assert_kind(&v, code, "passed");
    assert!(!has_finding(&v, "eval/stray-process"), "{v:#}");
}

#[test]
fn relu_as_identity_passes_the_benchmark_but_is_flagged_on_shifted_inputs() {
    let (code, v) = eval("problems/relu.py", "kernels/relu_identity.py");
    assert_kind(&v, code, "passed");
    assert!(has_finding(&v, "eval/shifted-inputs"), "{v:#}");
    assert!(has_finding(&v, "eval/trivial-output-passes"), "{v:#}");
    // Without the shifted trials the hack is invisible: the warning comes from them.
    let (_, v) = eval_with(
        "problems/relu.py",
        "kernels/relu_identity.py",
        &["--shifted-trials", "0"],
        &[],
    );
    assert!(!has_finding(&v, "eval/shifted-inputs"), "{v:#}");
}

#[test]
fn fake_result_and_os_exit_is_a_crash() {
    let (code, v) = eval("problems/relu.py", "kernels/fake_result_exit.py");
    assert_kind(&v, code, "crash");
    assert!(
        v["stdout_tail"].as_str().unwrap().contains("\"passed\""),
        "the fake line was printed: {v:#}"
    );
}

#[test]
fn infinite_loop_times_out_and_the_group_is_killed() {
    let t = Instant::now();
    let (code, v) = eval_with(
        "problems/relu.py",
        "kernels/infinite_loop.py",
        &["--run-timeout", "6"],
        &[],
    );
    assert_kind(&v, code, "timeout");
    assert_eq!(v["outcome"]["phase"], "run");
    assert_eq!(v["outcome"]["limit_s"], 6.0);
    assert!(
        t.elapsed() < Duration::from_secs(40),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn segfault_is_a_crash_with_the_signal() {
    let (code, v) = eval("problems/relu.py", "kernels/segfault.py");
    assert_kind(&v, code, "crash");
    assert_eq!(v["outcome"]["signal"], 11, "{v:#}");
    assert_eq!(v["outcome"]["phase"], "run");
}

#[test]
fn huge_allocation_hits_the_memory_limit() {
    let (code, v) = eval_with(
        "problems/relu.py",
        "kernels/huge_alloc.py",
        &["--memory-limit", "6144"],
        &[],
    );
    assert_kind(&v, code, "runtime_error");
    assert_eq!(v["outcome"]["memory_limit"], true, "{v:#}");
}

#[test]
fn tensor_subclass_is_not_a_tensor() {
    let (code, v) = eval("problems/relu.py", "kernels/lazy_subclass.py");
    assert_kind(&v, code, "not_a_tensor");
}

#[test]
fn shape_and_dtype_mismatches() {
    let (code, v) = eval("problems/relu.py", "kernels/wrong_shape.py");
    assert_kind(&v, code, "shape_mismatch");
    assert_eq!(v["outcome"]["expected"], serde_json::json!([16, 1024]));
    assert_eq!(v["outcome"]["got"], serde_json::json!([16384]));
    let (code, v) = eval("problems/relu.py", "kernels/wrong_dtype.py");
    assert_kind(&v, code, "dtype_mismatch");
}

#[test]
fn exceptions_are_runtime_errors_with_the_traceback() {
    let (code, v) = eval("problems/relu.py", "kernels/raises.py");
    assert_kind(&v, code, "runtime_error");
    assert!(
        v["outcome"]["traceback"]
            .as_str()
            .unwrap()
            .contains("bad block size 4097"),
        "{v:#}"
    );
}

#[test]
fn compile_failures_carry_the_compiler_log() {
    let (code, v) = eval("problems/relu.py", "kernels/compile_error.py");
    assert_kind(&v, code, "compile_error");
    assert!(
        v["outcome"]["log_tail"].as_str().unwrap().contains("error"),
        "{v:#}"
    );
    let (code, v) = eval("problems/relu.py", "kernels/no_model_new.py");
    assert_kind(&v, code, "compile_error");
    assert!(v["outcome"]["message"]
        .as_str()
        .unwrap()
        .contains("ModelNew"));
}

// ---- usage --------------------------------------------------------------------------------------

#[test]
fn usage_errors_exit_2_and_name_the_file() {
    let out = cli()
        .args([
            "eval",
            "--problem",
            &fixture("problems/relu.py"),
            "--kernel",
            "kernels/does_not_exist.py",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does_not_exist.py"));
    let out = cli()
        .args([
            "eval",
            "--problem",
            &fixture("problems/relu.py"),
            "--kernel",
            &fixture("kernels/python_relu.py"),
        ])
        .args(["--seed", "forty-two"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("forty-two"));
}

#[test]
fn table_output_names_the_outcome() {
    let out = cli()
        .args([
            "eval",
            "--problem",
            &fixture("problems/relu.py"),
            "--kernel",
            &fixture("kernels/wrong_shape.py"),
        ])
        .args(["--device", "cpu", "--seed", "7", "--no-timing"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(text.contains("SHAPE_MISMATCH"), "{text}");
    assert!(text.contains("seed     7"), "{text}");
    assert!(Path::new(&fixture("kernels")).is_dir());
}

#[test]
fn timing_interleaves_reference_candidate_and_base() {
    let base = fixture("kernels/python_relu.py");
    let (code, v) = eval_timed(
        "problems/relu.py",
        "kernels/python_relu.py",
        &["--base-kernel", &base],
    );
    assert_kind(&v, code, "passed");
    let t = &v["timing"];
    for series in ["reference", "candidate", "base"] {
        let n = t["samples"][series].as_array().map(Vec::len).unwrap_or(0);
        assert!(n >= 10, "{series}: {n} samples: {t:#}");
        assert!(t["samples"][series][0]["ms"].as_f64().unwrap() > 0.0);
    }
    assert!(t["vs_reference"]["ratio"].as_f64().unwrap() > 0.0, "{t:#}");
    assert!(t["vs_base"]["verdict"].is_string(), "{t:#}");
}

#[test]
fn seed_42_gives_kernelbench_inputs_on_cpu() {
    let (code, v) = eval("problems/relu.py", "kernels/kb_seed_probe.py");
    assert_kind(&v, code, "passed");
    // Another seed draws other inputs, which the probe rejects.
    let out = cli()
        .args([
            "eval",
            "--problem",
            &fixture("problems/relu.py"),
            "--kernel",
            &fixture("kernels/kb_seed_probe.py"),
        ])
        .args([
            "--device",
            "cpu",
            "--seed",
            "43",
            "--no-timing",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_kind(&v, out.status.code().unwrap(), "runtime_error");
    assert!(
        v["outcome"]["message"]
            .as_str()
            .unwrap()
            .contains("differs from KernelBench"),
        "{v:#}"
    );
}

// ---- plausibility ---------------------------------------------------------------------------

#[test]
fn timing_reports_the_problems_work_and_no_floor_on_the_cpu() {
    let args = [
        "eval",
        "--problem",
        &fixture("problems/relu.py"),
        "--kernel",
        &fixture("kernels/python_relu.py"),
        "--device",
        "cpu",
        "--seed",
        "1",
    ];
    let (code, v) = eval_timed("problems/relu.py", "kernels/python_relu.py", &[]);
    assert_kind(&v, code, "passed");
    // relu.py: one 16 x 1024 fp32 input read, one output of the same shape written.
    assert_eq!(v["work"]["input_bytes"], 16 * 1024 * 4, "{:#}", v["work"]);
    assert_eq!(v["work"]["output_bytes"], 16 * 1024 * 4, "{:#}", v["work"]);
    // CPU jobs skip the FLOP count (it would import torch._dynamo for a floor never computed).
    assert!(v["work"]["flops"].is_null(), "{:#}", v["work"]);
    assert!(v["floor_ms"].is_null(), "{v:#}");
    assert!(v["timing"]["floor"].is_null(), "{:#}", v["timing"]);
    assert!(!has_finding(&v, "timing/below-physical-floor"), "{v:#}");

    let out = cli().args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("floor none: the CPU has no datasheet bandwidth (65536 B in, 65536 B out, FLOPs not counted)"),
        "{text}"
    );
}

#[test]
fn correctness_only_runs_count_no_work() {
    let (code, v) = eval("problems/relu.py", "kernels/python_relu.py");
    assert_kind(&v, code, "passed");
    assert!(v["work"].is_null(), "{v:#}");
    assert!(!v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "work"));
}

#[test]
fn excessive_speedup_is_a_warning_in_eval() {
    let (code, v) = eval_timed("problems/slow_relu.py", "kernels/python_relu.py", &[]);
    // A warning: the run still passes (exit 0); `kernelgate pr` leaves the flag to its policy.
    assert_kind(&v, code, "passed");
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "timing/excessive-speedup")
        .unwrap_or_else(|| panic!("no excessive-speedup finding: {v:#}"));
    assert_eq!(f["severity"], "warning");
    assert!(
        f["message"].as_str().unwrap().contains("exceeds 10x"),
        "{f:#}"
    );
    // The honest relu against the plain relu problem is not flagged.
    let (_, v) = eval_timed("problems/relu.py", "kernels/python_relu.py", &[]);
    assert!(!has_finding(&v, "timing/excessive-speedup"), "{v:#}");
}

// ---- issue 27: the precision audit against a float64 reference --------------------------------

#[test]
fn an_fp32_matmul_on_tf32_operands_is_a_precision_downgrade() {
    let (code, v) = eval(
        "problems/matmul_k1024.py",
        "kernels/precision_tf32_matmul.py",
    );
    // Within the fp32 tolerance: only the audit sees it.
    assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "eval/precision-downgrade")
        .unwrap_or_else(|| panic!("no precision-downgrade: {v:#}"));
    assert_eq!(f["severity"], "error", "{f:#}");
    let p = &v["precision_audit"];
    let (cand, reference) = (
        p["candidate_error"].as_f64().unwrap(),
        p["reference_error"].as_f64().unwrap(),
    );
    assert!(cand > 100.0 * reference && cand > 1e-4, "{p:#}");
    assert_eq!(code, 1, "{v:#}");
}

/// bfloat16 keeps 8 mantissa bits: the products land near the fp32 tolerance on these inputs, so
/// the kernel fails either the comparison itself or, within it, the audit against float64.
#[test]
fn an_fp32_matmul_computed_in_bf16_fails() {
    let (code, v) = eval(
        "problems/matmul_k1024.py",
        "kernels/precision_bf16_matmul.py",
    );
    assert_eq!(code, 1, "{v:#}");
    let downgraded = has_finding(&v, "eval/precision-downgrade");
    assert!(
        v["outcome"]["kind"] == "incorrect" || downgraded,
        "neither incorrect nor a precision downgrade: {v:#}"
    );
    if downgraded {
        let p = &v["precision_audit"];
        let (cand, reference) = (
            p["candidate_error"].as_f64().unwrap(),
            p["reference_error"].as_f64().unwrap(),
        );
        assert!(cand > 100.0 * reference, "{p:#}");
    }
}

#[test]
fn more_accurate_and_reordered_kernels_pass_the_precision_audit() {
    for (problem, kernel) in [
        (
            "problems/small_matmul.py",
            "kernels/honest_matmul_fp64_accumulate.py",
        ),
        ("problems/row_sum.py", "kernels/honest_row_sum_blocked.py"),
        (
            "problems/small_matmul.py",
            "kernels/honest_matmul_workspace.py",
        ),
    ] {
        let (code, v) = eval(problem, kernel);
        assert_kind(&v, code, "passed");
        assert!(
            !has_finding(&v, "eval/precision-downgrade"),
            "{kernel}: {v:#}"
        );
        let p = &v["precision_audit"];
        let cand = p["candidate_error"]
            .as_f64()
            .unwrap_or_else(|| panic!("{kernel}: no audit: {v:#}"));
        assert!(cand <= p["limit"].as_f64().unwrap(), "{kernel}: {p:#}");
    }
}

/// Runs `kernelgate eval --device cpu --no-timing` on the ReLU fixtures as a contributor does,
/// with `home` as the home directory and no shared cache: the build lands where torch's own does.
fn eval_as_contributor(home: &Path, kernel: &Path, json: bool) -> (i32, String) {
    let mut cmd = cli();
    cmd.args([
        "eval",
        "--problem",
        &fixture("problems/relu.py"),
        "--kernel",
    ])
    .arg(kernel)
    .args([
        "--device",
        "cpu",
        "--no-timing",
        "--no-audit",
        "--seed",
        "1",
    ])
    .env("HOME", home)
    .env_remove("XDG_CACHE_HOME")
    .env_remove("TORCH_EXTENSIONS_DIR");
    if json {
        cmd.args(["--format", "json"]);
    }
    let out = cmd.output().expect("run kernelgate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_local_eval_loads_the_build_python_made_and_says_why_it_compiles_otherwise() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kernel = work.path().join("relu_kernel.py");
    std::fs::copy(fixture("kernels/honest_relu.py"), &kernel).unwrap();
    // The contributor's own build: `python kernel.py`, into torch's default directory.
    let python_path = std::env::var("PATH").unwrap_or_default();
    let venv_bin = Path::new(&python()).parent().unwrap().display().to_string();
    let mut build = Command::new(python());
    build
        .arg("-c")
        .arg("import importlib.util as u, sys; s = u.spec_from_file_location('k', sys.argv[1]); s.loader.exec_module(u.module_from_spec(s))")
        .arg(&kernel)
        .env("HOME", home.path())
        .env("PATH", format!("{venv_bin}:{python_path}"))
        .env_remove("XDG_CACHE_HOME")
        .env_remove("TORCH_EXTENSIONS_DIR");
    // The suite's precompiled header on CPATH when there is one (half a minute less on two
    // cores): gcc reads it, and torch's build hash and build.ninja do not change.
    if let Some(entry) = pch_entry() {
        build.env("CPATH", entry);
    }
    let build = build.output().unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let cache = home.path().join(".cache/torch_extensions");
    assert!(
        cache.is_dir(),
        "torch built elsewhere than ~/.cache/torch_extensions"
    );

    // Same sources, flags and torch: loaded, nothing compiled, and the line says so.
    let (code, out) = eval_as_contributor(home.path(), &kernel, false);
    assert_eq!(code, 0, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("build "))
        .unwrap_or_else(|| panic!("no build line:\n{out}"));
    assert!(
        line.contains("loaded kg_fx_honest_relu as built earlier in ~/.cache/torch_extensions/py"),
        "{line}"
    );
    assert!(line.contains("nothing compiled"), "{line}");
    let (_, out) = eval_as_contributor(home.path(), &kernel, true);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["extensions"][0]["name"], "kg_fx_honest_relu", "{v}");
    assert_eq!(v["extensions"][0]["built"], false, "{v}");
    assert!(
        v["phases"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "compile" && p["ms"].as_f64().unwrap() < 20_000.0),
        "{v}"
    );

    // Other sources under the same extension name: compiled again, and the line says why.
    let edited = std::fs::read_to_string(&kernel).unwrap().replacen(
        "CPP = r\"\"\"",
        "CPP = r\"\"\"\n// edited\n",
        1,
    );
    assert!(
        edited.contains("// edited"),
        "the fixture's C++ source moved"
    );
    std::fs::write(&kernel, edited).unwrap();
    let (code, out) = eval_as_contributor(home.path(), &kernel, true);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["extensions"][0]["built"], true, "{v}");
    assert_eq!(v["extensions"][0]["rebuilt"], true, "{v}");
    let note = v["build"].as_str().unwrap();
    assert!(note.starts_with("compiled kg_fx_honest_relu in "), "{note}");
    assert!(
        note.contains("made from other sources, flags or torch"),
        "{note}"
    );

    // --fresh-build: the job's own directory; torch's is left as it was.
    let before = std::fs::read_dir(cache.read_dir().unwrap().next().unwrap().unwrap().path())
        .unwrap()
        .count();
    let mut cmd = cli();
    let out = cmd
        .args([
            "eval",
            "--problem",
            &fixture("problems/relu.py"),
            "--kernel",
        ])
        .arg(&kernel)
        .args([
            "--device",
            "cpu",
            "--no-timing",
            "--no-audit",
            "--fresh-build",
            "--format",
            "json",
        ])
        .env("HOME", home.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["extensions"][0]["built"], true, "{v}");
    assert!(
        !v["extensions_dir"]
            .as_str()
            .unwrap()
            .contains(".cache/torch_extensions"),
        "{v}"
    );
    let after = std::fs::read_dir(cache.read_dir().unwrap().next().unwrap().unwrap().path())
        .unwrap()
        .count();
    assert_eq!(before, after);
}

/// The precompiled-header root the tests share: `scripts/test.sh` builds it once
/// (`KERNELGATE_PCH_DIR`), a run without it builds it here.
fn pch_root() -> PathBuf {
    std::env::var_os("KERNELGATE_PCH_DIR")
        .filter(|d| !d.is_empty() && d != "off")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/kernelgate-pch"))
}

#[test]
fn kernelgate_pch_builds_a_checked_entry_and_a_cpp_build_is_offered_it() {
    let pch = pch_root();
    let out = cli()
        .args(["pch", "--dir"])
        .arg(&pch)
        .env("KERNELGATE_PCH_DIR", &pch)
        .output()
        .expect("run kernelgate pch");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kernelgate pch failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "built: <entry> (1.5 GiB; torch ..., c++)" or "already built: ...".
    let entry = stdout
        .lines()
        .find_map(|l| l.split_once("built: ").map(|(_, rest)| rest))
        .and_then(|rest| rest.split(" (").next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no entry named: {stdout}"));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(entry.join("manifest.json")).unwrap()).unwrap();
    for variant in ["O0", "O2"] {
        assert!(
            manifest["variants"].get(variant).is_some(),
            "{variant}: {manifest:#}"
        );
        assert!(
            entry
                .join(format!("torch/extension.h.gch/{variant}.gch"))
                .is_file(),
            "{variant}.gch missing in {}",
            entry.display()
        );
    }

    // The forwarding header for a second include (the fixture's source has one of its own).
    let forward = std::fs::read_to_string(entry.join("torch/extension.h")).unwrap_or_default();
    assert!(
        forward.contains("#include_next <torch/extension.h>"),
        "{forward}"
    );

    // A fresh build directory: the C++ source compiles here, with the entry on its CPATH.
    let builds = tempfile::tempdir().unwrap();
    let out = cli()
        .args(["eval", "--problem", &fixture("problems/relu.py")])
        .args(["--kernel", &fixture("kernels/honest_relu.py")])
        .args(["--device", "cpu", "--no-timing", "--format", "json"])
        .arg("--extensions-dir")
        .arg(builds.path())
        .env("KERNELGATE_PCH_DIR", &pch)
        .output()
        .expect("run kernelgate eval");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
    assert_eq!(
        v["precompiled_header"].as_str().map(PathBuf::from),
        Some(std::fs::canonicalize(&entry).unwrap()),
        "{v:#}"
    );
    let note = v["build"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("compiled kg_fx_honest_relu") && note.contains("precompiled"),
        "{note}"
    );
}

/// The build store from the harness's side: a build job keeps its build (published by
/// kernelgate from the job's staging directory), the next build job of the same files starts no
/// process, and an eval loads the kept build read-only, compiling nothing.
#[test]
fn a_build_job_keeps_its_build_in_the_store_and_the_eval_loads_it_read_only() {
    use kernelgate_eval::{run_job, BuildStore, ExtensionsDir, JobSpec, StoreUse};
    let dir = tempfile::tempdir().unwrap();
    let store = BuildStore::open(dir.path().join("store")).unwrap();
    let mut spec = JobSpec::new(
        fixture("problems/relu.py"),
        fixture("kernels/honest_relu.py"),
    );
    spec.device = kernelgate_model::Device::Cpu;
    spec.trials = 1;
    spec.seed = Some(42);
    spec.shifted_trials = 0;
    spec.python = Some(python());
    spec.harness = Some(
        PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"))
            .parent()
            .unwrap()
            .join("libkernelgate_harness.so"),
    );
    spec.extensions_dir = ExtensionsDir::Store(store.clone());
    spec.sources_known = true;
    spec.compile_timeout = Duration::from_secs(600);
    spec.timing = None;
    spec.audit = false;
    spec.build_only = true;
    let built = run_job(&spec);
    assert_eq!(
        built.build_store,
        Some(StoreUse::Built),
        "{:?}\n{}",
        built.outcome,
        built.stderr_tail
    );
    let t0 = Instant::now();
    let again = run_job(&spec);
    assert_eq!(again.build_store, Some(StoreUse::Store));
    assert!(again.passed() && again.phases.is_empty(), "{again:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());

    spec.build_only = false;
    let eval = run_job(&spec);
    assert!(eval.passed(), "{:?}\n{}", eval.outcome, eval.stderr_tail);
    assert_eq!(eval.build_store, Some(StoreUse::Store));
    assert!(
        !eval.extensions.is_empty() && eval.extensions.iter().all(|e| !e.built),
        "{:?}",
        eval.extensions
    );
    assert!(
        eval.extensions_dir
            .as_deref()
            .is_some_and(|d| Path::new(d).starts_with(store.root())),
        "{:?}",
        eval.extensions_dir
    );
    // Without a complete dependency set nothing is looked up or kept.
    spec.sources_known = false;
    let unknown = run_job(&spec);
    assert!(unknown.passed(), "{:?}", unknown.outcome);
    assert_eq!(unknown.build_store, None);
}

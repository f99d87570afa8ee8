//! Timing that cannot be bought (issue 14), end to end through the real CLI, the real child
//! process and real torch on the CPU: result stores keyed by input values and a candidate that
//! slows the reference's op fail with their timing findings; honest kernels (a plain C++ ReLU,
//! a C++ matmul with a workspace kept across calls) pass with neither.
//!
//! Needs the harness extension next to the CLI (`cargo build -p kernelgate-harness`) and a
//! Python with torch (`KERNELGATE_PYTHON` or `.venv`).

use crate::common::{python, root, test_extensions_dir};

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

const INPUT_REUSE: &str = "timing/input-reuse-speedup";
const TAMPERED: &str = "timing/reference-tampered";

/// `kernelgate eval --device cpu --format json` with timing, seed 1; (exit code, JSON).
fn eval_timed(problem: &str, kernel: &str) -> (i32, Value) {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"));
    let ext = test_extensions_dir();
    let fx = |rel: &str| root().join("tests/fixtures/eval").join(rel);
    let out = Command::new(exe)
        .env("KERNELGATE_PYTHON", python())
        .current_dir(root())
        .arg("eval")
        .arg("--problem")
        .arg(fx(problem))
        .arg("--kernel")
        .arg(fx(kernel))
        .args(["--device", "cpu", "--format", "json", "--seed", "1"])
        .arg("--extensions-dir")
        .arg(&ext)
        .output()
        .expect("run kernelgate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from kernelgate eval ({e}); stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn finding<'v>(v: &'v Value, rule: &str) -> Option<&'v Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == rule)
}

fn series_len(v: &Value, series: &str) -> usize {
    v["timing"]["samples"][series]
        .as_array()
        .map_or(0, Vec::len)
}

/// Every result correct, so the run "passes" its checks, but the error finding fails it.
#[track_caller]
fn assert_caught(code: i32, v: &Value, rule: &str, says: &str) {
    assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
    let f = finding(v, rule).unwrap_or_else(|| panic!("no {rule}: {v:#}"));
    assert_eq!(f["severity"], "error", "{f:#}");
    assert!(f["message"].as_str().unwrap().contains(says), "{f:#}");
    assert_eq!(code, 1, "an error finding fails the run: {v:#}");
}

#[test]
fn a_static_map_keyed_by_sampled_input_values_is_input_reuse() {
    let (code, v) = eval_timed("problems/small_matmul.py", "kernels/value_keyed_cache.py");
    assert_caught(
        code,
        &v,
        INPUT_REUSE,
        "faster on input content it has seen before",
    );
    // Prevention first: every fresh call missed the store, so the candidate's own series is
    // the honest -O0 loop, far slower than the repeated one.
    let c = &v["timing"]["samples"];
    let median = |s: &str| {
        let mut ms: Vec<f64> = c[s]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["ms"].as_f64().unwrap())
            .collect();
        ms.sort_by(f64::total_cmp);
        ms[ms.len() / 2]
    };
    assert!(
        median("candidate") > 2.0 * median("candidate_repeated"),
        "{c:#}"
    );
    assert!(finding(&v, TAMPERED).is_none(), "{v:#}");
}

#[test]
fn a_ring_of_eight_results_that_survives_one_set_refresh_is_input_reuse() {
    let (code, v) = eval_timed("problems/relu.py", "kernels/value_keyed_ring.py");
    assert_caught(
        code,
        &v,
        INPUT_REUSE,
        "faster on input content it has seen before",
    );
}

#[test]
fn wrapping_the_reference_op_at_import_is_reference_tampering() {
    // The reference is timed in a worker of its own, which never imports the candidate: the
    // wrapper slows nothing the judge times, and the candidate's worker names the patch.
    let (code, v) = eval_timed("problems/relu.py", "kernels/slows_reference_op.py");
    assert_caught(code, &v, "eval/torch-patched", "torch.relu");
    assert!(series_len(&v, "reference_before_import") >= 10, "{v:#}");
    assert!(finding(&v, INPUT_REUSE).is_none(), "{v:#}");
}

#[test]
fn honest_kernels_with_and_without_a_workspace_pass_with_no_integrity_finding() {
    for (problem, kernel) in [
        ("problems/relu.py", "kernels/honest_relu.py"),
        (
            "problems/small_matmul.py",
            "kernels/honest_matmul_workspace.py",
        ),
    ] {
        let (code, v) = eval_timed(problem, kernel);
        assert_eq!(v["outcome"]["kind"], "passed", "{kernel}: {v:#}");
        for rule in [INPUT_REUSE, TAMPERED] {
            assert!(finding(&v, rule).is_none(), "{kernel}: {rule}: {v:#}");
        }
        assert_eq!(code, 0, "{kernel}: {v:#}");
        // The witnesses were measured, and the refill's cost is reported.
        for s in ["candidate", "candidate_repeated", "reference_before_import"] {
            assert!(series_len(&v, s) >= 10, "{kernel}: {s}: {:#}", v["timing"]);
        }
        assert_eq!(series_len(&v, "input_refill"), 5, "{:#}", v["timing"]);
        // Timed calls are re-verified on the content they saw: at least one per series.
        let verified = v["timing"]["samples"]["candidate"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["verified"] == true)
            .count();
        assert!(verified >= 1, "{kernel}: {:#}", v["timing"]);
    }
}

// ---- issue 26: fresh timed inputs keep the problem's structure --------------------------------

#[test]
fn kernels_that_rely_on_structured_inputs_pass_with_timing() {
    // Symmetric (A used as A^T) and lower-triangular with a zero pattern that differs between
    // draws (KernelBench level1/13 and /15 at small sizes): windows of a concatenated pool lost
    // both; whole new draws of get_inputs() keep them.
    for (problem, kernel) in [
        (
            "problems/symmetric_matmul.py",
            "kernels/symmetric_exploit.py",
        ),
        ("problems/tril_matmul.py", "kernels/tril_exploit.py"),
    ] {
        let (code, v) = eval_timed(problem, kernel);
        assert_eq!(v["outcome"]["kind"], "passed", "{kernel}: {v:#}");
        assert_eq!(code, 0, "{kernel}: {v:#}");
        let verified = v["timing"]["samples"]["candidate"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["verified"] == true)
            .count();
        assert!(verified >= 1, "{kernel}: {:#}", v["timing"]);
    }
}

// ---- issue 27: work deferred into the harness's own operations --------------------------------

const HOOKED: &str = "eval/harness-hooked";

/// A deferring kernel: the hook is named, and the run fails whichever check reports first.
#[track_caller]
fn assert_hooked(code: i32, v: &Value, says: &str) {
    let f = finding(v, HOOKED).unwrap_or_else(|| panic!("no {HOOKED}: {v:#}"));
    assert_eq!(f["severity"], "error", "{f:#}");
    assert!(f["message"].as_str().unwrap().contains(says), "{f:#}");
    assert_eq!(code, 1, "{v:#}");
}

#[test]
fn a_global_aten_callback_that_finishes_timed_calls_later_is_caught() {
    let (code, v) = eval_timed("problems/relu.py", "kernels/aten_callback_deferred.py");
    assert_hooked(code, &v, "global RecordFunction callback");
    // Its worker keeps the collector off for every call, so it defers from the first trial on;
    // the worker takes each output with the timer's copy, before any ATen op: still unwritten.
    assert_eq!(v["outcome"]["kind"], "incorrect", "{v:#}");
}

#[test]
fn a_dispatch_mode_left_on_the_stack_is_caught() {
    let (code, v) = eval_timed("problems/relu.py", "kernels/dispatch_mode_deferred.py");
    assert_hooked(code, &v, "TorchDispatchMode");
    assert_eq!(v["outcome"]["kind"], "incorrect", "{v:#}");
}

#[test]
fn a_dispatcher_override_of_the_references_op_is_caught() {
    let (code, v) = eval_timed("problems/relu.py", "kernels/dispatch_override_relu.py");
    assert_hooked(code, &v, "aten::relu");
    assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
}

#[test]
fn an_op_wrapped_at_import_is_named_by_the_witness() {
    let (_, v) = eval_timed("problems/relu.py", "kernels/slows_reference_op.py");
    let f = finding(&v, "eval/torch-patched").unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(f["severity"], "error", "{f:#}");
    assert!(
        f["message"].as_str().unwrap().contains("torch.relu"),
        "{f:#}"
    );
}

//! The runner's work report through `run_job` (real child, real torch on the CPU). The FLOP
//! count is forced on here: by default only GPU jobs count FLOPs (the floor is GPU-only).
//!
//! Needs the harness extension (`cargo build -p kernelgate-harness`) and a Python with torch
//! (`KERNELGATE_PYTHON` or `<repo>/.venv`).

use kernelgate_eval::{run_job, JobSpec};
use kernelgate_model::config::TimingConfig;
use kernelgate_model::Device;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn spec(problem: &str, kernel: &str) -> JobSpec {
    let fx = repo().join("tests/fixtures/eval");
    let harness = kernelgate_eval::find_harness()
        .expect("build the harness first: cargo build -p kernelgate-harness");
    let mut spec = JobSpec::new(fx.join(problem), fx.join(kernel));
    spec.harness = Some(harness);
    spec.python = Some(kernelgate_eval::find_python(&repo()));
    spec.device = Device::Cpu;
    spec.seed = Some(3);
    spec.timing = Some(TimingConfig {
        warmup: 1,
        min_samples: 10,
        max_samples: 20,
        ..TimingConfig::default()
    });
    spec
}

#[test]
fn flops_of_a_matmul_are_counted_when_asked() {
    let mut s = spec("problems/small_matmul.py", "kernels/python_matmul.py");
    s.count_flops = Some(true);
    let r = run_job(&s);
    assert!(r.passed(), "{:?}\n{}", r.outcome, r.stderr_tail);
    let w = r.work.expect("work reported");
    // a: 32 x 64, b: 64 x 16, out: 32 x 16, all fp32; 2*M*K*N FLOPs.
    assert_eq!(w.input_bytes, (32 * 64 + 64 * 16) * 4);
    assert_eq!(w.output_bytes, 32 * 16 * 4);
    assert_eq!(w.flops, Some(2 * 32 * 64 * 16));
    // On the CPU there is no floor, whatever was counted.
    assert!(r.timing.as_ref().unwrap().floor.is_none());
    assert!(r.phases.iter().any(|p| p.name == "work"));
}

#[test]
fn cpu_jobs_count_bytes_but_no_flops_by_default() {
    let r = run_job(&spec(
        "problems/small_matmul.py",
        "kernels/python_matmul.py",
    ));
    assert!(r.passed(), "{:?}\n{}", r.outcome, r.stderr_tail);
    let w = r.work.expect("work reported");
    assert_eq!(w.input_bytes, (32 * 64 + 64 * 16) * 4);
    assert_eq!(w.flops, None);
}

#[test]
fn flops_of_layers_and_tuple_outputs() {
    let mut s = spec(
        "problems/small_linear_conv.py",
        "kernels/python_linear_conv.py",
    );
    s.count_flops = Some(true);
    let r = run_job(&s);
    assert!(r.passed(), "{:?}\n{}", r.outcome, r.stderr_tail);
    let w = r.work.expect("work reported");
    // Inputs 32 x 64 and 2 x 3 x 16 x 16; outputs 32 x 16 and 2 x 8 x 14 x 14 (fp32).
    assert_eq!(w.input_bytes, (32 * 64 + 2 * 3 * 16 * 16) * 4);
    assert_eq!(w.output_bytes, (32 * 16 + 2 * 8 * 14 * 14) * 4);
    // Linear: 2 * 32 * 64 * 16; conv: 2 * (2 * 8 * 14 * 14 outputs) * (3 * 3 * 3 taps); ReLU: 0.
    assert_eq!(w.flops, Some(2 * 32 * 64 * 16 + 2 * (2 * 8 * 14 * 14) * 27));
}

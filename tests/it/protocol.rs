//! The CLI ↔ runner contract, from both ends: the job the CLI serialises is the job the
//! runner's `kg_protocol` parses, field for field; the three copies of the protocol number
//! agree; a real result the runner writes is the one the CLI reads, field for field.

use crate::common::{python, root};

use kernelgate_eval::outcome::Outcome;
use kernelgate_eval::protocol::{Job, JobTiming, SandboxGrant, HARNESS_PROTOCOL};
use kernelgate_eval::JobSpec;
use kernelgate_model::config::L2Mode;
use kernelgate_model::Precision;
use std::process::Command;

fn job() -> Job {
    Job {
        protocol: HARNESS_PROTOCOL,
        job_id: "00ff".into(),
        problem: "/p.py".into(),
        kernel: "/k.py".into(),
        base_kernel: Some("/b.py".into()),
        base_extensions_dir: Some("/ext/base".into()),
        base_prebuilt: true,
        prebuilt: false,
        device: kernelgate_model::Device::Cuda,
        cpu_backend: false,
        precision: Precision::Fp16,
        tolerance: Precision::Fp16.tolerance(),
        trials: 5,
        seed: 7,
        shifted_trials: 1,
        inputs_on_device: true,
        count_flops: true,
        audit: true,
        build_only: false,
        timing: Some(JobTiming {
            warmup: 3,
            min_samples: 10,
            max_samples: 200,
            budget_s: 10.0,
            ci_target_pct: 1.0,
            l2: L2Mode::Warm,
            input_sets: 3,
        }),
        result_path: "/r".into(),
        progress_path: "/q".into(),
        sandbox: Some(SandboxGrant {
            read_exec: vec!["/usr".into()],
            read_files: vec!["/k.py".into()],
            read_write: vec!["/tmp/x".into()],
            denied_syscalls: [("ptrace".to_string(), 101)].into_iter().collect(),
            denied_from_candidate: [("sched_setaffinity".to_string(), 203)]
                .into_iter()
                .collect(),
            level: "full".into(),
        }),
        spawn_unix: Some(1.5),
    }
}

/// The harness extension beside the CLI.
fn harness_library() -> std::path::PathBuf {
    let lib = std::path::PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"))
        .parent()
        .unwrap()
        .join("libkernelgate_harness.so");
    assert!(
        lib.is_file(),
        "build the harness first: cargo build -p kernelgate-harness"
    );
    lib
}

/// Runs `script` with kg_protocol loaded from the harness's sources; returns stdout.
fn with_kg_protocol(script: &str, stdin: &str) -> String {
    use std::io::Write;
    let dir = root().join("crates/harness/python");
    let prelude = format!(
        "import importlib.util, json, sys\n\
         spec = importlib.util.spec_from_file_location('kg_protocol', {:?})\n\
         kg_protocol = importlib.util.module_from_spec(spec); spec.loader.exec_module(kg_protocol)\n",
        dir.join("kg_protocol.py").display().to_string()
    );
    let mut child = Command::new(python())
        .args(["-c", &format!("{prelude}{script}")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_runner_parses_the_job_the_cli_sends_field_for_field() {
    let text = serde_json::to_string(&job()).unwrap();
    let back = with_kg_protocol(
        "from dataclasses import asdict\nprint(json.dumps(asdict(kg_protocol.parse_job(sys.stdin.read()))))",
        &text,
    );
    let sent: serde_json::Value = serde_json::from_str(&text).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&back).unwrap();
    assert_eq!(parsed, sent);
    // And the defaults-free job of a CPU run without timing or sandbox.
    let mut plain = job();
    (
        plain.timing,
        plain.sandbox,
        plain.base_kernel,
        plain.base_extensions_dir,
        plain.spawn_unix,
    ) = (None, None, None, None, None);
    let text = serde_json::to_string(&plain).unwrap();
    let back = with_kg_protocol(
        "from dataclasses import asdict\nprint(json.dumps(asdict(kg_protocol.parse_job(sys.stdin.read()))))",
        &text,
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&back).unwrap(),
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    );
}

#[test]
fn the_cli_the_harness_and_the_runner_speak_one_protocol_version() {
    let py = with_kg_protocol("print(kg_protocol.PROTOCOL)", "");
    assert_eq!(py, HARNESS_PROTOCOL.to_string(), "kg_protocol.PROTOCOL");
    // The built extension's own number (what `kernelgate --version` reports).
    let lib = harness_library();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&lib, dir.path().join("kernelgate_harness.abi3.so")).unwrap();
    let out = Command::new(python())
        .args([
            "-c",
            "import kernelgate_harness as h; print(h.PROTOCOL); \
             print(h.ci_half_width_pct([1.0, 1.1, 0.9, 1.2, 1.0, 0.95, 1.05, 1.3])); \
             print(h.ci_half_width_pct([1.0, 2.0]))",
        ])
        .env("PYTHONPATH", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(HARNESS_PROTOCOL.to_string().as_str()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The sampler's stopping rule is the CLI's statistic, computed by the same code.
    let rust =
        kernelgate_timing::SeriesStats::from_samples(&[1.0, 1.1, 0.9, 1.2, 1.0, 0.95, 1.05, 1.3])
            .unwrap()
            .ci_half_width_pct();
    assert_eq!(lines[1].parse::<f64>().unwrap(), rust);
    assert_eq!(lines[2], "inf", "under 6 samples there is no interval");
}

/// A real result of the Python harness reaches the CLI whole: `RunnerResult` refuses a field
/// it does not know, so an honest CPU job that passes proves the runner's result and the CLI's
/// type agree key for key, and what the runner reported arrives typed (its seed checked against
/// the job's, its trials, its machine). Each outcome kind's real result is asserted by
/// `tests/it/eval.rs` through the same path.
#[test]
fn a_real_result_of_the_runner_is_read_field_for_field() {
    let fixtures = root().join("tests/fixtures/eval");
    let mut spec = JobSpec::new(
        fixtures.join("problems/relu.py"),
        fixtures.join("kernels/honest_relu.py"),
    );
    spec.device = kernelgate_model::Device::Cpu;
    spec.trials = 2;
    spec.seed = Some(7);
    spec.python = Some(python());
    spec.harness = Some(harness_library());
    let r = kernelgate_eval::run_job(&spec);
    let Outcome::Passed { trials } = r.outcome else {
        panic!("{:?}\nstderr: {}", r.outcome, r.stderr_tail);
    };
    assert_eq!(r.trials_run, Some(trials), "the runner's trials_run");
    assert!(trials >= 2, "{trials}");
    assert_eq!(r.seed, 7);
    let machine = r.machine.as_ref().expect("the runner's machine");
    assert_eq!(machine.cuda, "none", "{machine:?}");
    assert!(
        r.device.as_ref().is_some_and(|d| d.is_cpu()),
        "{:?}",
        r.device
    );
    assert_eq!(r.torch.as_deref(), Some(machine.torch.as_str()));
    assert!(r.phases.iter().any(|p| p.name == "total"), "{:?}", r.phases);
}

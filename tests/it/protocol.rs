//! The CLI ↔ runner contract, from both ends: the job the CLI serialises is the job the
//! runner's `kg_protocol` parses, field for field; the three copies of the protocol number
//! agree; every outcome kind the runner writes is one the CLI reads.

use crate::common::{python, root};

use kernelgate_eval::outcome::Outcome;
use kernelgate_eval::protocol::{Job, JobTiming, SandboxGrant, HARNESS_PROTOCOL};
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
    let lib = std::path::PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"))
        .parent()
        .unwrap()
        .join("libkernelgate_harness.so");
    assert!(
        lib.is_file(),
        "build the harness first: cargo build -p kernelgate-harness"
    );
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

/// Every `"kind": "..."` the runner writes names an [`Outcome`] variant (a renamed variant on
/// one side would turn a verdict into an unparsable result).
#[test]
fn every_outcome_kind_the_runner_writes_is_one_the_cli_reads() {
    let re = regex::Regex::new(r#""kind": "([a-z_]+)""#).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    // Every module of the runner (the runner and its private stage modules).
    let dir = root().join("crates/harness/python");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py") {
            let src = std::fs::read_to_string(&path).unwrap();
            kinds.extend(re.captures_iter(&src).map(|c| c[1].to_string()));
        }
    }
    kinds.insert("infrastructure".into()); // the runner renames a harness_error to it
    assert!(kinds.len() >= 10, "{kinds:?}");
    for kind in &kinds {
        let v = serde_json::json!({"kind": kind, "message": "m", "reason": "r",
            "expected": null, "got": null});
        if let Err(e) = serde_json::from_value::<Outcome>(v) {
            assert!(
                !e.to_string().contains("unknown variant"),
                "the runner writes outcome kind `{kind}`, which the CLI does not know: {e}"
            );
        }
    }
}

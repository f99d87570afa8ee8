//! Snapshots of comment.md for the typical PR situations, the length cap, and SARIF validity
//! against the official SARIF 2.1.0 schema.

use kernelgate_model::{Backend, Condition, Finding, Precision, SandboxLevel, Severity};
use kernelgate_report::*;
use serde_json::json;

fn run() -> RunInfo {
    RunInfo {
        repo: "acme/kernels".into(),
        pr_number: Some(7),
        base_sha: "b".repeat(40),
        head_sha: "a".repeat(40),
        started_at: "2026-11-30T09:00:00Z".into(),
        finished_at: Some("2026-11-30T09:12:00Z".into()),
        hardware: Hardware {
            gpu: "NVIDIA H200".into(),
            driver: "580.65".into(),
            cuda: "13.0".into(),
            torch: "2.11.0".into(),
            python: "3.12.3".into(),
            cpu: "AMD EPYC 9654".into(),
        },
        seed: Some(1234),
        sandbox: vec![],
        shard: None,
        complete: true,
        artifact_url: None,
        dashboard_url: None,
        config: None,
    }
}

fn passing(name: &str, speedup: f64) -> KernelRow {
    let mut r = KernelRow::new(
        format!("kernels/{name}.py"),
        format!("level1/{name}.py"),
        Backend::Cuda,
        Precision::Fp32,
        Change::Modified,
        OutcomeSummary::new(OutcomeKind::Correct, ""),
    );
    r.reference_ms = Some(2.0);
    r.time_ms = Some(2.0 / speedup);
    r.compiled_ms = Some(1.5);
    r.speedup_eager = Some(Interval::new(speedup, speedup * 0.97, speedup * 1.03));
    r.speedup_compile = Some(Interval::point(1.5 / (2.0 / speedup)));
    r.vs_base = Some(ComparisonSummary {
        ratio: 0.98,
        ci_lo: Some(0.96),
        ci_hi: Some(1.01),
        verdict: ComparisonVerdict::Same,
        against: None,
    });
    r.annotate_line = Some(20);
    r.device = Some("NVIDIA H200".into());
    r.timed_on = Some(TimedOn::Gpu);
    r.efficiency = Some(gpu_efficiency(name, speedup));
    r
}

/// An H200 fp32 row's efficiency as `kernelgate_timing::efficiency` gives it: a matmul against
/// the CUDA cores' 67 TFLOP/s, anything else against the 4800 GB/s bandwidth.
fn gpu_efficiency(name: &str, speedup: f64) -> kernelgate_model::Efficiency {
    let pct = (speedup * 40.0).min(95.0);
    let (bound, peak) = if name.contains("matmul") {
        (kernelgate_model::Bound::Compute, 67.0)
    } else {
        (kernelgate_model::Bound::Memory, 4800.0)
    };
    kernelgate_model::Efficiency {
        pct,
        bound,
        achieved: peak * pct / 100.0,
        peak,
        precision: Precision::Fp32,
    }
}

fn report(rows: Vec<KernelRow>) -> Report {
    let mut r = Report::new(run());
    r.kernels = rows;
    r.finalize();
    r
}

fn all_passing() -> Report {
    report(vec![
        passing("19_ReLU", 1.8),
        passing("23_Softmax", 2.4),
        passing("1_Square_matmul", 1.1),
    ])
}

fn one_incorrect() -> Report {
    let mut bad = passing("23_Softmax", 3.0);
    bad.outcome = OutcomeSummary {
        kind: OutcomeKind::Incorrect,
        message: "max abs diff 0.31 at [3, 17] (atol = rtol = 1e-4), trial 2 of 5".into(),
        details: json!({"max_abs_diff": 0.31, "max_rel_diff": 0.9, "trial": 2, "seed": 99}),
        log_tail: None,
    };
    bad.speedup_eager = None;
    bad.speedup_compile = None;
    bad.time_ms = None;
    bad.efficiency = None;
    bad.vs_base = None;
    bad.verdict = Verdict::Fail;
    bad.reasons = vec!["output differs from the reference".into()];
    report(vec![passing("19_ReLU", 1.8), bad])
}

fn one_hack() -> Report {
    let mut hack = passing("1_Square_matmul", 45.0);
    hack.findings = vec![Finding {
        file: "kernels/1_Square_matmul.py".into(),
        line: 42,
        column: 16,
        end_line: 42,
        end_column: 31,
        rule: "torch-fallback".into(),
        severity: Severity::Error,
        message: "`torch.matmul` computes the result in PyTorch instead of the kernel".into(),
    }];
    hack.outcome.kind = OutcomeKind::Hack;
    hack.outcome.message = "output aliases input 0".into();
    hack.flags = vec![Flag {
        code: Condition::ExcessiveSpeedup,
        severity: Severity::Warning,
        message: "45.0× over eager exceeds 10×".into(),
    }];
    hack.verdict = Verdict::Fail;
    hack.reasons = vec![
        "lint error torch-fallback".into(),
        "runtime hack detected".into(),
    ];
    report(vec![hack, passing("19_ReLU", 1.8)])
}

fn one_regression() -> Report {
    let mut slow = passing("19_ReLU", 1.2);
    slow.vs_base = Some(ComparisonSummary {
        ratio: 1.25,
        ci_lo: Some(1.21),
        ci_hi: Some(1.29),
        verdict: ComparisonVerdict::Slower,
        against: None,
    });
    slow.vs_baseline = Some(ComparisonSummary {
        ratio: 1.3,
        ci_lo: None,
        ci_hi: None,
        verdict: ComparisonVerdict::Slower,
        against: Some(BaselineSource {
            kind: BaselineKind::MainKernel,
            detail: "kernels/level1/19_ReLU/cuda.py on main (commit abc1234), NVIDIA H200 / driver 580.95 / CUDA 13.0 / torch 2.11.0 / fp32".into(),
        }),
    });
    slow.verdict = Verdict::Fail;
    slow.reasons = vec!["25.0% slower than the base version (threshold 5.0%)".into()];
    let mut r = report(vec![slow, passing("23_Softmax", 2.4)]);
    r.policy.regression_threshold = Some(0.05);
    r
}

fn changed_reference() -> Report {
    let old = "import torch\nbatch_size = 4096\ndim = 16384\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";
    let new = "import torch\nbatch_size = 16\ndim = 16384\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";
    let mut row = passing("19_ReLU", 1.8);
    row.change = Change::ProblemChanged;
    row.vs_baseline = Some(ComparisonSummary {
        ratio: 0.4,
        ci_lo: None,
        ci_hi: None,
        verdict: ComparisonVerdict::Invalid,
        against: None,
    });
    let mut r = Report::new(run());
    r.kernels = vec![row];
    r.reference_changes = vec![ReferenceChange::from_sources(
        "level1/19_ReLU.py",
        "KernelBench/level1/19_ReLU.py",
        old,
        new,
    )];
    r.other_changes = vec!["kernelgate.toml".into()];
    r.finalize();
    r
}

fn huge() -> Report {
    let rows = (0..1500)
        .map(|i| {
            let mut r = passing(&format!("{i}_Problem"), 1.0 + (i % 7) as f64 * 0.3);
            if i % 5 == 0 {
                r.outcome.kind = OutcomeKind::CompileError;
                r.outcome.message = "nvcc failed".into();
                r.outcome.log_tail = Some((0..60).map(|l| format!("error line {l}\n")).collect());
                r.verdict = Verdict::Fail;
            }
            r
        })
        .collect();
    report(rows)
}

#[test]
fn the_sandbox_level_is_shown_once_and_loudly_when_not_full() {
    let mut r = all_passing();
    r.run.sandbox = vec![SandboxLevel::Full];
    let c = render_comment(&r);
    assert_eq!(c.matches("sandbox: full").count(), 1, "{c}");
    assert!(!c.contains("[!CAUTION]"));
    r.run.sandbox = vec![SandboxLevel::Unavailable(
        "Landlock is not enabled in this kernel".into(),
    )];
    let c = render_comment(&r);
    assert_eq!(
        c.matches("sandbox: unavailable (Landlock").count(),
        1,
        "{c}"
    );
    assert!(c.contains("[!CAUTION]"));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(
        json["run"]["sandbox"],
        "unavailable (Landlock is not enabled in this kernel)"
    );
}

#[test]
fn the_pull_requests_config_changes_are_a_table_that_applies_after_merge() {
    let mut r = all_passing();
    r.run.config = Some(ConfigSource::Base {
        commit: "b".repeat(40),
        path: "kernelgate.toml".into(),
    });
    r.config_changes = vec![
        ConfigChange {
            key: "policy.fail_on".into(),
            base: json!(["incorrect", "crash"]),
            head: json!([]),
            applies: ConfigApplies::AfterMerge,
        },
        ConfigChange {
            key: "harness.python".into(),
            base: serde_json::Value::Null,
            head: json!("/opt/x|y/python"),
            applies: ConfigApplies::AfterMerge,
        },
        ConfigChange {
            key: "kernels.globs".into(),
            base: json!(["kernels/**/*.py"]),
            head: json!(["kernels/**/*.py", "more/*.py"]),
            applies: ConfigApplies::ThisRun,
        },
    ];
    let c = render_comment(&r);
    assert!(
        c.contains("It was judged with kernelgate.toml of the base commit bbbbbbbbbb;"),
        "{c}"
    );
    assert!(
        c.contains("| `policy.fail_on` | `[\"incorrect\",\"crash\"]` | `[]` | after merge |"),
        "{c}"
    );
    // An unset key reads `unset`; a `|` in a value cannot split the row.
    assert!(
        c.contains("| `harness.python` | unset | `\"/opt/x\\|y/python\"` | after merge |"),
        "{c}"
    );
    assert!(c.contains("| in this run |"), "{c}");
    assert!(
        c.contains("**judged with:** kernelgate.toml of the base commit"),
        "{c}"
    );
    // Typed in report.json, and read back.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["config_changes"][0]["applies"], "after_merge");
    assert_eq!(json["run"]["config"]["from"], "base");
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
    // Reports without them (older ones) read as none.
    let mut old = serde_json::to_value(all_passing()).unwrap();
    old.as_object_mut().unwrap().remove("config_changes");
    assert!(serde_json::from_value::<Report>(old)
        .unwrap()
        .config_changes
        .is_empty());
}

#[test]
fn comment_all_passing() {
    let c = render_comment(&all_passing());
    assert!(c.starts_with(STICKY_MARKER));
    // Read at a glance: a passing pull request's comment stays under 25 lines.
    assert!(c.lines().count() < 25, "{} lines", c.lines().count());
    insta::assert_snapshot!(c);
}

#[test]
fn comment_one_incorrect() {
    let c = render_comment(&one_incorrect());
    assert!(c.contains("❌ incorrect") && c.contains("max abs diff 0.31"));
    insta::assert_snapshot!(c);
}

#[test]
fn comment_one_hack() {
    let c = render_comment(&one_hack());
    assert!(c.contains(&format!(
        "https://github.com/acme/kernels/blob/{}/kernels/1_Square_matmul.py#L42",
        "a".repeat(40)
    )));
    insta::assert_snapshot!(c);
}

#[test]
fn comment_one_regression() {
    let c = render_comment(&one_regression());
    // 25% slower than the base, in the direction of every column: a speedup of 0.80x.
    assert!(c.contains("0.80× <sub>[0.78, 0.83]</sub> 🔴 slower"), "{c}");
    // The regressed row's details give the rate it achieves against the limit.
    assert!(
        c.contains(
            "- efficiency: 48% of memory bandwidth, 2304 GB/s of 4800 GB/s (memory-bound)\n"
        ),
        "{c}"
    );
    insta::assert_snapshot!(c);
}

#[test]
fn comment_changed_reference() {
    let c = render_comment(&changed_reference());
    assert!(
        c.contains("[!CAUTION]")
            && c.contains("-batch_size = 4096")
            && c.contains("+batch_size = 16")
    );
    insta::assert_snapshot!(c);
}

#[test]
fn comment_truncated_huge_report() {
    let r = huge();
    let c = render_comment(&r);
    assert!(
        c.chars().count() <= COMMENT_LIMIT,
        "{} chars",
        c.chars().count()
    );
    assert!(c.starts_with(STICKY_MARKER));
    // Failures sort first, so they survive truncation; the pointer to the artifact is there.
    assert!(
        c.contains("more kernel(s) not shown"),
        "rows should have been cut"
    );
    assert!(c.contains("kernelgate-report"));
    let first_row = c
        .lines()
        .find(|l| l.starts_with("| ❌"))
        .expect("a failing row survives");
    assert!(first_row.contains("compile error"));
    // The snapshot covers the head and tail; the middle is thousands of similar rows.
    let lines: Vec<&str> = c.lines().collect();
    let head = lines[..12].join("\n");
    let tail = lines[lines.len() - 6..].join("\n");
    insta::assert_snapshot!(format!("{head}\n[…]\n{tail}"));
}

#[test]
fn truncation_drops_details_before_rows() {
    let r = one_hack();
    let full = render_comment(&r);
    let limit = full.chars().count() - 50;
    let c = render_comment_with_limit(&r, limit);
    assert!(c.chars().count() <= limit);
    assert!(c.contains("omitted for length"), "{c}");
    assert!(
        c.contains("1_Square_matmul.py") && c.contains("19_ReLU.py"),
        "all rows kept"
    );
}

#[test]
fn summary_has_no_marker_and_same_table() {
    let s = render_summary(&one_incorrect());
    assert!(!s.contains(STICKY_MARKER));
    assert!(
        s.starts_with("## ❌ kernelgate: 1 of 2 kernel(s) failed"),
        "{s}"
    );
}

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("data/sarif-schema-2.1.0.json"))
            .expect("vendored schema parses");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

#[test]
fn sarif_validates_against_the_official_schema() {
    let v = validator();
    for r in [one_hack(), one_incorrect(), all_passing(), huge()] {
        let sarif = to_sarif(&r);
        let errors: Vec<String> = v
            .iter_errors(&sarif)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }
    // The validator is not vacuous: a broken log is rejected.
    let mut bad = to_sarif(&one_hack());
    bad["runs"][0]["results"][0]["level"] = json!("fatal");
    assert!(!v.is_valid(&bad));
}

#[test]
fn sarif_locates_static_findings_and_runtime_failures() {
    let sarif = to_sarif(&one_hack());
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let lint = results
        .iter()
        .find(|r| r["ruleId"] == "torch-fallback")
        .unwrap();
    let region = &lint["locations"][0]["physicalLocation"]["region"];
    assert_eq!(
        (
            region["startLine"].as_u64(),
            region["startColumn"].as_u64(),
            region["endColumn"].as_u64()
        ),
        (Some(42), Some(16), Some(32))
    );
    let rt = results
        .iter()
        .find(|r| r["ruleId"] == "runtime/hack")
        .unwrap();
    assert_eq!(
        rt["locations"][0]["physicalLocation"]["region"]["startLine"],
        20
    );
    assert_eq!(rt["level"], "error");
    assert!(results
        .iter()
        .any(|r| r["ruleId"] == "flag/excessive_speedup" && r["level"] == "warning"));
}

#[test]
fn check_run_payloads_batch_annotations_by_50() {
    let mut r = one_hack();
    r.kernels[0].findings = (1..=120)
        .map(|i| Finding {
            file: "kernels/1_Square_matmul.py".into(),
            line: i,
            column: 1,
            end_line: i,
            end_column: 4,
            rule: "r".into(),
            severity: Severity::Warning,
            message: format!("m{i}"),
        })
        .collect();
    r.finalize();
    let payloads = check_run::complete_payloads(&r, "summary");
    // 120 findings + 1 runtime failure + 1 flag = 122 → 50, 50, 22.
    let sizes: Vec<usize> = payloads
        .iter()
        .map(|p| p["output"]["annotations"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [50, 50, 22]);
    assert_eq!(payloads[0]["status"], "completed");
    assert_eq!(payloads[0]["conclusion"], "failure");
    assert!(payloads[1].get("conclusion").is_none());
    assert_eq!(
        payloads[0]["output"]["annotations"][0]["annotation_level"],
        "warning"
    );
}

#[test]
fn render_all_writes_the_four_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = render_all(&one_incorrect(), &dir.path().join("out")).unwrap();
    for p in [
        &out.report_json,
        &out.comment_md,
        &out.summary_md,
        &out.results_sarif,
    ] {
        assert!(std::fs::metadata(p).unwrap().len() > 100, "{}", p.display());
    }
    assert_eq!(Report::read(&out.report_json).unwrap(), one_incorrect());
}

#[test]
fn a_finding_has_one_fingerprint_in_lint_and_gate_sarif() {
    let report = one_hack();
    let finding = report.kernels[0].findings[0].clone();
    let gate = to_sarif(&report);
    let lint = kernelgate_report::findings_to_sarif(std::slice::from_ref(&finding), &[], &[]);
    let fp_of = |log: &serde_json::Value| {
        log["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["ruleId"] == finding.rule.as_str())
            .map(|r| r["partialFingerprints"]["primaryLocationLineHash"].clone())
            .unwrap()
    };
    assert_eq!(fp_of(&gate), fp_of(&lint));
}

#[test]
fn sarif_fingerprints_ignore_the_line() {
    let a = to_sarif(&one_hack());
    let mut moved = one_hack();
    moved.kernels[0].findings[0].line += 10;
    moved.kernels[0].findings[0].end_line += 10;
    let b = to_sarif(&moved);
    let fp = |v: &serde_json::Value| {
        v["runs"][0]["results"][0]["partialFingerprints"]["primaryLocationLineHash"].clone()
    };
    assert!(fp(&a).is_string());
    assert_eq!(fp(&a), fp(&b));
    assert_ne!(
        a["runs"][0]["results"][0]["locations"],
        b["runs"][0]["results"][0]["locations"]
    );
}

#[test]
fn giant_messages_and_log_lines_are_clipped() {
    let mut r = one_incorrect();
    r.kernels[1].outcome.message = "x".repeat(200_000);
    r.kernels[1].outcome.log_tail = Some("y".repeat(200_000));
    r.finalize();
    let c = render_comment(&r);
    assert!(c.chars().count() < 10_000, "{}", c.chars().count());
    assert!(c.contains("❌ incorrect") && c.contains("xxx…") && c.contains("yyy…"));
}

#[test]
fn the_op_audit_shows_its_custom_share_and_the_ops_left_to_pytorch() {
    let mut row = passing("2_Conv2d_ReLU_Scale", 1.1);
    let entry = |op: &str, class: kernelgate_model::OpClass, lib: Option<&str>, share: f64| {
        kernelgate_model::AuditEntry {
            op: op.into(),
            class,
            library: lib.map(str::to_string),
            by_extension: None,
            ms: share,
            share: Some(share),
            calls: 1,
        }
    };
    row.audit = Some(kernelgate_model::OpAudit {
        clock: kernelgate_model::AuditClock::Gpu,
        total_ms: 1.0,
        custom_ms: 0.26,
        custom_share: Some(0.26),
        glue_ms: None,
        forward_ms: 2.0,
        entries: vec![
            entry(
                "conv2d",
                kernelgate_model::OpClass::Vendor,
                Some("cuDNN"),
                0.64,
            ),
            entry(
                "ext.relu_scale",
                kernelgate_model::OpClass::Custom,
                None,
                0.26,
            ),
            entry("add", kernelgate_model::OpClass::Pytorch, None, 0.10),
        ],
        extension_calls: vec![],
        extension_modules: vec!["ext".into()],
        aten_ops: vec![],
        audit_ms: 300.0,
    });
    row.flags.push(Flag {
        code: Condition::PartialReplacement,
        severity: Severity::Warning,
        message: "custom code does 26% of the forward's work (below 50%); PyTorch still does: conv2d → cuDNN 64%".into(),
    });
    row.verdict = Verdict::Warn;
    let r = report(vec![row, passing("19_ReLU", 1.8)]);
    let c = render_comment(&r);
    assert!(c.contains("| `partial_replacement` |"), "{c}");
    assert!(
        c.contains("- op audit (GPU time): custom code 26% of 1.000 ms; left to PyTorch: conv2d → cuDNN 64%, add → PyTorch 10%"),
        "{c}"
    );
    let located = located(&r);
    assert!(located.iter().any(|l| l.rule == "flag/partial_replacement"
        && l.start_line == 20
        && l.severity == Severity::Warning));
    let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.kernels[0].audit, r.kernels[0].audit);
}

/// A CPU runner's view of a PR as a contributor meets it: two C++ kernels named `cpp.py`, a
/// compile error whose message the policy quotes, a lint-blocked hack, a CUDA kernel skipped
/// for want of a GPU.
fn contributor_view() -> Report {
    let mut relu = passing("level1/3_ReLU/cpp", 1.5);
    relu.problem = "level1/3_ReLU".into();
    let mut sigmoid = passing("level1/5_Sigmoid/cpp", 1.2);
    sigmoid.problem = "level1/5_Sigmoid".into();
    let mut broken = passing("level1/7_Softmax/cpp", 1.0);
    broken.problem = "level1/7_Softmax".into();
    broken.outcome = OutcomeSummary {
        kind: OutcomeKind::CompileError,
        message: "Error building extension 'kg_broken': expected ';' before 'is'".into(),
        details: json!({"kind": "compile_error", "seed": 7, "device": "cpu", "log_tail": "…"}),
        log_tail: Some(
            "kernels/level1/7_Softmax/cpp.py: main.cpp:3:19: error: expected ';' before 'is'\n"
                .into(),
        ),
    };
    broken.speedup_eager = None;
    broken.speedup_compile = None;
    broken.time_ms = None;
    broken.efficiency = None;
    broken.vs_base = None;
    broken.verdict = Verdict::Fail;
    broken.reasons = vec![
        "fail: compile_error: Error building extension 'kg_broken': expected ';' before 'is'"
            .into(),
    ];
    let mut hack = passing("level1/4_GELU/cpp", 1.0);
    hack.problem = "level1/4_GELU".into();
    hack.outcome = OutcomeSummary::new(
        OutcomeKind::Skipped,
        "not run: lint errors block evaluation",
    );
    hack.speedup_eager = None;
    hack.speedup_compile = None;
    hack.time_ms = None;
    hack.efficiency = None;
    hack.vs_base = None;
    hack.findings = vec![Finding {
        file: "kernels/level1/4_GELU/cpp.py".into(),
        line: 14,
        column: 20,
        end_line: 14,
        end_column: 26,
        rule: "KG101".into(),
        severity: Severity::Error,
        message: "`F.gelu` runs a PyTorch compute op on the forward path instead of your kernel"
            .into(),
    }];
    hack.verdict = Verdict::Fail;
    hack.reasons = vec!["fail: 1 lint error(s) (KG101)".into()];
    let mut gpu = passing("level1/3_ReLU/cuda", 1.0);
    gpu.problem = "level1/3_ReLU".into();
    gpu.outcome = OutcomeSummary::new(
        OutcomeKind::Skipped,
        "skipped — needs a GPU: kernels/level1/3_ReLU/cuda.py is a cuda kernel and no GPU was detected on this machine; run the gate on a GPU runner",
    );
    gpu.speedup_eager = None;
    gpu.speedup_compile = None;
    gpu.time_ms = None;
    gpu.efficiency = None;
    gpu.vs_base = None;
    gpu.verdict = Verdict::Skipped;
    let mut r = Report::new(RunInfo {
        hardware: Hardware {
            gpu: "cpu".into(),
            torch: "2.11.0+cpu".into(),
            ..Hardware::default()
        },
        ..run()
    });
    r.kernels = vec![relu, sigmoid, broken, hack, gpu];
    // Timed on this machine's CPU, or not timed at all.
    for k in &mut r.kernels {
        k.timed_on = k.time_ms.map(|_| TimedOn::Cpu);
        k.device = k.time_ms.map(|_| "AMD EPYC 9654".to_string());
        // No floor on the host: no efficiency.
        k.efficiency = None;
    }
    r.finalize();
    r
}

#[test]
fn comment_for_a_contributor_counts_agree_messages_once_no_json_honest_device() {
    let r = contributor_view();
    let c = render_comment(&r);
    // Rows that say "skipped" are the rows the header counts as skipped.
    let skipped_rows = c
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("⏭️ skipped"))
        .count();
    assert_eq!(skipped_rows, r.summary.skipped as usize, "{c}");
    assert!(c.contains(&format!("{} skipped", r.summary.skipped)), "{c}");
    assert!(c.contains("⛔ not run"), "{c}");
    // Each failure's message once.
    assert_eq!(c.matches("expected ';' before 'is'\u{2019}").count(), 0);
    let details = &c[c.find("<details>").unwrap()..];
    assert_eq!(
        details.matches("Error building extension").count(),
        1,
        "{details}"
    );
    assert!(c.contains("needs a GPU"), "the skip says why: {c}");
    assert!(!c.contains("```json"), "no raw JSON: {c}");
    assert!(c.contains("**device:** CPU (no GPU)"), "{c}");
    assert!(!c.contains("**GPU:** cpu"), "{c}");
    assert!(
        c.contains("fast_p: the fraction of evaluated kernels"),
        "{c}"
    );
    // Two timed kernels read at a glance from the table: no chart.
    assert!(!c.contains("```mermaid"), "{c}");
    insta::assert_snapshot!(c);
}

#[test]
fn every_failing_row_gets_an_annotation_on_its_own_relative_path() {
    let mut r = contributor_view();
    // A runtime finding that names the runner's absolute path still lands on the row's file.
    r.kernels[2].findings.push(Finding {
        file: "/home/runner/work/kernels/kernels/level1/7_Softmax/cpp.py".into(),
        line: 0,
        column: 0,
        end_line: 0,
        end_column: 0,
        rule: "eval/stray-process".into(),
        severity: Severity::Error,
        message: "stray".into(),
    });
    let annotations = check_run::annotations(&r);
    for row in r.kernels.iter().filter(|k| k.verdict == Verdict::Fail) {
        assert!(
            annotations
                .iter()
                .any(|a| a.path == row.path && a.annotation_level == "failure"),
            "{} has no failure annotation: {annotations:#?}",
            row.path
        );
    }
    assert!(
        annotations.iter().all(|a| !a.path.starts_with('/')),
        "{annotations:#?}"
    );
    assert!(
        !annotations
            .iter()
            .any(|a| a.path == "kernels/level1/3_ReLU/cuda.py"),
        "a skipped row is not a failure"
    );
}

#[test]
fn chart_labels_are_unique_even_when_the_last_two_components_collide() {
    let mut a = passing("x/level1/3_ReLU/cpp", 1.5);
    a.path = "kernels/a/level1/3_ReLU/cpp.py".into();
    let mut b = passing("y/level1/3_ReLU/cpp", 1.6);
    b.path = "kernels/b/level1/3_ReLU/cpp.py".into();
    // A chart appears only for a device with more than ten timed kernels.
    let mut rows = vec![a, b];
    rows.extend((0..10).map(|i| passing(&format!("z/{i}"), 1.2)));
    let c = render_comment(&report(rows));
    assert!(
        c.contains("x-axis [\"a/level1/3_ReLU/cpp\", \"b/level1/3_ReLU/cpp\", "),
        "{c}"
    );
}

#[test]
fn a_base_already_slower_than_its_history_is_said_and_problems_link_the_dashboard() {
    let mut r = Report::new(run());
    r.run.dashboard_url = Some("https://acme.github.io/kernels/".into());
    let mut row = passing("19_ReLU", 1.5);
    row.history = Some(HistoryContext {
        level_ms: 0.02,
        commits: 5,
        base_ms: Some(0.025),
        base_vs_history_pct: Some(25.0),
    });
    let mut quiet = passing("20_x", 1.5);
    quiet.history = Some(HistoryContext {
        level_ms: 0.02,
        commits: 5,
        base_ms: Some(0.0203),
        base_vs_history_pct: Some(1.5),
    });
    r.kernels = vec![row, quiet];
    r.finalize();
    let c = render_comment(&r);
    assert_eq!(c.matches("slower than main's history").count(), 1, "{c}");
    assert!(c.contains("already 25.0% slower"), "{c}");
    assert!(
        c.contains("(https://acme.github.io/kernels/#level1-19_ReLU)"),
        "{c}"
    );
    // Only an https dashboard is linked.
    r.run.dashboard_url = Some("javascript:alert(1)".into());
    assert!(!render_comment(&r).contains("javascript:"));
}

/// The header names the judged commit (linked) and the workflow run; each failing row gives the
/// one command that reproduces it locally (issue 31). Text from the report stays inert: a head
/// that is no commit SHA gets no line, a path with shell characters is quoted.
#[test]
fn the_header_links_the_commit_and_failing_rows_say_how_to_reproduce() {
    let mut bad = passing("23_Softmax", 3.0);
    bad.outcome = OutcomeSummary::new(OutcomeKind::Incorrect, "max abs diff 0.31");
    bad.seed = Some(99);
    bad.problem = "level1/23_Softmax".into();
    let mut linted = passing("19_ReLU", 1.0);
    linted.path = "kernels/my kernel's relu.py".into();
    linted.outcome = OutcomeSummary::new(OutcomeKind::NotRun, "not run: lint errors");
    linted.findings.push(Finding {
        file: "kernels/my kernel's relu.py".into(),
        line: 4,
        column: 1,
        end_line: 4,
        end_column: 9,
        rule: "KG101".into(),
        severity: Severity::Error,
        message: "torch op in forward".into(),
    });
    bad.verdict = Verdict::Fail;
    linted.verdict = Verdict::Fail;
    let mut r = report(vec![bad, linted, passing("1_Square_matmul", 1.1)]);
    r.run.head_sha = "0123456789abcdef0123456789abcdef01234567".into();
    r.run.artifact_url = Some("https://github.com/acme/kernels/actions/runs/9".into());
    let c = render_comment(&r);
    assert!(
        c.contains("Commit [`0123456`](https://github.com/acme/kernels/commit/0123456789abcdef0123456789abcdef01234567) · [workflow run](https://github.com/acme/kernels/actions/runs/9)"),
        "{c}"
    );
    assert!(
        c.contains("- reproduce: `kernelgate eval --kernel kernels/23_Softmax.py --problem level1/23_Softmax --seed 99`"),
        "{c}"
    );
    assert!(
        c.contains("- reproduce: `kernelgate lint 'kernels/my kernel'\\''s relu.py'`"),
        "{c}"
    );
    // Passing rows need no command.
    assert_eq!(c.matches("- reproduce:").count(), 2, "{c}");
    // A forged head gives no commit line and no link; the run details show it as inert text.
    r.run.head_sha = "0123456)](https://evil.example/x".into();
    let c = render_comment(&r);
    assert!(!c.contains("\nCommit "), "{c}");
    assert!(
        !c.contains("(https://evil.example") && !c.contains("/blob/0123456)"),
        "{c}"
    );
    // A local run: the short SHA, no links.
    r.run.repo.clear();
    r.run.head_sha = "0123456789abcdef0123456789abcdef01234567".into();
    r.run.artifact_url = None;
    assert!(render_comment(&r).contains("\nCommit `0123456`\n"));
}

/// GPU rows, host-timed CPU rows and a row stopped before its timing, in one pull request.
fn mixed_devices() -> Report {
    let gpu_fast = passing("level1/3_ReLU/cuda", 1.8);
    let mut gpu_slow = passing("level1/7_Softmax/cuda", 0.6);
    gpu_slow.vs_base = Some(ComparisonSummary {
        ratio: 1.25,
        ci_lo: Some(1.2),
        ci_hi: Some(1.3),
        verdict: ComparisonVerdict::Slower,
        against: None,
    });
    let mut cpu = passing("level1/3_ReLU/cpp", 1.3);
    cpu.backend = Backend::Cpp;
    cpu.device = Some("AMD EPYC 9654".into());
    cpu.timed_on = Some(TimedOn::Cpu);
    // No floor on the host: no efficiency.
    cpu.efficiency = None;
    cpu.speedup_compile = None;
    cpu.compiled_ms = None;
    // A timing warning of the run: no line, not the linter's.
    cpu.findings.push(Finding::runtime(
        "kernels/level1/3_ReLU/cpp.py",
        "timing/reference-slower-interleaved",
        Severity::Warning,
        "the reference ran 1.2x slower between the candidate's calls",
    ));
    let mut lint = passing("level1/4_GELU/cuda", 1.0);
    lint.outcome = OutcomeSummary::new(OutcomeKind::NotRun, "lint error");
    lint.verdict = Verdict::Fail;
    lint.time_ms = None;
    lint.efficiency = None;
    lint.reference_ms = None;
    lint.speedup_eager = None;
    lint.speedup_compile = None;
    lint.vs_base = None;
    lint.timed_on = None;
    lint.device = None;
    lint.findings.push(Finding {
        file: "kernels/level1/4_GELU/cuda.py".into(),
        line: 3,
        column: 1,
        end_line: 3,
        end_column: 10,
        rule: "KG101".into(),
        severity: Severity::Error,
        message: "hard-coded output".into(),
    });
    report(vec![cpu, gpu_slow, lint, gpu_fast])
}

#[test]
fn comment_mixed_cpu_and_gpu_rows() {
    let c = render_comment(&mixed_devices());
    // Failures first (the row the lint stopped), then the GPU, then the host timings with
    // their noise; one direction everywhere (0.80x against the base, not +25%).
    let at = |needle: &str| {
        c.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in\n{c}"))
    };
    assert!(at("#### Not timed") < at("#### GPU · NVIDIA H200"), "{c}");
    assert!(
        at("#### GPU · NVIDIA H200") < at("#### CPU · host timings on AMD EPYC 9654"),
        "{c}"
    );
    assert!(c.contains("Host timings: the CPU is shared"), "{c}");
    // One direction everywhere: the slower row says so in its flag, not as a percentage.
    let slow_row = c
        .lines()
        .find(|l| l.contains("7_Softmax/cuda.py`]"))
        .unwrap();
    assert!(slow_row.contains("🔴 slower than base"), "{slow_row}");
    // One short flag a row: the run's own finding apart from the linter's.
    let cpu_row = c
        .lines()
        .find(|l| l.contains("3_ReLU/cpp.py`]"))
        .unwrap_or_else(|| panic!("no CPU row in\n{c}"));
    assert!(
        cpu_row.contains("warning `timing/reference-slower-interleaved`"),
        "{cpu_row}"
    );
    let lint_row = c.lines().find(|l| l.contains("4_GELU/cuda.py`]")).unwrap();
    assert!(lint_row.contains("not run"), "{lint_row}");
    assert!(!c.contains("+25%"), "{c}");
    // Each device's table: status, kernel, speedup, efficiency where the device has one, flag.
    let cpu_table = &c[at("#### CPU")..];
    let cpu_header = cpu_table.lines().find(|l| l.starts_with("| |")).unwrap();
    assert_eq!(cpu_header, "| | Kernel | Speedup | Flag |", "{c}");
    let gpu_table = &c[at("#### GPU")..at("#### CPU")];
    let gpu_header = gpu_table.lines().find(|l| l.starts_with("| |")).unwrap();
    assert_eq!(
        gpu_header, "| | Kernel | Speedup | Efficiency | Flag |",
        "{c}"
    );
    let relu_row = gpu_table
        .lines()
        .find(|l| l.contains("3_ReLU/cuda.py`]"))
        .unwrap_or_else(|| panic!("no GPU ReLU row in\n{gpu_table}"));
    assert!(
        relu_row.contains("| 72% of memory bandwidth |"),
        "{relu_row}"
    );
    // A geomean per device, none mixing GPU and host timings.
    assert!(
        c.contains("#### GPU · NVIDIA H200 · geomean 1.04× over 2 correct kernel(s)"),
        "{c}"
    );
    assert!(
        c.contains(
            "#### CPU · host timings on AMD EPYC 9654 · geomean 1.30× over 1 correct kernel(s)"
        ),
        "{c}"
    );
    assert!(!c.contains("**geomean speedup**"), "{c}");
    // Only the failing row has details; a few tables need no chart.
    assert_eq!(c.matches("<details><summary>").count(), 2, "{c}");
    assert_eq!(c.matches("```mermaid").count(), 0, "{c}");
    insta::assert_snapshot!(c);
}

#[test]
fn comment_for_200_kernels_charts_the_20_furthest_from_parity() {
    let rows: Vec<KernelRow> = (0..200)
        .map(|i| passing(&format!("level1/{i}_K/cuda"), 0.5 + i as f64 * 0.01))
        .collect();
    let c = render_comment(&report(rows));
    assert!(c.len() <= 65_536);
    let chart = &c[c.find("```mermaid").unwrap()..];
    let chart = &chart[..chart[3..].find("```").unwrap() + 6];
    // Of the rows the comment's length leaves in it.
    assert!(
        chart.contains("the 20 of ") && chart.contains(" furthest from parity"),
        "{chart}"
    );
    let bars = chart
        .lines()
        .find(|l| l.trim_start().starts_with("bar ["))
        .unwrap();
    assert_eq!(bars.matches(',').count(), 19, "{bars}");
    // Furthest from parity: the fastest (2.49x, log2 1.32) is in; the slowest (0.50x, log2
    // -1.00) is nearer parity than the 20 fastest (2.30x and up, log2 1.20) and is left out.
    assert!(bars.contains("1.32") && bars.contains("1.20"), "{bars}");
    assert!(!bars.contains("-1.00"), "{bars}");
    insta::assert_snapshot!(c);
}

/// The comment as a GFM renderer renders it: tables, autolinks and strikethrough, and every raw
/// HTML tag kept (stricter than GitHub's tag filter: a candidate's tag must never reach it).
fn gfm_html(markdown: &str) -> String {
    let mut options = comrak::Options::default();
    options.extension.table = true;
    options.extension.autolink = true;
    options.extension.strikethrough = true;
    options.render.r#unsafe = true;
    comrak::markdown_to_html(markdown, &options)
}

#[test]
fn candidate_text_stays_inert_when_a_gfm_renderer_renders_the_comment() {
    let evil = "kernels/x|<img src=x onerror=alert(1)>[click](https://evil.example)@octocat`</code>**b**.py";
    let mut row = passing("level1/3_ReLU/cuda", 1.2);
    row.path = evil.into();
    row.verdict = Verdict::Fail;
    row.outcome = OutcomeSummary::new(
        OutcomeKind::RuntimeError,
        "boom </details><script>alert(1)</script> ![x](https://evil.example/i.png) @octocat",
    );
    row.reasons
        .push("fail: <a href=\"https://evil.example\">here</a> | cell".into());
    let plain = passing("level1/5_Sigmoid/cuda", 1.1);
    let c = render_comment(&report(vec![row, plain]));
    let html = gfm_html(&c);
    for bad in [
        "<img",
        "<script",
        "href=\"https://evil.example",
        "src=\"https://evil.example",
        "<strong>b</strong>",
    ] {
        assert!(!html.contains(bad), "{bad} rendered:\n{html}");
    }
    // Both rows stay whole rows of one table: the `|` in the path splits no cell.
    let table = &html[html.find("<table>").unwrap()..html.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count(), 3, "{table}");
    let header_cells = table[..table.find("</tr>").unwrap()]
        .matches("</th>")
        .count();
    for tr in table.split("<tr>").skip(2) {
        assert_eq!(tr.matches("</td>").count(), header_cells, "{tr}");
    }
    // The details the comment opens are closed again: the candidate's `</details>` closed none.
    assert_eq!(
        html.matches("<details").count(),
        html.matches("</details>").count(),
        "{html}"
    );
}

#[test]
fn comment_of_a_forks_unverified_run() {
    // What kernelgate-publish.yml posts for a fork's own workflow run: the table, under a note
    // that it is no verdict (the check says neutral, never success).
    let note = "unverified: this run is the fork's own workflow; a maintainer can run /kernelgate";
    let c = render_unverified_comment(&all_passing(), note);
    let head = c.find("## ").unwrap();
    let at_note = c.find(&format!("> [!NOTE]\n> {note}")).expect("the note");
    assert!(head < at_note && at_note < c.find("| |").unwrap(), "{c}");
    assert_eq!(
        c.replace(&format!("> [!NOTE]\n> {note}\n\n"), ""),
        render_comment(&all_passing())
    );
    insta::assert_snapshot!(c);
}

#[test]
fn a_kernel_brought_in_by_its_sources_says_which_and_a_cu_finding_names_its_file() {
    let mut row = passing("19_ReLU", 1.8);
    // Only a row that did not pass has details.
    row.verdict = Verdict::Warn;
    row.change = Change::SourcesChanged;
    row.changed_sources = vec!["csrc/relu.cu".into(), "include/common.cuh".into()];
    row.unresolved_sources = vec!["kernels/19_ReLU.py:7: the path in `load(sources=...)` (`[pick()]`) is not known statically, so any change under `kernels/` re-evaluates this kernel; help: build it from a literal or `__file__`".into()];
    row.findings.push(Finding {
        file: "csrc/relu.cu".into(),
        line: 13,
        column: 5,
        end_line: 13,
        end_column: 19,
        rule: "KG602".into(),
        severity: Severity::Warning,
        message: "`cublasSscal` calls a vendor library".into(),
    });
    let comment = render_comment(&report(vec![row.clone()]));
    assert!(
        comment.contains("sources changed")
            && comment.contains("via `csrc/relu.cu`, `include/common.cuh`"),
        "{comment}"
    );
    assert!(
        comment.contains("sources: kernels/19\\_ReLU.py:7"),
        "{comment}"
    );
    // The finding names the .cu file and links its line.
    assert!(
        comment.contains("`csrc/relu.cu` [L13](https://github.com/acme/kernels/blob/")
            && comment.contains("/csrc/relu.cu#L13)"),
        "{comment}"
    );
    // Four changed files: three shown, the rest counted.
    row.changed_sources = (1..=4).map(|i| format!("csrc/k{i}.cu")).collect();
    let comment = render_comment(&report(vec![row]));
    assert!(comment.contains("`csrc/k3.cu` and 1 more"), "{comment}");
    // The fields round-trip through report.json.
    let json = serde_json::to_string(&report(vec![passing("1_A", 1.0)])).unwrap();
    assert!(
        !json.contains("changed_sources"),
        "absent when empty: {json}"
    );
}

/// Issue 50: a passing PR's comment reads in ten seconds: under 25 lines, one compact table, no
/// details blocks, no chart.
#[test]
fn a_passing_multi_kernel_comment_is_under_25_lines() {
    let r = report(vec![
        passing("19_ReLU", 1.8),
        passing("23_Softmax", 2.4),
        passing("1_Square_matmul", 1.1),
        passing("4_GELU", 1.3),
        passing("5_Sigmoid", 1.6),
    ]);
    assert_eq!(r.summary.verdict, Verdict::Pass);
    let c = render_comment(&r);
    assert!(c.starts_with(STICKY_MARKER));
    let lines = c.lines().count();
    assert!(lines < 25, "{lines} lines:\n{c}");
    assert_eq!(c.matches("<details>").count(), 1, "only the run's: {c}");
    assert!(!c.contains("```mermaid"), "{c}");
    assert!(
        c.contains("| | Kernel | Speedup | Efficiency |\n|---|---|--:|---|\n"),
        "{c}"
    );
}

/// Issue 50: rows are grouped by the row's device, each GPU model apart, each with its geomean.
#[test]
fn each_gpu_model_gets_its_own_table_and_geomean() {
    let mut h100 = passing("4_GELU", 2.0);
    h100.device = Some("NVIDIA H100".into());
    let c = render_comment(&report(vec![passing("19_ReLU", 1.8), h100]));
    assert!(
        c.contains("#### GPU · NVIDIA H200 · geomean 1.80× over 1 correct kernel(s)"),
        "{c}"
    );
    assert!(
        c.contains("#### GPU · NVIDIA H100 · geomean 2.00× over 1 correct kernel(s)"),
        "{c}"
    );
}

/// The README's example comment is the comment of the real run it names, rendered by this
/// build: `<!-- kernelgate-comment: REPORT -->`, the comment quoted, `<!-- /kernelgate-comment -->`.
/// A change to the comment's layout fails here until the README is regenerated:
/// `KERNELGATE_BLESS=1 cargo test -p kernelgate-report --test render readme`.
#[test]
fn the_readmes_example_is_the_comment_of_the_real_run_it_names() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme_path = root.join("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let (open, close) = ("<!-- kernelgate-comment: ", "<!-- /kernelgate-comment -->");
    let start = readme
        .find(open)
        .expect("the README's example comment marker");
    let line_end = start + readme[start..].find('\n').unwrap();
    let report_path = readme[start + open.len()..line_end]
        .trim()
        .trim_end_matches("-->")
        .trim();
    let end = line_end + readme[line_end..].find(close).expect("its closing marker");
    let report = Report::read(&root.join(report_path)).unwrap();
    let comment = render_comment(&report);
    let body = comment
        .strip_prefix(STICKY_MARKER)
        .unwrap()
        .trim()
        .lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_string()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let expected = format!("{}\n{body}\n", &readme[..line_end]);
    if std::env::var_os("KERNELGATE_BLESS").is_some() {
        std::fs::write(&readme_path, format!("{expected}{}", &readme[end..])).unwrap();
        return;
    }
    assert_eq!(
        &readme[..end],
        expected,
        "the README's example is not this build's comment of {report_path}: regenerate it with \
         KERNELGATE_BLESS=1 cargo test -p kernelgate-report --test render readme"
    );
}

//! A pull request cannot loosen its own judgment: the config that judges it comes from the base
//! commit (or the trusted file a workflow passes), never from its head. Real git repositories in
//! temp dirs, the real CLI, real child processes and real torch on the CPU.
//!
//! The head of [`loosening_repo`] switches the sandbox off, empties `fail_on`, points the
//! harness at another Python and empties the kernel globs, and adds a kernel that returns zeros
//! and one that reads a file outside its job. Judged by the base, both still fail, sandboxed.
//! tests/it/workflows/trusted.rs runs the same repository through the workflows' own steps.

use crate::common::{git, kernelgate_in, output_text, root, write};

use kernelgate_report::{ConfigApplies, ConfigSource, OutcomeKind, Report, Verdict};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// The base's config: small enough for a CPU run of seconds.
pub(crate) const BASE_CONFIG: &str = "[harness]\ntrials = 2\n";

/// What the pull request writes into its own kernelgate.toml.
pub(crate) const LOOSENED_CONFIG: &str = r#"[harness]
trials = 2
python = "/nonexistent/kg-python"

[sandbox]
enabled = false

[policy]
fail_on = []

[kernels]
globs = []
"#;

/// One C++ extension (compiled once, cached under target/) writing zeros: a ReLU that is wrong.
fn extension() -> &'static str {
    r#"from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor zeros_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "contiguous float32 expected");
    torch::Tensor out = torch::empty_like(x);
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        o[i] = 0.0f;
    }
    return out;
}
"""

kg_zeros = load_inline(
    name="kg_judgment_zeros",
    cpp_sources=cpp_source,
    functions=["zeros_forward"],
    extra_cflags=["-O1"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kg_zeros.zeros_forward(x)
"#
}

/// Returns zeros for ReLU.
pub(crate) fn zeros_kernel() -> String {
    format!(
        "\"\"\"A ReLU that returns zeros.\"\"\"\nimport torch\nimport torch.nn as nn\n{}",
        extension()
    )
}

/// Reads `secret` (outside its job) at import, then returns zeros.
pub(crate) fn escape_kernel(secret: &Path) -> String {
    format!(
        "\"\"\"Reads a file outside its job at import.\"\"\"\nimport torch\nimport torch.nn as nn\n\nwith open({:?}) as f:\n    print(\"STOLEN\", f.read())\n\n{}",
        secret.display().to_string(),
        extension()
    )
}

pub(crate) const SECRET: &str = "runner-secret-8086";
pub(crate) const ZEROS: &str = "kernels/level1/3_ReLU/zeros.py";
pub(crate) const ESCAPE: &str = "kernels/level1/3_ReLU/escape.py";

/// A repository in `d`: `main` holds the ReLU problem (16 x 4096) and [`BASE_CONFIG`]; the
/// branch `fork` loosens the config ([`LOOSENED_CONFIG`]) and adds the zeros kernel and the one
/// that reads `secret`. Returns (base, head); `fork` is checked out.
pub(crate) fn loosening_repo(d: &Path, secret: &Path) -> (String, String) {
    git(d, &["init", "-q", "-b", "main"]);
    let src = std::fs::read_to_string(root().join("KernelBench/level1/3_ReLU.py")).unwrap();
    assert!(src.contains("batch_size = 4096"), "update this test");
    write(
        d,
        "KernelBench/level1/3_ReLU.py",
        &src.replace("batch_size = 4096", "batch_size = 16"),
    );
    write(d, "kernelgate.toml", BASE_CONFIG);
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base"]);
    let base = git(d, &["rev-parse", "HEAD"]);
    git(d, &["checkout", "-q", "-b", "fork"]);
    write(d, "kernelgate.toml", LOOSENED_CONFIG);
    write(d, ZEROS, &zeros_kernel());
    write(d, ESCAPE, &escape_kernel(secret));
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "loosen the gate"]);
    let head = git(d, &["rev-parse", "HEAD"]);
    (base, head)
}

/// The report of a run that was asked to loosen its judgment and was not: both kernels fail,
/// sandboxed, the secret stayed out, and the head's changes are reported as applying after merge.
pub(crate) fn assert_judged_by_the_trusted_side(report_dir: &Path, judged_with: &ConfigSource) {
    let report = Report::read(&report_dir.join("report.json")).unwrap();
    let rows: Vec<(&str, Verdict, OutcomeKind)> = report
        .kernels
        .iter()
        .map(|k| (k.path.as_str(), k.verdict, k.outcome.kind))
        .collect();
    assert_eq!(
        rows,
        [
            (ESCAPE, Verdict::Fail, OutcomeKind::CompileError),
            (ZEROS, Verdict::Fail, OutcomeKind::Incorrect),
        ],
        "{:#?}",
        report.kernels
    );
    assert_eq!(report.summary.verdict, Verdict::Fail);
    assert!(report.policy.fail_on.iter().any(|c| c == "incorrect"));
    // Sandboxed: the PR's `enabled = false` is not the runner's to take.
    assert!(!report.run.sandbox.is_empty(), "{:?}", report.run);
    for level in &report.run.sandbox {
        assert_ne!(level.to_string(), "off", "{:?}", report.run.sandbox);
    }
    for k in &report.kernels {
        assert_ne!(
            k.outcome.details["sandbox"].as_str(),
            Some("off"),
            "{}",
            k.path
        );
    }
    let escape = &report.kernels[0];
    assert!(
        escape
            .findings
            .iter()
            .any(|f| f.rule == "eval/sandbox-denied"),
        "{:#?}",
        escape.findings
    );
    let comment = std::fs::read_to_string(report_dir.join("comment.md")).unwrap();
    let json = std::fs::read_to_string(report_dir.join("report.json")).unwrap();
    for text in [&comment, &json] {
        assert!(!text.contains(SECRET) && !text.contains("STOLEN"), "{text}");
    }
    // Where the judgment came from, and the head's changes: they apply after merge.
    assert_eq!(report.run.config.as_ref(), Some(judged_with));
    let changes: Vec<(&str, ConfigApplies, &Value, &Value)> = report
        .config_changes
        .iter()
        .map(|c| (c.key.as_str(), c.applies, &c.base, &c.head))
        .collect();
    let keys: Vec<&str> = changes.iter().map(|c| c.0).collect();
    assert_eq!(
        keys,
        [
            "harness.python",
            "kernels.globs",
            "policy.fail_on",
            "sandbox.enabled"
        ],
        "{changes:#?}"
    );
    let sandbox = changes[3];
    assert_eq!(
        (sandbox.1, sandbox.2, sandbox.3),
        (
            ConfigApplies::AfterMerge,
            &Value::Bool(true),
            &Value::Bool(false)
        )
    );
    assert_eq!(changes[0].3, "/nonexistent/kg-python");
    assert_eq!(changes[1].1, ConfigApplies::ThisRun);
    assert!(
        comment.contains("This PR changes `kernelgate.toml`")
            && comment.contains("| `sandbox.enabled` | `true` | `false` | after merge |"),
        "{comment}"
    );
    assert!(!comment.contains("kernelgate.toml changed"), "{comment}");
}

fn kernelgate(repo: &Path, args: &[&str]) -> Output {
    let mut cmd = kernelgate_in(repo);
    cmd.args(args).env_remove("KERNELGATE_SANDBOX");
    cmd.output().expect("kernelgate runs")
}

/// `kernelgate pr --base main` on the CPU, correctness only, the report written to `out`.
fn pr_against_main(repo: &Path, out: &Path) -> Output {
    kernelgate(
        repo,
        &[
            "pr",
            "--base",
            "main",
            "--publish",
            "files",
            "--device",
            "cpu",
            "--no-timing",
            "--seed",
            "42",
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

#[test]
fn a_pull_request_cannot_loosen_its_own_judgment() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    let (base, _) = loosening_repo(dir.path(), &secret);
    let out = dir.path().join("kg-out");
    let run = pr_against_main(dir.path(), &out);
    assert_eq!(run.status.code(), Some(1), "{}", output_text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("warning: this pull request changes sandbox.enabled in kernelgate.toml (true -> false): it applies after merge"),
        "{stdout}"
    );
    assert_judged_by_the_trusted_side(
        &out,
        &ConfigSource::Base {
            commit: base,
            path: "kernelgate.toml".into(),
        },
    );
}

fn plan(repo: &Path, args: &[&str]) -> Value {
    let mut all = vec!["pr", "--plan", "--base", "main"];
    all.extend_from_slice(args);
    let out = kernelgate(repo, &all);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn change<'a>(plan: &'a Value, key: &str) -> &'a Value {
    plan["config_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == key)
        .unwrap_or_else(|| panic!("no change of {key}: {plan:#}"))
}

#[test]
fn the_judging_config_is_the_trusted_files_else_the_bases_else_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let outside = tempfile::tempdir().unwrap();
    let (base, head) = loosening_repo(d, &outside.path().join("secret.txt"));

    // The base's config judges; the head cannot hide a kernel by emptying the globs.
    let p = plan(d, &[]);
    assert_eq!(
        p["config"],
        serde_json::json!({"from": "base", "commit": base, "path": "kernelgate.toml"})
    );
    assert_eq!(p["jobs"].as_array().unwrap().len(), 2, "{p:#}");
    assert_eq!(change(&p, "policy.fail_on")["applies"], "after_merge");

    // A trusted file (the default branch's, checked out apart) wins over the base commit's.
    let trusted = outside.path().join("kernelgate.toml");
    std::fs::write(&trusted, "[sandbox]\nrequired = true\n").unwrap();
    let p = plan(d, &["--trusted-config", trusted.to_str().unwrap()]);
    assert_eq!(p["config"]["from"], "trusted", "{p:#}");
    assert_eq!(p["config"]["path"], trusted.to_str().unwrap());
    // The values shown are the trusted file's; only the PR's own changes are listed (it left
    // `required` and `trials` as its base had them).
    assert_eq!(change(&p, "sandbox.enabled")["base"], true);
    assert_eq!(change(&p, "sandbox.enabled")["head"], false);
    let keys: Vec<&str> = p["config_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert!(
        !keys.contains(&"sandbox.required") && !keys.contains(&"harness.trials"),
        "{keys:?}"
    );

    // The pull request's own file is not trusted, whatever the flag says.
    let own = kernelgate(
        d,
        &[
            "pr",
            "--plan",
            "--base",
            "main",
            "--trusted-config",
            d.join("kernelgate.toml").to_str().unwrap(),
        ],
    );
    assert_eq!(own.status.code(), Some(2), "{}", output_text(&own));
    let err = String::from_utf8_lossy(&own.stderr);
    assert!(
        err.contains("is the pull request's own file") && err.contains("help: "),
        "{err}"
    );
    let missing = kernelgate(
        d,
        &[
            "pr",
            "--plan",
            "--trusted-config",
            outside.path().join("nope.toml").to_str().unwrap(),
        ],
    );
    assert_eq!(missing.status.code(), Some(2), "{}", output_text(&missing));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("cannot read the trusted config"),
        "{}",
        output_text(&missing)
    );

    // A head whose config does not parse stops the run (its [kernels] would find the kernels).
    write(d, "kernelgate.toml", "[sandbox]\nenabeld = false\n");
    git(d, &["commit", "-qam", "typo"]);
    let out = kernelgate(d, &["pr", "--plan", "--base", "main"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(":kernelgate.toml:2:1: unknown field `enabeld`") && err.contains("help: "),
        "{err}"
    );
    assert_ne!(git(d, &["rev-parse", "HEAD"]), head);
}

#[test]
fn the_first_pull_request_to_add_a_config_is_judged_by_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    write(d, "KernelBench/level1/3_ReLU.py", "# a problem\n");
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base"]);
    let base = git(d, &["rev-parse", "HEAD"]);
    git(d, &["checkout", "-q", "-b", "fork"]);
    write(d, "kernelgate.toml", LOOSENED_CONFIG);
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "add a loose config"]);
    let p = plan(d, &[]);
    assert_eq!(
        p["config"],
        serde_json::json!({"from": "defaults", "commit": base, "path": "kernelgate.toml"})
    );
    assert_eq!(change(&p, "sandbox.enabled")["base"], true);
    assert_eq!(change(&p, "sandbox.enabled")["head"], false);
    assert_eq!(change(&p, "harness.trials")["base"], 5);
    assert_eq!(change(&p, "harness.trials")["head"], 2);
}

/// The reference is the judge's, not the pull request's: a pull request that rewrites its
/// problem to return zeros and adds a kernel that returns zeros is judged by the merge base's
/// ReLU (incorrect), and the change is reported for review. A problem the pull request adds
/// has no trusted version: its own judges its kernel.
#[test]
fn a_pull_request_is_judged_by_the_bases_reference_problem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    loosening_repo(d, &secret);
    git(d, &["checkout", "-q", "-b", "rewrite", "main"]);
    let problem = "KernelBench/level1/3_ReLU.py";
    let src = std::fs::read_to_string(d.join(problem)).unwrap();
    assert!(src.contains("return torch.relu(x)"), "update this test");
    write(
        d,
        problem,
        &src.replace("return torch.relu(x)", "return torch.zeros_like(x)"),
    );
    write(d, ZEROS, &zeros_kernel());
    // A new problem whose reference returns zeros, with the same kernel.
    write(
        d,
        "KernelBench/level1/900_Zeros.py",
        &src.replace("return torch.relu(x)", "return torch.zeros_like(x)"),
    );
    write(d, "kernels/level1/900_Zeros/zeros.py", &zeros_kernel());
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "a reference that returns zeros"]);
    let out = d.join("kg-out");
    let run = pr_against_main(d, &out);
    assert_eq!(run.status.code(), Some(1), "{}", output_text(&run));
    let report = Report::read(&out.join("report.json")).unwrap();
    let rows: Vec<(&str, OutcomeKind)> = report
        .kernels
        .iter()
        .map(|k| (k.path.as_str(), k.outcome.kind))
        .collect();
    assert_eq!(
        rows,
        [
            (ZEROS, OutcomeKind::Incorrect),
            ("kernels/level1/900_Zeros/zeros.py", OutcomeKind::Correct),
        ],
        "{:#?}",
        report.kernels
    );
    let changed: Vec<&str> = report
        .reference_changes
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(changed, [problem]);
    let comment = std::fs::read_to_string(out.join("comment.md")).unwrap();
    assert!(
        comment.contains("This run judged the kernels by the base branch's version"),
        "{comment}"
    );
}

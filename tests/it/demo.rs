//! The README's main command, end to end on the CPU: `scripts/demo.sh` builds the demo kernel
//! repository, runs the real `kernelgate pr` (real git, real child processes, real torch) and
//! writes the report. The verdicts of the four kernels the demo's head commit brings are asserted.
//!
//! Needs the harness extension next to the test's kernelgate binary (`cargo build --workspace`,
//! which `scripts/test.sh` runs first) and a Python with torch (`scripts/setup-python.sh`).
//! A few minutes on two cores: every kernel is compiled by torch.

use crate::common::{root, test_build_store, test_extensions_dir};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("KERNELGATE_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = root().join(".venv/bin/python");
    assert!(
        venv.is_file(),
        "no Python with torch: run `bash scripts/setup-python.sh` or set KERNELGATE_PYTHON"
    );
    venv
}

fn row<'a>(report: &'a Value, path: &str) -> &'a Value {
    report["kernels"]
        .as_array()
        .expect("report.kernels is a list")
        .iter()
        .find(|k| k["path"] == path)
        .unwrap_or_else(|| panic!("no row for {path} in report.json: {:#}", report["kernels"]))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn demo_gates_the_head_commit_on_cpu() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"));
    let harness = bin.with_file_name("libkernelgate_harness.so");
    assert!(
        harness.is_file() || std::env::var_os("KERNELGATE_HARNESS").is_some(),
        "{} is missing: build it with `cargo build -p kernelgate-harness` (scripts/test.sh does)",
        harness.display()
    );
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("bash")
        .arg(root().join("scripts/demo.sh"))
        .env("KERNELGATE_BIN", &bin)
        .env("KERNELGATE_PYTHON", python())
        .env("KG_DEMO_OUT", out.path())
        .env("KG_DEMO_DEVICE", "cpu")
        // The suite's extensions cache (keyed by kernel source): the wheel test's demo
        // (scripts/test-wheel.sh) loads these builds instead of compiling them again.
        .env("TORCH_EXTENSIONS_DIR", test_extensions_dir())
        // The suite's build store: `pr` keeps its builds there, the wheel test's demo loads them.
        .env("KERNELGATE_BUILD_STORE", test_build_store())
        .output()
        .expect("run scripts/demo.sh");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "scripts/demo.sh failed ({}):\n{stdout}\n{stderr}",
        run.status
    );

    let report_dir = out.path().join("report");
    // The demo tells the user where everything is.
    for file in [
        "comment.md",
        "summary.md",
        "results.sarif",
        "report.json",
        "check_run.json",
        "comment.json",
    ] {
        let path = report_dir.join(file);
        assert!(path.is_file(), "{} was not written", path.display());
        assert!(
            stdout.contains(&path.display().to_string()),
            "demo output does not name {file}:\n{stdout}"
        );
    }

    let report: Value = serde_json::from_str(&read(&report_dir.join("report.json"))).unwrap();
    assert_eq!(
        report["run"]["complete"], true,
        "the run did not finish: {report:#}"
    );

    // Improved: correct, and faster than its base version.
    let relu = row(&report, "kernels/level1/3_ReLU/cpp.py");
    assert_eq!(relu["outcome"]["kind"], "correct", "{relu:#}");
    assert_eq!(relu["vs_base"]["verdict"], "faster", "{relu:#}");
    assert_ne!(relu["verdict"], "fail", "{relu:#}");

    // Regression: correct, but significantly slower than its base version, which fails the PR.
    let softmax = row(&report, "kernels/level1/7_Softmax/cpp.py");
    assert_eq!(softmax["outcome"]["kind"], "correct", "{softmax:#}");
    assert_eq!(softmax["vs_base"]["verdict"], "slower", "{softmax:#}");
    assert_eq!(softmax["verdict"], "fail", "{softmax:#}");

    // Broken: wrong results.
    let sigmoid = row(&report, "kernels/level1/5_Sigmoid/cpp.py");
    assert_eq!(sigmoid["outcome"]["kind"], "incorrect", "{sigmoid:#}");
    assert_eq!(sigmoid["verdict"], "fail", "{sigmoid:#}");

    // Reward hack: a try/except fallback to torch.matmul, caught statically with an error.
    let hack = row(&report, "kernels/level1/1_Square_matmul/cpp.py");
    assert_eq!(hack["verdict"], "fail", "{hack:#}");
    let errors: Vec<&Value> = hack["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    assert!(!errors.is_empty(), "the hack has no lint error: {hack:#}");

    assert_eq!(report["summary"]["verdict"], "fail");
    assert_eq!(report["summary"]["failed"], 3, "{:#}", report["summary"]);

    // The renderings carry the same story.
    let comment = read(&report_dir.join("comment.md"));
    for name in [
        "level1/3_ReLU",
        "level1/7_Softmax",
        "level1/5_Sigmoid",
        "level1/1_Square_matmul",
    ] {
        assert!(
            comment.contains(name),
            "comment.md does not mention {name}:\n{comment}"
        );
    }
    // The check run fails and annotates the hack's lines.
    let check: Value = serde_json::from_str(&read(&report_dir.join("check_run.json"))).unwrap();
    let complete = check["complete"].as_array().expect("complete payloads");
    assert_eq!(
        complete.last().unwrap()["conclusion"],
        "failure",
        "{check:#}"
    );
    let annotated: Vec<&Value> = complete
        .iter()
        .flat_map(|c| c["output"]["annotations"].as_array().into_iter().flatten())
        .filter(|a| a["path"] == "kernels/level1/1_Square_matmul/cpp.py")
        .collect();
    assert!(
        !annotated.is_empty(),
        "no annotation on the hack: {check:#}"
    );
    let sarif: Value = serde_json::from_str(&read(&report_dir.join("results.sarif"))).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let locations = sarif.to_string();
    assert!(
        locations.contains("kernels/level1/1_Square_matmul/cpp.py"),
        "the hack's findings are not in results.sarif"
    );
}

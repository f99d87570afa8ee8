//! What a maintainer meets (issue #19): bad input costs one row, messages say what to do.
//! Real git repositories in temp dirs, the real binary.

use crate::common::{git, kernelgate_in, output_text, root, write};

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn kernelgate(repo: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = kernelgate_in(repo);
    cmd.args(args).current_dir(repo).envs(env.iter().copied());
    cmd.output().expect("kernelgate runs")
}

fn text(out: &Output) -> String {
    output_text(out)
}

fn row<'a>(report: &'a Value, path: &str) -> &'a Value {
    report["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["path"] == path)
        .unwrap_or_else(|| panic!("no row for {path}: {:#}", report["kernels"]))
}

fn findings(r: &Value) -> Vec<(String, String)> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Declares its backend: its source shows none, and a kernel whose backend nobody can tell is
/// an error before it is linted (docs/config.md).
const PYTORCH_ONLY: &str = "# kernelgate: backend=cuda\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";

/// main: two problems, no kernels. head: a non-UTF-8 kernel, a dangling symlink where a kernel
/// should be, and an ordinary (PyTorch-only) kernel.
fn bad_input_repo() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    for p in ["3_ReLU.py", "4_GELU.py", "5_Sigmoid.py"] {
        let src = std::fs::read_to_string(root().join("KernelBench/level1").join(p)).unwrap();
        write(d, &format!("KernelBench/level1/{p}"), &src);
    }
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base"]);
    let base = git(d, &["rev-parse", "HEAD"]);
    write(d, "kernels/level1/3_ReLU/cpp.py", PYTORCH_ONLY);
    std::fs::write(
        d.join("kernels/level1/3_ReLU/latin1.py"),
        b"import torch\n# caf\xe9 (Latin-1)\nclass ModelNew:\n    pass\n",
    )
    .unwrap();
    std::fs::create_dir_all(d.join("kernels/level1/4_GELU")).unwrap();
    std::os::unix::fs::symlink("gone.py", d.join("kernels/level1/4_GELU/cpp.py")).unwrap();
    write(d, "kernels/level1/5_Sigmoid/cpp.py", PYTORCH_ONLY);
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "head"]);
    (dir, base)
}

#[test]
fn a_non_utf8_or_unreadable_kernel_is_one_kg000_finding_on_its_own_row() {
    let (dir, base) = bad_input_repo();
    let d = dir.path();

    // lint: every file is reported; the bad ones get KG000 with the position and the fix.
    let out = kernelgate(d, &["lint", "--format", "json"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = json.to_string();
    assert!(
        all.contains("not UTF-8 (byte 0xe9 at line 2, column 6)"),
        "{all}"
    );
    assert!(all.contains("save it as UTF-8"), "{all}");
    // (lint's discovery skips symlinks, as the model's does)
    for f in [
        "kernels/level1/3_ReLU/cpp.py",
        "kernels/level1/5_Sigmoid/cpp.py",
    ] {
        assert!(all.contains(f), "{f} not linted: {all}");
    }

    // kernels: the file's own error line, the others listed.
    let out = kernelgate(d, &["kernels"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("kernels/level1/3_ReLU/latin1.py: this file is not UTF-8"),
        "{}",
        text(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("kernels/level1/5_Sigmoid/cpp.py")
            || err.contains("kernels/level1/5_Sigmoid/cpp.py"),
        "{}",
        text(&out)
    );

    // pr: report.json, the comment and the check run are still written; KG000 only on the
    // bad rows, the others judged on their own findings.
    let out_dir = d.join("kg-out");
    let out = kernelgate(
        d,
        &[
            "pr",
            "--base",
            &base,
            "--publish",
            "files",
            "--no-timing",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    for f in ["comment.md", "check_run.json", "summary.md"] {
        assert!(out_dir.join(f).is_file(), "{f} missing: {}", text(&out));
    }
    let latin1 = findings(row(&report, "kernels/level1/3_ReLU/latin1.py"));
    assert_eq!(latin1.len(), 1, "{latin1:?}");
    assert_eq!(latin1[0].0, "KG000");
    assert!(latin1[0].1.contains("not UTF-8"), "{latin1:?}");
    let link = findings(row(&report, "kernels/level1/4_GELU/cpp.py"));
    assert_eq!(link.len(), 1, "{link:?}");
    assert!(link[0].1.contains("cannot read this file"), "{link:?}");
    let ok = findings(row(&report, "kernels/level1/5_Sigmoid/cpp.py"));
    assert!(ok.iter().all(|(rule, _)| rule != "KG000"), "{ok:?}");
    assert!(!ok.is_empty(), "the ordinary kernel was linted: {ok:?}");

    // eval: the candidate's failure with the reason, not a harness error.
    let out = kernelgate(
        d,
        &[
            "eval",
            "--problem",
            "level1/3_ReLU",
            "--kernel",
            "kernels/level1/3_ReLU/latin1.py",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["outcome"]["kind"], "compile_error", "{json:#}");
    let msg = json["outcome"]["message"].as_str().unwrap();
    assert!(
        msg.contains("latin1.py") && msg.contains("not UTF-8") && msg.contains("save it as UTF-8"),
        "{msg}"
    );
}

/// main: the ReLU problem. head: the repository's CUDA and Triton ReLU kernels.
fn gpu_kernels_repo() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    let src = std::fs::read_to_string(root().join("KernelBench/level1/3_ReLU.py")).unwrap();
    write(d, "KernelBench/level1/3_ReLU.py", &src);
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base"]);
    let base = git(d, &["rev-parse", "HEAD"]);
    for k in ["cuda.py", "triton.py"] {
        let src = std::fs::read_to_string(root().join("kernels/level1/3_ReLU").join(k)).unwrap();
        write(d, &format!("kernels/level1/3_ReLU/{k}"), &src);
    }
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "head"]);
    (dir, base)
}

#[test]
fn cuda_and_triton_kernels_without_a_gpu_are_skipped_not_failed() {
    let (dir, base) = gpu_kernels_repo();
    let d = dir.path();
    let out_dir = d.join("kg-out");
    // An empty CUDA_VISIBLE_DEVICES hides every GPU, as on a CPU-only runner.
    let out = kernelgate(
        d,
        &[
            "pr",
            "--base",
            &base,
            "--publish",
            "files",
            "--no-timing",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("CUDA_VISIBLE_DEVICES", "")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    for path in [
        "kernels/level1/3_ReLU/cuda.py",
        "kernels/level1/3_ReLU/triton.py",
    ] {
        let r = row(&report, path);
        assert_eq!(r["verdict"], "skipped", "{r:#}");
        assert_eq!(r["outcome"]["kind"], "skipped", "{r:#}");
        let msg = r["outcome"]["message"].as_str().unwrap();
        assert!(msg.starts_with("skipped — needs a GPU"), "{msg}");
        assert!(msg.contains("no GPU was detected"), "{msg}");
    }
    assert_eq!(report["summary"]["skipped"], 2, "{:#}", report["summary"]);
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["verdict"], "pass");

    // `eval` of the CUDA kernel here: torch finds no CUDA, which is neutral, not a failure.
    let out = kernelgate(
        d,
        &[
            "eval",
            "--kernel",
            "kernels/level1/3_ReLU/cuda.py",
            "--no-timing",
        ],
        &[("CUDA_VISIBLE_DEVICES", "")],
    );
    if !Path::new("/usr/local/cuda/bin/nvcc").exists() && std::env::var_os("CUDA_HOME").is_none() {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("SKIPPED — needs a GPU"), "{stdout}");
        assert!(
            !stdout.contains(d.to_str().unwrap()),
            "absolute path: {stdout}"
        );
    }
    let comment = std::fs::read_to_string(out_dir.join("comment.md")).unwrap();
    assert!(comment.contains("needs a GPU"), "{comment}");
    assert!(
        comment.contains("kernelgate: nothing failed; 2 kernel(s) skipped"),
        "{comment}"
    );
}

/// The `check` object of problem `key` in `problems --check --format json` output.
fn problem_check(rows: &Value, key: &str) -> Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no {key}"))["check"]
        .clone()
}

/// Problems: two good ones, one with a syntax error, one without `Model`, one whose `Model`
/// raises, and a level-4 one that needs `transformers` (absent from the test's Python).
/// A git repository with `files` (path, content) in one commit: the problems `problems --check`
/// reads.
fn committed_repo(files: &[(String, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    for (path, content) in files {
        write(d, path, content);
    }
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "problems"]);
    dir
}

/// The bundled KernelBench problem `level/name`, as a (path, content) pair.
fn bundled_problem(level_name: &str) -> (String, String) {
    let path = format!("KernelBench/{level_name}");
    let src = std::fs::read_to_string(root().join(&path)).unwrap();
    (path, src)
}

fn problems_repo() -> tempfile::TempDir {
    committed_repo(&[
        bundled_problem("level1/3_ReLU.py"),
        bundled_problem("level1/5_Sigmoid.py"),
        ("KernelBench/level1/7_Broken.py".into(),
            "import torch\n\nclass Model(torch.nn.Module)\n    pass\n".into(),
        ),
        ("KernelBench/level1/8_NoModel.py".into(),
            "import torch\n\ndef get_inputs():\n    return [torch.randn(2)]\n\ndef get_init_inputs():\n    return []\n".into(),
        ),
        ("KernelBench/level1/9_Raises.py".into(),
            "import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        raise ValueError(f'bad size {n}')\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return [3]\n".into(),
        ),
        ("KernelBench/level4/1_HF.py".into(),
            "import torch\nfrom transformers import AutoConfig\n\nclass Model(torch.nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n".into(),
        ),
    ])
}

#[test]
fn problems_check_loads_each_problem_and_names_missing_packages() {
    let dir = problems_repo();
    let d = dir.path();

    // The plain listing flags the broken files in a WARNING column, without running them.
    let out = kernelgate(d, &["problems"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().next().unwrap().contains("WARNING"),
        "{stdout}"
    );
    let line = |key: &str| -> String {
        stdout
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key}: {stdout}"))
            .to_string()
    };
    assert!(
        line("level1/7_Broken").contains("syntax error at line 3"),
        "{stdout}"
    );
    assert!(
        line("level1/8_NoModel").contains("no `class Model`"),
        "{stdout}"
    );
    assert!(!line("level1/3_ReLU").contains("error"), "{stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("kernelgate problems --check"),
        "{}",
        text(&out)
    );

    // --check imports each one on the CPU: ok with shapes, or the reason and the fix.
    let out = kernelgate(d, &["problems", "--check", "--format", "json"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = |key: &str| problem_check(&rows, key);
    let relu = check("level1/3_ReLU");
    assert_eq!(relu["ok"], true, "{relu:#}");
    assert!(
        relu["inputs"][0].as_str().unwrap().starts_with("float32["),
        "{relu:#}"
    );
    assert_eq!(check("level1/5_Sigmoid")["ok"], true);
    for (key, want) in [
        ("level1/7_Broken", "syntax error at line 3"),
        ("level1/8_NoModel", "no `class Model`"),
        (
            "level1/9_Raises",
            "Model(*get_init_inputs()): ValueError: bad size 3",
        ),
    ] {
        let c = check(key);
        assert_eq!(c["ok"], false, "{key}: {c:#}");
        assert!(c["error"].as_str().unwrap().contains(want), "{key}: {c:#}");
    }
    let hf = check("level4/1_HF");
    assert_eq!(hf["missing_package"], "transformers", "{hf:#}");
    assert_eq!(hf["install"], "pip install transformers", "{hf:#}");

    // The table says the same, and stderr gives the install command for this interpreter.
    let out = kernelgate(d, &["problems", "--check", "--level", "4"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("missing Python package `transformers`: pip install transformers"),
        "{all}"
    );
    assert!(all.contains("-m pip install transformers"), "{all}");

    // A Python without torch is named, with the variable that picks another.
    let out = kernelgate(
        d,
        &["problems", "--check", "--level", "1"],
        &[("KERNELGATE_PYTHON", "/usr/bin/python3")],
    );
    if out.status.code() == Some(2) {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("/usr/bin/python3 cannot import torch"),
            "{err}"
        );
        assert!(err.contains("KERNELGATE_PYTHON"), "{err}");
    }
}

/// `problems --check` goes through the one child launcher: a problem that hangs costs its own
/// row after `--check-timeout`, one that kills the process its own row, the rest are checked
/// in a fresh process, and problem code never sees the token.
#[test]
fn problems_check_survives_hangs_and_crashes_and_hides_the_token() {
    let body = |init: &str| {
        format!(
            "import os, time\nimport torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\ndef get_inputs():\n    return [torch.randn(2)]\n\ndef get_init_inputs():\n    {init}\n"
        )
    };
    let relu = bundled_problem("level1/3_ReLU.py").1;
    let dir = committed_repo(&[
        (
            "KernelBench/level1/1_Hangs.py".into(),
            body("time.sleep(600)"),
        ),
        ("KernelBench/level1/2_Exits.py".into(), body("os._exit(9)")),
        ("KernelBench/level1/3_ReLU.py".into(), relu.clone()),
        (
            "KernelBench/level1/4_Token.py".into(),
            body("raise ValueError('token=' + os.environ.get('GITHUB_TOKEN', 'absent'))"),
        ),
        ("KernelBench/level1/5_ReLU.py".into(), relu),
    ]);
    let d = dir.path();
    let started = std::time::Instant::now();
    let out = kernelgate(
        d,
        &[
            "problems",
            "--check",
            "--check-timeout",
            "5",
            "--format",
            "json",
        ],
        &[("GITHUB_TOKEN", "ghs_secret_for_the_test")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "the hang was not cut at its limit: {:?}",
        started.elapsed()
    );
    assert!(
        !text(&out).contains("ghs_secret_for_the_test"),
        "{}",
        text(&out)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = |key: &str| problem_check(&rows, key);
    let hangs = check("level1/1_Hangs");
    assert_eq!(hangs["ok"], false, "{hangs:#}");
    assert!(
        hangs["error"].as_str().unwrap().contains("took over 5 s"),
        "{hangs:#}"
    );
    let exits = check("level1/2_Exits");
    assert_eq!(exits["ok"], false, "{exits:#}");
    assert!(
        exits["error"]
            .as_str()
            .unwrap()
            .contains("the Python process ended while loading it"),
        "{exits:#}"
    );
    let token = check("level1/4_Token");
    assert!(
        token["error"].as_str().unwrap().contains("token=absent"),
        "problem code saw the token: {token:#}"
    );
    for key in ["level1/3_ReLU", "level1/5_ReLU"] {
        assert_eq!(check(key)["ok"], true, "{key}: {:#}", check(key));
    }
}

/// `--check-timeout` is each problem's own time: the interpreter's start and torch's import (a
/// few seconds, more on a loaded runner) do not count against the first problem.
#[test]
fn problems_check_timeout_starts_after_torch_is_imported() {
    let dir = committed_repo(&[bundled_problem("level1/3_ReLU.py")]);
    let d = dir.path();
    let out = kernelgate(
        d,
        &[
            "problems",
            "--check",
            "--check-timeout",
            "1",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let relu = problem_check(&rows, "level1/3_ReLU");
    assert_eq!(relu["ok"], true, "{relu:#}");
}

/// Lint errors only warn here, so a kernel that fails at import reaches the harness; its
/// message names its own absolute path, which the comment must not show.
#[test]
fn messages_name_files_relative_to_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    let src = std::fs::read_to_string(root().join("KernelBench/level1/3_ReLU.py")).unwrap();
    write(d, "KernelBench/level1/3_ReLU.py", &src);
    write(
        d,
        "kernelgate.toml",
        "[policy]\nfail_on = [\"compile_error\", \"incorrect\", \"crash\", \"timeout\"]\nwarn_on = [\"lint_error\"]\n",
    );
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base"]);
    let base = git(d, &["rev-parse", "HEAD"]);
    write(
        d,
        "kernels/level1/3_ReLU/boom.py",
        "# kernelgate: backend=cpp\nimport torch\n\nraise RuntimeError('cannot load ' + __file__)\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n",
    );
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "head"]);
    let out_dir = d.join("kg-out");
    let out = kernelgate(
        d,
        &[
            "pr",
            "--base",
            &base,
            "--publish",
            "files",
            "--no-timing",
            "--device",
            "cpu",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let comment = std::fs::read_to_string(out_dir.join("comment.md")).unwrap();
    let report = std::fs::read_to_string(out_dir.join("report.json")).unwrap();
    let root = std::fs::canonicalize(d).unwrap();
    for (name, t) in [("comment.md", &comment), ("report.json", &report)] {
        assert!(
            !t.contains(root.to_str().unwrap()) && !t.contains(d.to_str().unwrap()),
            "{name} names the runner's absolute path:\n{t}"
        );
    }
    assert!(
        comment.contains("cannot load kernels/level1/3\\_ReLU/boom.py"),
        "{comment}"
    );
}

/// One small problem on the CPU; `max_cv` is `[timing] baseline_max_cv_pct`.
fn baseline_repo(max_cv: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    let src = std::fs::read_to_string(root().join("KernelBench/level1/3_ReLU.py"))
        .unwrap()
        .replace("batch_size = 4096", "batch_size = 16");
    write(d, "KernelBench/level1/3_ReLU.py", &src);
    write(
        d,
        "kernelgate.toml",
        &format!("[timing]\nbudget_s = 0.5\nbaseline_max_cv_pct = {max_cv}\n"),
    );
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base"]);
    dir
}

#[test]
fn a_baseline_too_noisy_to_compare_against_is_not_written_and_nothing_claims_it_was() {
    // No real series is this quiet: every sample is refused.
    let dir = baseline_repo("0.0001");
    let d = dir.path();
    let out = kernelgate(d, &["baseline", "--device", "cpu"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("NOT WRITTEN: too noisy (robust CV"), "{all}");
    assert!(all.contains("baseline_max_cv_pct = 0.0001%"), "{all}");
    assert!(all.contains("wrote nothing"), "{all}");
    assert!(!all.contains("\nwrote results"), "{all}");
    assert!(!d.join("results").exists(), "nothing may be written: {all}");

    // A threshold any series meets: written, and said so with the repository-relative folder.
    let dir = baseline_repo("1e12");
    let d = dir.path();
    let out = kernelgate(d, &["baseline", "--device", "cpu"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wrote results/timing/"), "{}", text(&out));
    assert!(d
        .join("results/timing")
        .read_dir()
        .unwrap()
        .next()
        .is_some());
}

#[test]
fn misleading_messages_say_what_is_wrong() {
    let (dir, base) = gpu_kernels_repo();
    let d = dir.path();

    // A typo in --base is a name that does not exist, not a shallow clone.
    let out = kernelgate(d, &["pr", "--base", "mian", "--plan"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`mian` does not exist"), "{err}");
    assert!(
        err.contains("main"),
        "the existing branches are listed: {err}"
    );
    assert!(
        !err.contains("shallow") && !err.contains("fetch-depth"),
        "{err}"
    );

    // In a shallow clone, the shallow clone is named.
    let shallow = tempfile::tempdir().unwrap();
    let url = format!("file://{}", d.display());
    git(
        shallow.path(),
        &["clone", "-q", "--depth", "1", &url, "clone"],
    );
    let clone = shallow.path().join("clone");
    let out = kernelgate(&clone, &["pr", "--base", &base, "--plan"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("shallow") && err.contains("fetch-depth: 0"),
        "{err}"
    );

    // A missing --config file: the OS error once, and what to do.
    let out = kernelgate(d, &["--config", "missing.toml", "problems"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(
        err.contains("missing.toml") && err.contains("help:"),
        "{err}"
    );

    // A Python without torch is named, with the variable that picks another.
    let no_torch = Path::new("/usr/bin/python3");
    let has_torch = Command::new(no_torch)
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if no_torch.exists() && !has_torch {
        let out = kernelgate(
            d,
            &[
                "eval",
                "--problem",
                "level1/3_ReLU",
                "--kernel",
                "kernels/level1/3_ReLU/cuda.py",
                "--format",
                "json",
            ],
            &[("KERNELGATE_PYTHON", "/usr/bin/python3")],
        );
        let json: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        let msg = json["outcome"]["message"].as_str().unwrap();
        assert!(
            msg.contains("/usr/bin/python3 cannot import torch")
                && msg.contains("KERNELGATE_PYTHON"),
            "{msg}"
        );
    }
}

#[test]
fn the_kernelbench_md5_of_a_raw_docstring_problem_is_kernelbenchs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    // md5 from KernelBench's get_code_hash (src/dataset.py), run in Python on this text.
    let src = "import torch\n\n\nclass Model(torch.nn.Module):\n    r\"\"\"Applies ReLU: $y = \\max(0, x)$ # not a comment.\"\"\"\n\n    def forward(self, x):  # the op\n        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(4, 4)]\n\n\ndef get_init_inputs():\n    return []\n";
    write(d, "KernelBench/level1/1_Raw.py", src);
    let out = kernelgate(d, &["problems", "--format", "json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rows[0]["md5"], "3878c086e597329e52518309ffaab937",
        "{rows:#}"
    );
}

#[test]
fn one_format_vocabulary_and_the_same_evaluation_options_everywhere() {
    let (dir, base) = gpu_kernels_repo();
    let d = dir.path();

    // `table` is an alias of `human` wherever --format exists.
    for cmd in ["problems", "kernels", "lint"] {
        let human = kernelgate(d, &[cmd, "--format", "human"], &[]);
        let table = kernelgate(d, &[cmd, "--format", "table"], &[]);
        assert_eq!(
            human.status.code(),
            table.status.code(),
            "{cmd}: {}",
            text(&table)
        );
        assert!(table.status.code() != Some(2), "{cmd}: {}", text(&table));
        assert_eq!(human.stdout, table.stdout, "{cmd}");
    }

    // pr, baseline and eval take the same evaluation options.
    for cmd in ["pr", "baseline", "eval"] {
        let help = kernelgate(d, &[cmd, "--help"], &[]);
        let help = String::from_utf8_lossy(&help.stdout);
        for flag in [
            "--trials",
            "--compile-timeout",
            "--run-timeout",
            "--precision",
            "--threshold",
        ] {
            assert!(help.contains(flag), "{cmd} lacks {flag}:\n{help}");
        }
    }
    let out = kernelgate(
        d,
        &["pr", "--base", &base, "--plan", "--precision", "bf16"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        plan["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["precision"] == "bf16"),
        "{plan:#}"
    );
    let out_dir = d.join("kg-out");
    let out = kernelgate(
        d,
        &[
            "pr",
            "--base",
            &base,
            "--publish",
            "files",
            "--threshold",
            "7.5",
            "--trials",
            "2",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("CUDA_VISIBLE_DEVICES", "")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["policy"]["regression_threshold"], 0.075);
    let out = kernelgate(d, &["pr", "--trials", "0", "--plan"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--trials must be at least 1"),
        "{}",
        text(&out)
    );
}

#[test]
fn eval_finds_the_problem_from_the_kernels_path_or_directive() {
    let (dir, _) = gpu_kernels_repo();
    let d = dir.path();
    // Fails at import (fast): what matters is the problem it was evaluated against.
    write(
        d,
        "kernels/level1/3_ReLU/boom.py",
        "# kernelgate: backend=cpp\nraise RuntimeError('boom')\n",
    );
    write(
        d,
        "kernels/elsewhere/relu.py",
        "# kernelgate: problem=level1/3_ReLU backend=cpp\nraise RuntimeError('boom')\n",
    );
    for kernel in ["kernels/level1/3_ReLU/boom.py", "kernels/elsewhere/relu.py"] {
        let out = kernelgate(
            d,
            &[
                "eval",
                "--kernel",
                kernel,
                "--no-timing",
                "--format",
                "json",
            ],
            &[],
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let json: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        assert_eq!(json["problem"], "level1/3_ReLU", "{json:#}");
    }
    // Nothing maps it: say so and what to do.
    write(d, "scratch/mine.py", "raise RuntimeError('boom')\n");
    let out = kernelgate(d, &["eval", "--kernel", "scratch/mine.py"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--problem not given") && err.contains("# kernelgate: problem="),
        "{err}"
    );
}

/// docs/troubleshooting.md lists each message this issue added, as the code words it.
#[test]
fn troubleshooting_lists_each_new_message() {
    let doc = std::fs::read_to_string(root().join("docs/troubleshooting.md")).unwrap();
    for message in [
        "does not exist in",
        "which is shallow",
        "cannot import torch (No module named 'torch')",
        "skipped — needs a GPU",
        "this file is not UTF-8",
        "cannot read this file",
        "missing Python package",
        "problems --check",
        "NOT WRITTEN: too noisy",
        "wrote nothing",
        "baseline_tolerance_pct",
        "help: give --config an existing file",
        "--problem not given",
        "`table`, the old name, is an alias of `human`",
        "get_code_hash",
        "fast_p",
        "CPU (no GPU)",
        "is not a size",
    ] {
        assert!(
            doc.contains(message),
            "docs/troubleshooting.md lacks `{message}`"
        );
    }
}

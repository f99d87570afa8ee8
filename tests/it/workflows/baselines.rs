//! The baselines workflow: main's history, the dashboard, the results pull request.

use super::*;

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
        script.contains("--repo-url \"$GITHUB_SERVER_URL/$GITHUB_REPOSITORY\""),
        "the dashboard links commits on this server, GitHub Enterprise included: {script}"
    );
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

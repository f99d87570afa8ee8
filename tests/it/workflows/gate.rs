//! The gate workflow (`kernelgate.yml`): privileges, history, when it runs, its check name.

use super::*;

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

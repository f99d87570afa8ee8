//! The publish workflow: it runs no pull request code and installs the released binary.

use super::*;

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

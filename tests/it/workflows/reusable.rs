//! `kernelgate-reusable.yml`: the three workflows users copied (kernelgate.yml,
//! kernelgate-publish.yml, kernelgate-trusted.yml) behind one `workflow_call`, job for job and
//! step for step, so the short caller in the quickstart gets exactly what the three files do.

use super::*;

const REUSABLE: &str = ".github/workflows/kernelgate-reusable.yml";

/// (source file, its job, the reusable workflow's job): ids that would collide are prefixed.
const JOBS: [(&str, &str, &str); 7] = [
    ("kernelgate.yml", "changes", "changes"),
    ("kernelgate.yml", "no-kernel", "no-kernel"),
    ("kernelgate.yml", "gate", "gate"),
    ("kernelgate-publish.yml", "publish", "fork-publish"),
    ("kernelgate-trusted.yml", "authorize", "trusted-authorize"),
    ("kernelgate-trusted.yml", "gate", "trusted-gate"),
    ("kernelgate-trusted.yml", "publish", "trusted-publish"),
];

/// The steps of a job without the checkout of kernelgate the reusable workflow adds.
fn own_steps(job: &Yaml) -> Vec<&Yaml> {
    job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .filter(|s| s["with"]["path"].as_str() != Some(".kernelgate-action"))
        .collect()
}

#[test]
fn it_holds_every_job_of_the_three_workflows_step_for_step() {
    let reusable = load(&root().join(REUSABLE));
    assert_eq!(
        map_keys(&reusable["jobs"]),
        JOBS.iter().map(|(_, _, j)| j.to_string()).collect(),
        "{REUSABLE}: a job that none of the three workflows has, or one missing"
    );
    for (file, id, as_id) in JOBS {
        let source = load(&root().join(".github/workflows").join(file));
        let (theirs, ours) = (&source["jobs"][id], &reusable["jobs"][as_id]);
        // A job's outputs are read under its new id.
        let renamed = |y: &Yaml| {
            let text = format!("{y:?}");
            ["authorize", "gate", "publish"]
                .iter()
                .fold(text, |t, j| match (file, *j) {
                    ("kernelgate-trusted.yml", j) => {
                        t.replace(&format!("needs.{j}."), &format!("needs.trusted-{j}."))
                    }
                    _ => t,
                })
        };
        let where_ = format!("{file} job {id} (reusable job {as_id})");
        assert_eq!(
            theirs["permissions"], ours["permissions"],
            "{where_}: permissions"
        );
        assert_eq!(
            theirs["timeout-minutes"], ours["timeout-minutes"],
            "{where_}"
        );
        let (a, b) = (own_steps(theirs), own_steps(ours));
        assert_eq!(a.len(), b.len(), "{where_}: steps");
        for (s, t) in a.iter().zip(&b) {
            let name = s["name"].as_str().or(s["uses"].as_str()).unwrap_or("?");
            // Scripts, env and conditions as in the three files: only the action's path differs.
            for key in [
                "name",
                "run",
                "env",
                "if",
                "id",
                "continue-on-error",
                "with",
            ] {
                assert_eq!(
                    renamed(&s[key]),
                    format!("{:?}", t[key]),
                    "{where_}: step {name:?}: {key}"
                );
            }
            match (s["uses"].as_str(), t["uses"].as_str()) {
                (Some(u), Some(v)) if u.starts_with("./") => {
                    assert_eq!(v, "./.kernelgate-action", "{where_}: step {name:?}")
                }
                (u, v) => assert_eq!(u, v, "{where_}: step {name:?}"),
            }
        }
    }
}

/// Inside a called workflow `uses: ./` is the caller's checkout: every job that runs the action
/// first checks kernelgate out, at the ref the caller pinned, without credentials.
#[test]
fn each_job_runs_the_kernelgate_it_checked_out_at_the_callers_ref() {
    let reusable = load(&root().join(REUSABLE));
    let call = &reusable["on"]["workflow_call"]["inputs"];
    for input in ["kernelgate-repository", "kernelgate-ref"] {
        assert_eq!(call[input]["required"].as_bool(), Some(true), "{input}");
    }
    for input in ["runs-on", "gpu-runs-on", "python", "check-name"] {
        assert!(!call[input].is_badvalue(), "no input {input}");
    }
    assert_eq!(
        reusable["env"]["KERNELGATE_CHECK_NAME"].as_str(),
        Some("${{ inputs.check-name }}")
    );
    assert_eq!(
        reusable["env"]["KERNELGATE_PYTHON"].as_str(),
        Some("${{ inputs.python }}")
    );
    for (name, job) in reusable["jobs"].as_hash().unwrap() {
        let name = name.as_str().unwrap();
        let runs_on = job["runs-on"].as_str().unwrap_or_default();
        assert!(
            runs_on.contains("inputs.runs-on") || runs_on.contains("inputs.gpu-runs-on"),
            "job {name}: runs-on {runs_on:?} is not an input"
        );
        let steps = job["steps"].as_vec().unwrap();
        let mut checked_out = false;
        for step in steps {
            if step["with"]["path"].as_str() == Some(".kernelgate-action") {
                assert_eq!(
                    step["with"]["ref"].as_str(),
                    Some("${{ inputs.kernelgate-ref }}"),
                    "job {name}"
                );
                assert_eq!(
                    step["with"]["repository"].as_str(),
                    Some("${{ inputs.kernelgate-repository }}"),
                    "job {name}"
                );
                assert_eq!(
                    step["with"]["persist-credentials"].as_bool(),
                    Some(false),
                    "job {name}"
                );
                checked_out = true;
            }
            if let Some(u) = step["uses"].as_str().filter(|u| u.starts_with("./")) {
                assert_eq!(u, "./.kernelgate-action", "job {name}");
                assert!(checked_out, "job {name}: runs {u} before checking it out");
            }
        }
    }
    // The GPU jobs, which run candidates, hold no write permission.
    assert_eq!(
        map_keys(&reusable["jobs"]["trusted-gate"]["permissions"]),
        ["contents".to_string()].into(),
        "trusted-gate"
    );
}

/// Each job runs for its own event only: a pull request never reaches the jobs that hold a
/// write token for a fork's report or the trusted run, and the other way round.
#[test]
fn each_flow_runs_for_its_own_event() {
    let reusable = load(&root().join(REUSABLE));
    let if_of = |job: &str| {
        reusable["jobs"][job]["if"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        if_of("changes").contains("github.event_name == 'pull_request'"),
        "{}",
        if_of("changes")
    );
    assert!(if_of("fork-publish").contains("github.event.workflow_run.event == 'pull_request'"));
    assert!(if_of("trusted-authorize").contains("github.event_name == 'issue_comment'"));
    for (job, needs) in [
        ("no-kernel", "changes"),
        ("gate", "changes"),
        ("trusted-gate", "trusted-authorize"),
    ] {
        assert_eq!(
            reusable["jobs"][job]["needs"].as_str(),
            Some(needs),
            "{job}"
        );
    }
}

/// The quickstart's short caller: it triggers on the three flows' events and gives every
/// required input, and only inputs the reusable workflow has.
#[test]
fn the_quickstarts_caller_fits_the_reusable_workflow() {
    let quickstart = read_text("docs/quickstart.md");
    let caller = quickstart
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("kernelgate-reusable.yml@"))
        .expect("docs/quickstart.md shows no caller of the reusable workflow");
    let caller = YamlLoader::load_from_str(caller).unwrap().remove(0);
    for event in ["pull_request", "workflow_run", "issue_comment"] {
        assert!(
            !caller["on"][event].is_badvalue(),
            "the caller has no {event}"
        );
    }
    // kernelgate-publish's workflow_run names the gate's workflow: the caller itself.
    assert_eq!(
        caller["on"]["workflow_run"]["workflows"][0].as_str(),
        caller["name"].as_str()
    );
    let reusable = load(&root().join(REUSABLE));
    let inputs = &reusable["on"]["workflow_call"]["inputs"];
    let given = map_keys(&caller["jobs"]["kernelgate"]["with"]);
    for (name, spec) in inputs.as_hash().unwrap() {
        let name = name.as_str().unwrap();
        if spec["required"].as_bool() == Some(true) {
            assert!(given.contains(name), "the caller does not give {name}");
        }
    }
    let known = map_keys(inputs);
    assert!(given.is_subset(&known), "{given:?} vs {known:?}");
    // The call grants what the jobs ask for, no more.
    let mut asked = BTreeSet::new();
    for (_, job) in reusable["jobs"].as_hash().unwrap() {
        asked.extend(map_keys(&job["permissions"]));
    }
    assert_eq!(
        map_keys(&caller["jobs"]["kernelgate"]["permissions"]),
        asked
    );
}

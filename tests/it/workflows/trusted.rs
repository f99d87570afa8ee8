//! The trusted `/kernelgate` flow and the default branch's config in every flow that runs
//! `kernelgate pr`.

use super::*;

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
        [
            "kernelgate-reusable.yml job gate",
            "kernelgate-reusable.yml job trusted-gate",
            "kernelgate-trusted.yml job gate",
            "kernelgate.yml job gate"
        ]
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
        run.runner_env.push((
            "KERNELGATE_BUILD_STORE".into(),
            crate::common::test_build_store().display().to_string(),
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

//! The composite action `action.yml`: its structure, its inputs as flags and the report as
//! outputs, its tokens, caches and check-run cleanup.

use super::*;

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
        ("fail-on-regression", "false"),
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
echo '{"schema":"kernelgate.report/1","summary":{"verdict":"fail","geomean_speedup":1.23456,"failed":2,"warned":1,"passed":3,"skipped":0}}' > "$out/report.json"
exit 1
"#,
    );
    run.with_kernelgate(&fake);
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
        "--fail-on-regression",
        "false",
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
    assert_eq!(run.output("result", "warned"), "1");
    assert_eq!(run.output("result", "passed"), "3");
    assert_eq!(run.output("result", "skipped"), "0");

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
    run.with_kernelgate(&fake);
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
             publish --check-name kernelgate --bot-login github-actions[bot] --report {o}/report.json --publish github --comment always\n"
        )
    );

    // Nothing downloaded: a clear error, not a merge of nothing.
    let mut run = ActionRun::new(&[("command", "merge")]);
    let fake = recording_kernelgate(run.dir.path());
    run.with_kernelgate(&fake);
    let (code, log) = run.step("run", &path);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: nothing to merge::"),
        "{log}"
    );
}

/// fail-on-regression: only `false` reaches the CLI (`true` leaves the judging config's policy
/// as it is); anything else is refused before kernelgate runs.
#[test]
fn action_passes_fail_on_regression_false_and_refuses_other_words() {
    let path = std::env::var("PATH").unwrap();
    for (value, passed) in [("true", false), ("false", true)] {
        let mut run = ActionRun::new(&[("fail-on-regression", value)]);
        let fake = recording_kernelgate(run.dir.path());
        run.with_kernelgate(&fake);
        let (code, log) = run.step("run", &path);
        assert_eq!(code, 0, "{log}");
        let calls = read(&run.dir.path().join("calls"));
        assert_eq!(
            calls.contains("--fail-on-regression false"),
            passed,
            "{value}: {calls}"
        );
    }
    let mut run = ActionRun::new(&[("fail-on-regression", "no; rm -rf /")]);
    let fake = recording_kernelgate(run.dir.path());
    run.with_kernelgate(&fake);
    let (code, log) = run.step("run", &path);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: bad fail-on-regression::"),
        "{log}"
    );
    assert!(
        !run.dir.path().join("calls").exists(),
        "kernelgate ran anyway"
    );
}

/// check-run-url and comment-id are the publish step's: what `kernelgate publish` wrote to its
/// GITHUB_OUTPUT from GitHub's answers (tests/it/publish.rs checks that side).
#[test]
fn action_outputs_what_the_publish_step_did() {
    let action = load(&root().join("action.yml"));
    for (output, step) in [
        ("check-run-url", "publish"),
        ("comment-id", "publish"),
        ("passed", "result"),
        ("warned", "result"),
        ("failed", "result"),
        ("skipped", "result"),
    ] {
        assert_eq!(
            action["outputs"][output]["value"].as_str(),
            Some(format!("${{{{ steps.{step}.outputs.{output} }}}}").as_str()),
            "output {output}"
        );
    }
    let mut run = ActionRun::new(&[("command", "publish"), ("publish", "github")]);
    let fake = run.dir.path().join("kernelgate");
    write_executable(
        &fake,
        r#"#!/bin/bash
printf 'verdict=pass\ncheck-run-url=https://github.com/acme/kernels/runs/11\ncomment-id=5\n' >> "$GITHUB_OUTPUT"
"#,
    );
    run.with_kernelgate(&fake);
    let out = run.dir.path().join("kernelgate-report");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("report.json"), "{}").unwrap();
    let path = std::env::var("PATH").unwrap();
    let (code, log) = run.step("run", &path);
    assert_eq!(code, 0, "{log}");
    let (code, log) = run.step("publish", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        run.output("publish", "check-run-url"),
        "https://github.com/acme/kernels/runs/11"
    );
    assert_eq!(run.output("publish", "comment-id"), "5");
    assert_eq!(run.output("publish", "exit-code"), "0");
}

#[test]
fn action_rejects_a_threshold_that_is_not_a_number() {
    let mut run = ActionRun::new(&[("threshold", "5%; rm -rf /")]);
    let fake = recording_kernelgate(run.dir.path());
    run.with_kernelgate(&fake);
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
    run.with_kernelgate(&fake);
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
    run.with_kernelgate(&fake);
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
    run.with_kernelgate(&fake);
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

#[test]
fn action_passes_the_trusted_config_only_where_the_default_branch_has_one() {
    let path = std::env::var("PATH").unwrap();
    for present in [true, false] {
        let mut run = ActionRun::new(&[
            ("publish", "files"),
            ("trusted-config", ".kernelgate-trusted/kernelgate.toml"),
        ]);
        let fake = recording_kernelgate(run.dir.path());
        run.with_kernelgate(&fake);
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

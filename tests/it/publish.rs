//! `kernelgate publish` and `kernelgate merge` end to end (files mode; the GitHub API side is
//! covered with wiremock in crates/github/tests/publish.rs).

use kernelgate_model::{Backend, Precision};
use kernelgate_report::*;
use std::path::Path;
use std::process::{Command, Output};

const SHA: &str = "c0ffee0000000000000000000000000000c0ffee";

fn kernelgate(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kernelgate"));
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("GITHUB_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("kernelgate runs")
}

fn shard(i: u32, n: u32, rows: &[(&str, OutcomeKind, Verdict)]) -> Report {
    let mut r = Report::new(RunInfo {
        repo: "acme/kernels".into(),
        pr_number: Some(3),
        head_sha: SHA.into(),
        shard: Some((i, n)),
        complete: true,
        ..Default::default()
    });
    for (path, kind, verdict) in rows {
        let mut k = KernelRow::new(
            *path,
            "level1/1_X.py",
            Backend::Cuda,
            Precision::Fp32,
            Change::Added,
            OutcomeSummary::new(*kind, "msg"),
        );
        k.verdict = *verdict;
        k.speedup_eager = Some(Interval::point(2.0));
        r.kernels.push(k);
    }
    r.finalize();
    r
}

#[test]
fn merge_joins_shards_renders_and_exits_with_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    shard(
        1,
        2,
        &[("kernels/b.py", OutcomeKind::Correct, Verdict::Pass)],
    )
    .write_atomic(&a)
    .unwrap();
    shard(
        2,
        2,
        &[
            ("kernels/a.py", OutcomeKind::Incorrect, Verdict::Fail),
            ("kernels/c.py", OutcomeKind::Correct, Verdict::Pass),
        ],
    )
    .write_atomic(&b)
    .unwrap();
    let out = dir.path().join("merged");
    let o = kernelgate(
        &[
            "merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let merged = Report::read(&out.join("report.json")).unwrap();
    assert_eq!(merged.summary.total, 3);
    assert_eq!(merged.summary.failed, 1);
    assert!(merged.run.complete && merged.run.shard.is_none());
    let paths: Vec<_> = merged.kernels.iter().map(|k| k.path.as_str()).collect();
    assert_eq!(paths, ["kernels/a.py", "kernels/b.py", "kernels/c.py"]);
    for f in ["comment.md", "summary.md", "results.sarif"] {
        assert!(out.join(f).exists(), "{f}");
    }
    assert!(std::fs::read_to_string(out.join("comment.md"))
        .unwrap()
        .starts_with(STICKY_MARKER));
}

#[test]
fn merge_of_a_missing_or_foreign_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let out = dir.path().join("o");
    let o = kernelgate(
        &[
            "merge",
            junk.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("junk.json") && err.contains("kernelgate.report/1"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written on bad input");
}

#[test]
fn publish_to_files_writes_payloads_summary_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut r = shard(1, 1, &[("kernels/a.py", OutcomeKind::Crash, Verdict::Fail)]);
    r.run.shard = None;
    r.write_atomic(&report).unwrap();
    let summary = dir.path().join("step_summary.md");
    let outputs = dir.path().join("github_output");
    let o = kernelgate(
        &["publish", "--report", report.to_str().unwrap()],
        &[
            ("GITHUB_STEP_SUMMARY", &summary),
            ("GITHUB_OUTPUT", &outputs),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let check: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("check_run.json")).unwrap())
            .unwrap();
    assert_eq!(check["create"]["status"], "in_progress");
    assert_eq!(check["create"]["head_sha"], SHA);
    assert_eq!(check["complete"][0]["conclusion"], "failure");
    assert_eq!(
        check["complete"][0]["output"]["annotations"][0]["path"],
        "kernels/a.py"
    );
    let comment: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("comment.json")).unwrap())
            .unwrap();
    assert_eq!(comment["pr_number"], 3);
    assert!(comment["body"].as_str().unwrap().starts_with(STICKY_MARKER));
    assert!(dir.path().join("results.sarif").exists() && dir.path().join("comment.md").exists());
    let s = std::fs::read_to_string(&summary).unwrap();
    assert!(s.starts_with("## ❌ kernelgate"), "{s}");
    let out = std::fs::read_to_string(&outputs).unwrap();
    assert!(
        out.contains("verdict=fail\n")
            && out.contains("failed=1\n")
            && out.contains("geomean_speedup=\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("report={}", report.display())),
        "{out}"
    );
}

#[test]
fn publish_to_github_refuses_without_token_or_for_another_commit() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    shard(
        1,
        1,
        &[("kernels/a.py", OutcomeKind::Correct, Verdict::Pass)],
    )
    .write_atomic(&report)
    .unwrap();
    let o = kernelgate(
        &[
            "publish",
            "--report",
            report.to_str().unwrap(),
            "--publish",
            "github",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("GITHUB_TOKEN"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A workflow_run event for another head commit: the report must not be published.
    let event = dir.path().join("event.json");
    std::fs::write(
        &event,
        r#"{"workflow_run": {"head_sha": "deadbeef", "pull_requests": []}}"#,
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .args(["publish", "--report", report.to_str().unwrap()])
        .env("GITHUB_TOKEN", "t")
        .env("GITHUB_REPOSITORY", "acme/kernels")
        .env("GITHUB_EVENT_PATH", &event)
        .env("GITHUB_API_URL", "http://127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(SHA) && err.contains("deadbeef") && err.contains("refusing"),
        "{err}"
    );
}

/// The whole `kernelgate publish` against a mock GitHub: PR head verified, check run created
/// and completed, comment posted, outputs written.
#[test]
fn publish_to_github_sends_the_expected_requests() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(async {
        let server = MockServer::start().await;
        let ok = |v: serde_json::Value| ResponseTemplate::new(200).set_body_json(v);
        Mock::given(method("GET"))
            .and(path(format!(
                "/repos/acme/kernels/commits/{SHA}/check-runs"
            )))
            .respond_with(ok(serde_json::json!({"total_count": 0, "check_runs": []})))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/repos/acme/kernels/pulls/3"))
            .respond_with(ok(serde_json::json!({"head": {"sha": SHA}})))
            .mount(&server)
            .await;
        // The workflow's token is an installation token: `GET /user` is refused.
        Mock::given(method("GET"))
            .and(path("/user"))
            .respond_with(ResponseTemplate::new(403).set_body_json(
                serde_json::json!({"message": "Resource not accessible by integration"}),
            ))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/repos/acme/kernels/check-runs"))
            .respond_with(ok(serde_json::json!({"id": 11})))
            .mount(&server)
            .await;
        Mock::given(method("PATCH"))
            .and(path("/repos/acme/kernels/check-runs/11"))
            .respond_with(ok(serde_json::json!({
                "id": 11,
                "html_url": "https://github.com/acme/kernels/runs/11"
            })))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/repos/acme/kernels/issues/3/comments"))
            .respond_with(ok(serde_json::json!([])))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/repos/acme/kernels/issues/3/comments"))
            .respond_with(ok(serde_json::json!({"id": 5})))
            .mount(&server)
            .await;
        server
    });
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut r = shard(
        1,
        1,
        &[("kernels/a.py", OutcomeKind::Correct, Verdict::Pass)],
    );
    r.run.shard = None;
    r.finalize();
    r.write_atomic(&report).unwrap();
    let outputs = dir.path().join("out.txt");
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .args(["publish", "--report", report.to_str().unwrap()])
        .env("GITHUB_TOKEN", "t")
        .env("GITHUB_REPOSITORY", "acme/kernels")
        .env("GITHUB_API_URL", server.uri())
        .env("GITHUB_OUTPUT", &outputs)
        .env_remove("GITHUB_EVENT_PATH")
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let reqs = rt.block_on(server.received_requests()).unwrap();
    let seen: Vec<String> = reqs
        .iter()
        .map(|r| format!("{} {}", r.method, r.url.path()))
        .collect();
    assert_eq!(
        seen,
        [
            format!("GET /repos/acme/kernels/commits/{SHA}/check-runs").as_str(),
            "GET /repos/acme/kernels/pulls/3",
            "POST /repos/acme/kernels/check-runs",
            "PATCH /repos/acme/kernels/check-runs/11",
            "GET /user",
            "GET /repos/acme/kernels/issues/3/comments",
            "POST /repos/acme/kernels/issues/3/comments",
        ]
    );
    let complete: serde_json::Value = serde_json::from_slice(&reqs[3].body).unwrap();
    assert_eq!(complete["conclusion"], "success");
    // The outputs say what publishing did, from GitHub's answers.
    let written = std::fs::read_to_string(&outputs).unwrap();
    for line in [
        "verdict=pass\n",
        "passed=1\n",
        "warned=0\n",
        "failed=0\n",
        "skipped=0\n",
        "check-run-url=https://github.com/acme/kernels/runs/11\n",
        "comment-id=5\n",
    ] {
        assert!(written.contains(line), "no {line:?} in {written}");
    }
}

/// `kernelgate publish --start` and `--end`: the steps before and after the evaluation, and the
/// `if: cancelled()` step, against a mock GitHub.
#[test]
fn publish_start_writes_the_check_run_id_and_end_completes_it() {
    use wiremock::matchers::{body_partial_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/repos/acme/kernels/check-runs"))
            .and(body_partial_json(serde_json::json!({
                "name": "kernelgate (H100)", "head_sha": SHA, "status": "in_progress",
                "external_id": "kernelgate:77:2:kernelgate (H100)"
            })))
            .respond_with(ResponseTemplate::new(201).set_body_json(serde_json::json!({"id": 31})))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(format!(
                "/repos/acme/kernels/commits/{SHA}/check-runs"
            )))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "total_count": 1,
                "check_runs": [{"id": 31, "external_id": "kernelgate:77:2:kernelgate (H100)"}]
            })))
            .mount(&server)
            .await;
        Mock::given(method("PATCH"))
            .and(path("/repos/acme/kernels/check-runs/31"))
            .and(body_partial_json(serde_json::json!({
                "status": "completed", "conclusion": "cancelled",
                "output": {"summary": "The workflow run was cancelled."}
            })))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"id": 31})))
            .expect(1)
            .mount(&server)
            .await;
        server
    });
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("out.txt");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kernelgate"))
            .args(args)
            .env("GITHUB_TOKEN", "t")
            .env("GITHUB_REPOSITORY", "acme/kernels")
            .env("GITHUB_API_URL", server.uri())
            .env("GITHUB_RUN_ID", "77")
            .env("GITHUB_RUN_ATTEMPT", "2")
            .env("GITHUB_OUTPUT", &outputs)
            .env("KERNELGATE_CHECK_NAME", "kernelgate (H100)")
            .env_remove("GITHUB_EVENT_PATH")
            .output()
            .unwrap()
    };
    let o = run(&["publish", "--start", "--head", SHA]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&outputs).unwrap(),
        format!("check-run-id=31\nhead={SHA}\n")
    );
    // The cancelled() step of a later process: no id given, found by external_id.
    let o = run(&[
        "publish",
        "--end",
        "cancelled",
        "--head",
        SHA,
        "--reason",
        "The workflow run was cancelled.",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    rt.block_on(server.verify());

    // A head that is not a commit SHA never reaches GitHub.
    let o = run(&["publish", "--start", "--head", "abc\n::error::x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("40 lowercase hex"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// What a candidate controls (paths, exception text) cannot add markup to the comment or the
/// summary: no closing `</details>`, image, link, mention or table break gets through.
#[test]
fn candidate_text_is_escaped_in_the_comment_and_summary() {
    let hostile = "boom</details><img src=x onerror=alert(1)> [click](https://evil.example) \
                   ![i](https://evil.example/i.png) @everyone | cell ```` `code` **bold**";
    let mut r = Report::new(RunInfo {
        repo: "acme/kernels".into(),
        pr_number: Some(3),
        head_sha: SHA.into(),
        complete: true,
        ..Default::default()
    });
    let mut k = KernelRow::new(
        "kernels/a`b|c@d.py",
        "level1/1_X.py",
        Backend::Cuda,
        Precision::Fp32,
        Change::Added,
        OutcomeSummary::new(OutcomeKind::RuntimeError, hostile),
    );
    k.verdict = Verdict::Fail;
    k.reasons = vec![hostile.to_string()];
    k.outcome.log_tail = Some(format!("Traceback\n```\n</details>{hostile}"));
    k.outcome.details = serde_json::json!({"error": format!("```\n{hostile}")});
    r.kernels.push(k);
    r.finalize();
    for text in [render_comment(&r), render_summary(&r)] {
        // Fences: only ours open and close (an even number of lines starting with ```).
        let fences = text.lines().filter(|l| l.starts_with("```")).count();
        assert_eq!(fences % 2, 0, "{text}");
        // Inside our fences text is inert code; everything outside must carry no markup.
        let mut inside = false;
        let text: String = text
            .lines()
            .filter(|l| {
                if l.starts_with("```") {
                    inside = !inside;
                    return false;
                }
                !inside
            })
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            text.matches("</details>").count(),
            text.matches("<details").count(),
            "{text}"
        );
        assert!(!text.contains("<img"), "{text}");
        assert!(!text.contains("](https://evil"), "{text}");
        assert!(!text.contains("@everyone"), "{text}");
        assert!(!text.contains("**bold**"), "{text}");
        // The table row of the kernel is still one row with all its cells: as many as the
        // header of its table (a table has the columns its rows fill).
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.contains("kernels/a")).unwrap();
        let header = lines[..at]
            .iter()
            .rev()
            .find(|l| l.starts_with("| |"))
            .unwrap();
        assert_eq!(
            lines[at].matches(" | ").count(),
            header.matches(" | ").count(),
            "{}\n{header}",
            lines[at]
        );
        assert!(header.matches(" | ").count() >= 3, "{header}");
        // Readers still see the message.
        assert!(text.contains("boom"), "{text}");
    }
}

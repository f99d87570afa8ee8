//! `kernelgate publish` and `kernelgate merge` end to end (files mode; the GitHub API side is
//! covered with wiremock in crates/github/tests/publish.rs).

use kernelgate_model::{Backend, Precision};
use kernelgate_report::*;
use std::path::Path;
use std::process::{Command, Output};

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
        head_sha: "c0ffee".into(),
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
    assert_eq!(check["create"]["head_sha"], "c0ffee");
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
        err.contains("c0ffee") && err.contains("deadbeef") && err.contains("refusing"),
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
            .and(path("/repos/acme/kernels/pulls/3"))
            .respond_with(ok(serde_json::json!({"head": {"sha": "c0ffee"}})))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/repos/acme/kernels/check-runs"))
            .respond_with(ok(serde_json::json!({"id": 11})))
            .mount(&server)
            .await;
        Mock::given(method("PATCH"))
            .and(path("/repos/acme/kernels/check-runs/11"))
            .respond_with(ok(serde_json::json!({})))
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
            "GET /repos/acme/kernels/pulls/3",
            "POST /repos/acme/kernels/check-runs",
            "PATCH /repos/acme/kernels/check-runs/11",
            "GET /repos/acme/kernels/issues/3/comments",
            "POST /repos/acme/kernels/issues/3/comments",
        ]
    );
    let complete: serde_json::Value = serde_json::from_slice(&reqs[2].body).unwrap();
    assert_eq!(complete["conclusion"], "success");
    assert!(std::fs::read_to_string(&outputs)
        .unwrap()
        .contains("verdict=pass\n"));
}

//! The exact REST requests kernelgate sends, against a wiremock server speaking GitHub's shapes.

use kernelgate_github::{CommentAction, GithubContext, GithubError, Publisher, RetryPolicy};
use kernelgate_model::{Backend, Finding, Precision, Severity};
use kernelgate_report::*;
use serde_json::{json, Value};
use std::time::Duration;
use wiremock::matchers::{body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn ctx(server: &MockServer) -> GithubContext {
    GithubContext {
        token: Some("tok123".into()),
        repo: "acme/kernels".into(),
        api_url: server.uri(),
        ..Default::default()
    }
}

fn publisher(server: &MockServer) -> Publisher {
    Publisher::new(&ctx(server))
        .unwrap()
        .with_retry(RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
        })
}

fn report(findings: u32, kind: OutcomeKind) -> Report {
    let mut r = Report::new(RunInfo {
        repo: "acme/kernels".into(),
        pr_number: Some(7),
        head_sha: "abc123".into(),
        complete: true,
        ..Default::default()
    });
    let mut row = KernelRow::new(
        "kernels/19_ReLU.py",
        "level1/19_ReLU.py",
        Backend::Cuda,
        Precision::Fp32,
        Change::Added,
        OutcomeSummary::new(kind, "max abs diff 0.5"),
    );
    row.annotate_line = Some(12);
    row.findings = (1..=findings)
        .map(|i| Finding {
            file: "kernels/19_ReLU.py".into(),
            line: i,
            column: 5,
            end_line: i,
            end_column: 9,
            rule: "torch-fallback".into(),
            severity: Severity::Error,
            message: format!("finding {i}"),
        })
        .collect();
    row.verdict = if findings > 0 || kind != OutcomeKind::Correct {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    r.kernels.push(row);
    r.finalize();
    r
}

async fn requests(server: &MockServer) -> Vec<(String, String, Value)> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r: &Request| {
            let q = r.url.query().map(|q| format!("?{q}")).unwrap_or_default();
            (
                r.method.to_string(),
                format!("{}{q}", r.url.path()),
                serde_json::from_slice(&r.body).unwrap_or(Value::Null),
            )
        })
        .collect()
}

#[tokio::test]
async fn check_run_is_created_in_progress_then_completed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/kernels/check-runs"))
        .and(header("authorization", "Bearer tok123"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 42})))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/kernels/check-runs/42"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 42})))
        .mount(&server)
        .await;
    let p = publisher(&server);
    let r = report(0, OutcomeKind::Incorrect);
    let id = p.start_check_run("abc123").await.unwrap();
    assert_eq!(id, 42);
    p.complete_check_run(id, &r, "summary text").await.unwrap();

    let reqs = requests(&server).await;
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        (reqs[0].0.as_str(), reqs[0].1.as_str()),
        ("POST", "/repos/acme/kernels/check-runs")
    );
    assert_eq!(reqs[0].2["name"], "kernelgate");
    assert_eq!(reqs[0].2["head_sha"], "abc123");
    assert_eq!(reqs[0].2["status"], "in_progress");
    assert_eq!(
        (reqs[1].0.as_str(), reqs[1].1.as_str()),
        ("PATCH", "/repos/acme/kernels/check-runs/42")
    );
    let body = &reqs[1].2;
    assert_eq!(body["status"], "completed");
    assert_eq!(body["conclusion"], "failure");
    assert_eq!(body["output"]["summary"], "summary text");
    // The runtime failure is annotated on the ModelNew line.
    let ann = body["output"]["annotations"].as_array().unwrap();
    assert_eq!(ann.len(), 1);
    assert_eq!(ann[0]["path"], "kernels/19_ReLU.py");
    assert_eq!(ann[0]["start_line"], 12);
    assert_eq!(ann[0]["annotation_level"], "failure");
}

#[tokio::test]
async fn one_hundred_twenty_findings_go_as_three_annotation_batches() {
    let server = MockServer::start().await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/kernels/check-runs/9"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 9})))
        .expect(3)
        .mount(&server)
        .await;
    publisher(&server)
        .complete_check_run(9, &report(120, OutcomeKind::Correct), "s")
        .await
        .unwrap();
    let reqs = requests(&server).await;
    let sizes: Vec<usize> = reqs
        .iter()
        .map(|r| r.2["output"]["annotations"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [50, 50, 20]);
    // Only the first request completes; all keep title and summary, as GitHub requires.
    assert_eq!(reqs[0].2["conclusion"], "failure");
    assert!(reqs[1].2.get("conclusion").is_none() && reqs[2].2.get("status").is_none());
    assert!(reqs
        .iter()
        .all(|r| r.2["output"]["title"].is_string() && r.2["output"]["summary"] == "s"));
    let lines: Vec<u64> = reqs
        .iter()
        .flat_map(|r| r.2["output"]["annotations"].as_array().unwrap().clone())
        .map(|a| a["start_line"].as_u64().unwrap())
        .collect();
    assert_eq!(
        lines,
        (1..=120).collect::<Vec<u64>>(),
        "every finding sent once, in order"
    );
    assert_eq!(reqs[2].2["output"]["annotations"][19]["start_column"], 5);
}

#[tokio::test]
async fn comment_is_created_on_first_run_and_updated_on_second() {
    let server = MockServer::start().await;
    // First run: one unrelated comment, no marker.
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([{"id": 1, "body": "LGTM"}])))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 555})))
        .mount(&server)
        .await;
    // Second run: the marker comment is on page 2 (page 1 is full).
    let page1: Vec<Value> = (0..100)
        .map(|i| json!({"id": 1000 + i, "body": "chatter"}))
        .collect();
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .and(query_param("page", "1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(Value::Array(page1)))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .and(query_param("page", "2"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!([{"id": 555, "body": format!("{STICKY_MARKER}\nold results")}]),
            ),
        )
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/kernels/issues/comments/555"))
        .and(body_partial_json(json!({"body": "new body"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 555})))
        .mount(&server)
        .await;

    let p = publisher(&server);
    assert_eq!(
        p.upsert_comment(7, "first body").await.unwrap(),
        CommentAction::Created(555)
    );
    assert_eq!(
        p.upsert_comment(7, "new body").await.unwrap(),
        CommentAction::Updated(555)
    );

    let reqs: Vec<(String, String)> = requests(&server)
        .await
        .into_iter()
        .map(|r| (r.0, r.1))
        .collect();
    let want = [
        (
            "GET",
            "/repos/acme/kernels/issues/7/comments?per_page=100&page=1",
        ),
        ("POST", "/repos/acme/kernels/issues/7/comments"),
        (
            "GET",
            "/repos/acme/kernels/issues/7/comments?per_page=100&page=1",
        ),
        (
            "GET",
            "/repos/acme/kernels/issues/7/comments?per_page=100&page=2",
        ),
        ("PATCH", "/repos/acme/kernels/issues/comments/555"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(reqs, want);
    let posted = &requests(&server).await[1].2;
    assert_eq!(posted["body"], "first body");
}

#[tokio::test]
async fn forbidden_names_the_missing_permission_without_retrying() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/kernels/check-runs"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"message": "Resource not accessible by integration"})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"message": "Resource not accessible by integration"})),
        )
        .mount(&server)
        .await;
    let p = publisher(&server);
    let e = p.start_check_run("abc123").await.unwrap_err();
    assert!(
        matches!(
            e,
            GithubError::Forbidden {
                permission: "checks: write",
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("checks: write") && msg.contains("Resource not accessible by integration"),
        "{msg}"
    );
    let e = p.upsert_comment(7, "x").await.unwrap_err();
    assert!(e.to_string().contains("pull-requests: write"), "{e}");
    assert_eq!(
        requests(&server).await.len(),
        2,
        "a plain 403 is not retried"
    );
}

#[tokio::test]
async fn bad_gateway_then_success_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/kernels/check-runs"))
        .respond_with(ResponseTemplate::new(502).set_body_string("Bad Gateway"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/kernels/check-runs"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 77})))
        .mount(&server)
        .await;
    assert_eq!(
        publisher(&server).start_check_run("abc123").await.unwrap(),
        77
    );
    let reqs = requests(&server).await;
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].2, reqs[1].2, "the same body is sent again");
}

#[tokio::test]
async fn secondary_rate_limit_is_retried_and_persistent_5xx_gives_up() {
    let server = MockServer::start().await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/kernels/issues/comments/5"))
        .respond_with(ResponseTemplate::new(502))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(
            ResponseTemplate::new(403)
                .insert_header("retry-after", "0")
                .set_body_json(json!({"message": "You have exceeded a secondary rate limit."})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!([{"id": 5, "body": STICKY_MARKER}])),
        )
        .mount(&server)
        .await;
    let e = publisher(&server).upsert_comment(7, "b").await.unwrap_err();
    assert!(matches!(e, GithubError::Api { status: 502, .. }), "{e:?}");
    let methods: Vec<String> = requests(&server).await.into_iter().map(|r| r.0).collect();
    assert_eq!(
        methods,
        ["GET", "GET", "PATCH", "PATCH", "PATCH"],
        "rate limit retried once, 502 tried 3 times"
    );
}

#[tokio::test]
async fn publish_creates_completes_and_comments() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/kernels/check-runs"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 3})))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/kernels/check-runs/3"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 8})))
        .mount(&server)
        .await;
    let r = report(2, OutcomeKind::Correct);
    let action = publisher(&server).publish(&r, None).await.unwrap();
    assert_eq!(action, Some(CommentAction::Created(8)));
    let reqs = requests(&server).await;
    let comment = reqs.last().unwrap().2["body"].as_str().unwrap().to_string();
    assert!(comment.starts_with(STICKY_MARKER));
    assert_eq!(comment, render_comment(&r));
}

#[tokio::test]
async fn pr_head_sha_reads_the_pull_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/pulls/7"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"number": 7, "head": {"sha": "feed"}})),
        )
        .mount(&server)
        .await;
    assert_eq!(publisher(&server).pr_head_sha(7).await.unwrap(), "feed");
}

#[tokio::test]
async fn a_marker_pasted_by_a_user_is_not_taken_over() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/kernels/issues/7/comments"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"id": 1, "body": format!("{STICKY_MARKER} fake"), "user": {"login": "mallory", "type": "User"}},
            {"id": 2, "body": format!("{STICKY_MARKER} real"), "user": {"login": "github-actions[bot]", "type": "Bot"}},
        ])))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/kernels/issues/comments/2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 2})))
        .expect(1)
        .mount(&server)
        .await;
    assert_eq!(
        publisher(&server).upsert_comment(7, "b").await.unwrap(),
        CommentAction::Updated(2)
    );
}

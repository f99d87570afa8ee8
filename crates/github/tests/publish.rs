//! The REST requests kernelgate sends, against a wiremock server that behaves like GitHub: it
//! keeps check runs and comments, validates every request body against GitHub's REST schemas
//! (vendored in `schemas/`) and GitHub's byte limits, answers 422 like GitHub does, and injects
//! the failures GitHub produces (5xx after a write, rate limits, a moved head).

use kernelgate_github::{
    sticky_marker, CommentAction, CommentMode, Ending, GithubContext, GithubError, Published,
    Publisher, RetryPolicy, SleepFn, DRIFT_LABEL, UNVERIFIED,
};
use kernelgate_model::{Backend, Finding, Precision, Severity};
use kernelgate_report::*;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
const NEW_HEAD: &str = "fedcba9876543210fedcba9876543210fedcba98";

// ---------------------------------------------------------------------------------------------
// A GitHub double

#[derive(Clone, Debug)]
struct CheckRun {
    id: u64,
    name: String,
    head_sha: String,
    external_id: String,
    status: String,
    conclusion: Option<String>,
    title: String,
    summary: String,
    annotations: usize,
}

#[derive(Clone, Debug)]
struct Comment {
    id: u64,
    body: String,
    login: String,
    kind: &'static str,
    minimized: bool,
}

#[derive(Clone, Copy, Debug)]
enum FaultKind {
    /// Apply the request, then answer 502 (the answer is lost).
    AfterApply502,
    /// 403 secondary rate limit, with or without `retry-after`.
    Secondary(Option<u64>),
    /// 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` this many seconds ahead.
    Primary(u64),
}

struct Fault {
    method: &'static str,
    path_contains: &'static str,
    kind: FaultKind,
}

#[derive(Clone, Debug)]
struct Issue {
    number: u64,
    title: String,
    body: String,
    login: String,
    labels: Vec<String>,
}

struct State {
    check_runs: Vec<CheckRun>,
    comments: Vec<Comment>,
    issues: Vec<Issue>,
    pr_head: String,
    /// `Some(login)`: a user token; `None`: an installation token (`GET /user` is refused).
    user: Option<String>,
    /// Who new comments are written by.
    poster: String,
    faults: VecDeque<Fault>,
    violations: Vec<String>,
    log: Vec<String>,
    next_id: u64,
}

#[derive(Clone)]
struct FakeGithub(Arc<Mutex<State>>);

fn schema(name: &str) -> jsonschema::Validator {
    let path = format!("{}/tests/schemas/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&v).unwrap()
}

impl FakeGithub {
    fn new() -> Self {
        FakeGithub(Arc::new(Mutex::new(State {
            check_runs: vec![],
            comments: vec![],
            issues: vec![],
            pr_head: HEAD.into(),
            user: None,
            poster: "github-actions[bot]".into(),
            faults: VecDeque::new(),
            violations: vec![],
            log: vec![],
            next_id: 100,
        })))
    }

    fn fault(&self, method: &'static str, path_contains: &'static str, kind: FaultKind) {
        self.0.lock().unwrap().faults.push_back(Fault {
            method,
            path_contains,
            kind,
        });
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// GitHub's 422 for a body the schema or the byte limits refuse; `None` when valid.
    fn invalid(&self, schema_name: &str, body: &Value) -> Option<String> {
        let errors: Vec<String> = schema(schema_name)
            .iter_errors(body)
            .map(|e| format!("{schema_name}: {e} at {}", e.instance_path()))
            .collect();
        let mut problems = errors;
        let out = &body["output"];
        for field in ["summary", "text"] {
            if let Some(s) = out[field].as_str() {
                if s.len() > 65_535 {
                    problems.push(format!("output.{field} is {} bytes", s.len()));
                }
            }
        }
        for a in out["annotations"].as_array().into_iter().flatten() {
            if a["message"].as_str().is_some_and(|m| m.len() > 65_535) {
                problems.push("annotation message over 64 KB".into());
            }
            if a["title"].as_str().is_some_and(|t| t.len() > 255) {
                problems.push("annotation title over 255".into());
            }
        }
        if let Some(b) = body["body"].as_str() {
            if b.chars().count() > 65_536 {
                problems.push(format!("comment body is {} characters", b.chars().count()));
            }
        }
        if problems.is_empty() {
            None
        } else {
            Some(problems.join("; "))
        }
    }
}

fn num(segment: Option<&str>) -> u64 {
    segment.and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn query(req: &Request, key: &str) -> Option<String> {
    req.url
        .query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

impl Respond for FakeGithub {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let method = req.method.to_string();
        let path = req.url.path().to_string();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let mut st = self.0.lock().unwrap();
        st.log.push(format!("{method} {path}"));
        let fault = st
            .faults
            .iter()
            .position(|f| f.method == method && path.contains(f.path_contains))
            .and_then(|i| st.faults.remove(i));
        match fault.as_ref().map(|f| f.kind) {
            Some(FaultKind::Secondary(after)) => {
                let mut t = ResponseTemplate::new(403).set_body_json(json!({
                    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
                }));
                if let Some(s) = after {
                    t = t.insert_header("retry-after", s.to_string().as_str());
                }
                return t;
            }
            Some(FaultKind::Primary(ahead)) => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                return ResponseTemplate::new(403)
                    .insert_header("x-ratelimit-remaining", "0")
                    .insert_header("x-ratelimit-reset", (now + ahead).to_string().as_str())
                    .set_body_json(json!({"message": "API rate limit exceeded"}));
            }
            _ => {}
        }
        drop(st);
        let answer = self.route(&method, &path, req, &body);
        if matches!(fault.map(|f| f.kind), Some(FaultKind::AfterApply502)) {
            return ResponseTemplate::new(502).set_body_string("Bad Gateway");
        }
        answer
    }
}

impl FakeGithub {
    fn route(&self, method: &str, path: &str, req: &Request, body: &Value) -> ResponseTemplate {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let unprocessable = |st: &mut State, why: String| {
            st.violations.push(why.clone());
            ResponseTemplate::new(422)
                .set_body_json(json!({"message": "Validation Failed", "errors": [why]}))
        };
        match (method, parts.as_slice()) {
            ("GET", ["user"]) => match self.state().user.clone() {
                Some(login) => ResponseTemplate::new(200)
                    .set_body_json(json!({"login": login, "type": "User"})),
                None => ResponseTemplate::new(403)
                    .set_body_json(json!({"message": "Resource not accessible by integration"})),
            },
            ("POST", ["graphql"]) => {
                let st = self.state();
                let ids: Vec<String> = body["variables"]["ids"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                let nodes: Vec<Value> = ids
                    .iter()
                    .map(|id| {
                        let minimized = st
                            .comments
                            .iter()
                            .any(|c| format!("IC_{}", c.id) == *id && c.minimized);
                        json!({"id": id, "isMinimized": minimized})
                    })
                    .collect();
                ResponseTemplate::new(200).set_body_json(json!({"data": {"nodes": nodes}}))
            }
            ("GET", ["repos", "acme", "kernels", "pulls", _]) => {
                let head = self.state().pr_head.clone();
                ResponseTemplate::new(200)
                    .set_body_json(json!({"number": 7, "head": {"sha": head}}))
            }
            ("POST", ["repos", "acme", "kernels", "check-runs"]) => {
                if let Some(why) = self.invalid("checks-create", body) {
                    return unprocessable(&mut self.state(), why);
                }
                let mut st = self.state();
                st.next_id += 1;
                let run = CheckRun {
                    id: st.next_id,
                    name: body["name"].as_str().unwrap().into(),
                    head_sha: body["head_sha"].as_str().unwrap().into(),
                    external_id: body["external_id"].as_str().unwrap_or_default().into(),
                    status: body["status"].as_str().unwrap_or("queued").into(),
                    conclusion: body["conclusion"].as_str().map(str::to_string),
                    title: body["output"]["title"].as_str().unwrap_or_default().into(),
                    summary: body["output"]["summary"]
                        .as_str()
                        .unwrap_or_default()
                        .into(),
                    annotations: 0,
                };
                let id = run.id;
                st.check_runs.push(run);
                ResponseTemplate::new(201).set_body_json(json!({"id": id}))
            }
            ("PATCH", ["repos", "acme", "kernels", "check-runs", id]) => {
                if let Some(why) = self.invalid("checks-update", body) {
                    return unprocessable(&mut self.state(), why);
                }
                let id = num(Some(id));
                let mut st = self.state();
                let Some(run) = st.check_runs.iter_mut().find(|r| r.id == id) else {
                    return ResponseTemplate::new(404)
                        .set_body_json(json!({"message": "Not Found"}));
                };
                if let Some(s) = body["status"].as_str() {
                    run.status = s.into();
                }
                if let Some(c) = body["conclusion"].as_str() {
                    run.conclusion = Some(c.into());
                }
                if let Some(t) = body["output"]["title"].as_str() {
                    run.title = t.into();
                }
                if let Some(s) = body["output"]["summary"].as_str() {
                    run.summary = s.into();
                }
                run.annotations += body["output"]["annotations"].as_array().map_or(0, Vec::len);
                ResponseTemplate::new(200).set_body_json(json!({
                    "id": id,
                    "html_url": format!("https://github.com/acme/kernels/runs/{id}"),
                }))
            }
            ("GET", ["repos", "acme", "kernels", "commits", sha, "check-runs"]) => {
                let name = query(req, "check_name");
                let st = self.state();
                let runs: Vec<Value> = st
                    .check_runs
                    .iter()
                    .filter(|r| r.head_sha == *sha && name.as_deref().is_none_or(|n| n == r.name))
                    .map(|r| json!({"id": r.id, "name": r.name, "external_id": r.external_id, "status": r.status}))
                    .collect();
                ResponseTemplate::new(200)
                    .set_body_json(json!({"total_count": runs.len(), "check_runs": runs}))
            }
            ("GET", ["repos", "acme", "kernels", "issues", _, "comments"]) => {
                let per_page = query(req, "per_page")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(30usize);
                let page = query(req, "page")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(1usize);
                let st = self.state();
                let list: Vec<Value> = st
                    .comments
                    .iter()
                    .skip((page - 1) * per_page)
                    .take(per_page)
                    .map(|c| {
                        json!({"id": c.id, "node_id": format!("IC_{}", c.id), "body": c.body,
                               "user": {"login": c.login, "type": c.kind}})
                    })
                    .collect();
                ResponseTemplate::new(200).set_body_json(Value::Array(list))
            }
            ("POST", ["repos", "acme", "kernels", "issues", _, "comments"]) => {
                if let Some(why) = self.invalid("issues-create-comment", body) {
                    return unprocessable(&mut self.state(), why);
                }
                let mut st = self.state();
                st.next_id += 1;
                let id = st.next_id;
                let login = st.poster.clone();
                let kind = if login.ends_with("[bot]") {
                    "Bot"
                } else {
                    "User"
                };
                st.comments.push(Comment {
                    id,
                    body: body["body"].as_str().unwrap().into(),
                    login,
                    kind,
                    minimized: false,
                });
                ResponseTemplate::new(201).set_body_json(json!({"id": id}))
            }
            ("GET", ["repos", "acme", "kernels", "issues"]) => {
                let label = query(req, "labels");
                let per_page = query(req, "per_page")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(30usize);
                let page = query(req, "page")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(1usize);
                let st = self.state();
                let list: Vec<Value> = st
                    .issues
                    .iter()
                    .filter(|i| label.as_ref().is_none_or(|l| i.labels.contains(l)))
                    .skip((page - 1) * per_page)
                    .take(per_page)
                    .map(|i| {
                        json!({"number": i.number, "id": i.number + 9000, "title": i.title,
                               "body": i.body, "state": "open", "user": {"login": i.login}})
                    })
                    .collect();
                ResponseTemplate::new(200).set_body_json(Value::Array(list))
            }
            ("POST", ["repos", "acme", "kernels", "issues"]) => {
                if let Some(why) = self.invalid("issues-create", body) {
                    return unprocessable(&mut self.state(), why);
                }
                let mut st = self.state();
                st.next_id += 1;
                let number = st.next_id;
                let login = st.poster.clone();
                st.issues.push(Issue {
                    number,
                    title: body["title"].as_str().unwrap().into(),
                    body: body["body"].as_str().unwrap_or_default().into(),
                    login,
                    labels: body["labels"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|l| l.as_str().map(str::to_string))
                        .collect(),
                });
                ResponseTemplate::new(201)
                    .set_body_json(json!({"number": number, "id": number + 9000}))
            }
            ("PATCH", ["repos", "acme", "kernels", "issues", n]) if *n != "comments" => {
                if let Some(why) = self.invalid("issues-update", body) {
                    return unprocessable(&mut self.state(), why);
                }
                let n = num(Some(n));
                let mut st = self.state();
                match st.issues.iter_mut().find(|i| i.number == n) {
                    Some(i) => {
                        if let Some(t) = body["title"].as_str() {
                            i.title = t.into();
                        }
                        if let Some(b) = body["body"].as_str() {
                            i.body = b.into();
                        }
                        ResponseTemplate::new(200).set_body_json(json!({"number": n}))
                    }
                    None => {
                        ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found"}))
                    }
                }
            }
            ("PATCH", ["repos", "acme", "kernels", "issues", "comments", id]) => {
                if let Some(why) = self.invalid("issues-update-comment", body) {
                    return unprocessable(&mut self.state(), why);
                }
                let id = num(Some(id));
                let mut st = self.state();
                match st.comments.iter_mut().find(|c| c.id == id) {
                    Some(c) => {
                        c.body = body["body"].as_str().unwrap().into();
                        ResponseTemplate::new(200).set_body_json(json!({"id": id}))
                    }
                    None => {
                        ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found"}))
                    }
                }
            }
            _ => ResponseTemplate::new(404)
                .set_body_json(json!({"message": format!("no route {method} {path}")})),
        }
    }
}

async fn github() -> (MockServer, FakeGithub) {
    let server = MockServer::start().await;
    let fake = FakeGithub::new();
    Mock::given(wiremock::matchers::any())
        .respond_with(fake.clone())
        .mount(&server)
        .await;
    (server, fake)
}

fn ctx(server: &MockServer) -> GithubContext {
    GithubContext {
        token: Some("tok123".into()),
        repo: "acme/kernels".into(),
        api_url: server.uri(),
        graphql_url: format!("{}/graphql", server.uri()),
        run_id: Some("555".into()),
        run_attempt: Some("1".into()),
        ..Default::default()
    }
}

/// A publisher whose waits are recorded instead of slept.
fn publisher(server: &MockServer) -> (Publisher, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let record = waits.clone();
    let sleep: SleepFn = Arc::new(move |d| {
        record.lock().unwrap().push(d);
        Box::pin(async {})
    });
    let p = Publisher::new(&ctx(server))
        .unwrap()
        .with_retry(RetryPolicy {
            max_attempts: 4,
            ..RetryPolicy::default()
        })
        .with_sleep(sleep);
    (p, waits)
}

fn row(i: usize, kind: OutcomeKind, findings: u32, message: &str) -> KernelRow {
    let path = format!("kernels/{i:03}_kernel_with_a_long_descriptive_name.py");
    let mut row = KernelRow::new(
        &path,
        format!("level1/{i}_Problem.py"),
        Backend::Cuda,
        Precision::Fp32,
        Change::Added,
        OutcomeSummary::new(kind, message),
    );
    row.annotate_line = Some(12);
    row.findings = (1..=findings)
        .map(|l| Finding {
            file: path.clone(),
            line: l,
            column: 5,
            end_line: l,
            end_column: 9,
            rule: "torch-fallback".into(),
            severity: Severity::Error,
            message: format!("finding {l}: {message}"),
        })
        .collect();
    row.verdict = if findings > 0 || kind != OutcomeKind::Correct {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    row
}

fn report(rows: Vec<KernelRow>) -> Report {
    let mut r = Report::new(RunInfo {
        repo: "acme/kernels".into(),
        pr_number: Some(7),
        head_sha: HEAD.into(),
        complete: true,
        ..Default::default()
    });
    r.kernels = rows;
    r.finalize();
    r
}

// ---------------------------------------------------------------------------------------------
// Stuck checks

#[tokio::test]
async fn a_summary_over_65535_bytes_is_cut_at_a_row_and_github_accepts_it() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    // Multi-byte text: a cut by characters would still be over GitHub's byte limit.
    let msg = "значения не совпадают — максимальная разница ".repeat(4);
    let r = report(
        (0..200)
            .map(|i| row(i, OutcomeKind::Incorrect, 0, &msg))
            .collect(),
    );
    let full = render_summary(&r);
    assert!(full.len() > 65_535, "the test needs an oversized summary");
    let done = p.publish(&r, None).await.unwrap();
    assert!(matches!(done, Published::Done { .. }), "{done:?}");
    let st = fake.state();
    assert!(st.violations.is_empty(), "{:?}", st.violations);
    let run = &st.check_runs[0];
    assert_eq!(
        (run.status.as_str(), run.conclusion.as_deref()),
        ("completed", Some("failure"))
    );
    assert!(run.summary.len() <= 65_535);
    assert!(
        (run.summary.contains("not shown") || run.summary.contains("omitted for length"))
            && run.summary.contains("kernelgate-report"),
        "the cut points at the full report"
    );
    // The cut is between table rows: every table line is a whole row.
    for line in run.summary.lines().filter(|l| l.starts_with("| ")) {
        assert!(line.ends_with(" |"), "a row was cut: {line}");
    }
    assert_eq!(run.annotations, 200, "one annotation per failing row");
}

#[tokio::test]
async fn the_double_answers_422_like_github_for_an_oversized_summary() {
    // Proves the limits above are enforced: a body GitHub would refuse is refused here.
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    let id = p.start_check_run(HEAD).await.unwrap();
    let client = reqwest_like_patch(&server, id, &"é".repeat(40_000)).await;
    assert_eq!(client, 422);
    assert_eq!(fake.state().violations.len(), 1);
}

#[test]
fn the_vendored_schemas_come_from_githubs_rest_description() {
    for name in [
        "checks-create",
        "checks-update",
        "issues-create-comment",
        "issues-update-comment",
    ] {
        let path = format!("{}/tests/schemas/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let from = &v["x-vendored-from"];
        assert_eq!(from["repository"], "github/rest-api-description", "{name}");
        assert_eq!(
            from["path"], "descriptions/api.github.com/api.github.com.json",
            "{name}"
        );
        let commit = from["commit"].as_str().unwrap_or_default();
        assert!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}: commit {commit:?}"
        );
        assert!(
            v["$comment"]
                .as_str()
                .is_some_and(|c| c.contains("scripts/vendor-github-schemas.py")),
            "{name}"
        );
    }
}

#[test]
fn the_vendored_schemas_refuse_bodies_github_refuses() {
    let ok = |name: &str, body: Value| {
        let errors: Vec<String> = schema(name)
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{name} refused {body}: {errors:?}");
    };
    let bad = |name: &str, body: Value| {
        assert!(!schema(name).is_valid(&body), "{name} accepted {body}");
    };
    let annotation = json!({"path": "kernels/a.py", "start_line": 3, "end_line": 3,
                            "annotation_level": "failure", "message": "m"});
    ok(
        "checks-create",
        json!({"name": "kernelgate", "head_sha": HEAD, "status": "in_progress",
               "external_id": "x", "output": {"title": "t", "summary": "s",
               "annotations": [annotation.clone()]}}),
    );
    ok(
        "checks-create",
        json!({"name": "kernelgate", "head_sha": HEAD, "status": "completed", "conclusion": "neutral"}),
    );
    // Required fields, enums and GitHub's own rule: `completed` needs a conclusion.
    bad("checks-create", json!({"name": "kernelgate"}));
    bad(
        "checks-create",
        json!({"name": "k", "head_sha": HEAD, "status": "completed"}),
    );
    bad(
        "checks-create",
        json!({"name": "k", "head_sha": HEAD, "conclusion": "passed"}),
    );
    // A misspelled field fails here instead of being ignored by GitHub.
    bad(
        "checks-create",
        json!({"name": "k", "head_sha": HEAD, "conclusoin": "success"}),
    );
    let mut no_path = annotation.clone();
    no_path.as_object_mut().unwrap().remove("path");
    bad(
        "checks-update",
        json!({"output": {"title": "t", "summary": "s", "annotations": [no_path]}}),
    );
    bad(
        "checks-update",
        json!({"output": {"title": "t", "summary": "s",
               "annotations": vec![annotation.clone(); 51]}}),
    );
    bad("checks-update", json!({"output": {"title": "t"}}));
    ok(
        "checks-update",
        json!({"status": "completed", "conclusion": "failure",
               "output": {"title": "t", "summary": "s", "annotations": vec![annotation; 50]}}),
    );
    for name in ["issues-create-comment", "issues-update-comment"] {
        ok(name, json!({"body": "<!-- kernelgate -->"}));
        bad(name, json!({}));
        bad(name, json!({"body": 7}));
        bad(name, json!({"body": "x", "bdy": "y"}));
    }
}

async fn reqwest_like_patch(server: &MockServer, id: u64, summary: &str) -> u16 {
    // The raw request, outside kernelgate's cutting.
    let body = json!({"status": "completed", "conclusion": "success",
                      "output": {"title": "t", "summary": summary}});
    let client = octocrab::Octocrab::builder()
        .base_uri(server.uri())
        .unwrap()
        .build()
        .unwrap();
    let r = client
        ._patch(format!("/repos/acme/kernels/check-runs/{id}"), Some(&body))
        .await
        .unwrap();
    r.status().as_u16()
}

#[tokio::test]
async fn cancellation_completes_the_open_check_run_as_cancelled() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    let id = p.start_check_run(HEAD).await.unwrap();
    // The `if: cancelled()` step: a new process, no id passed; it finds the run by external_id.
    let (cleanup, _) = publisher(&server);
    let ended = cleanup
        .end(
            HEAD,
            None,
            Ending::Cancelled,
            "the workflow run was cancelled",
        )
        .await
        .unwrap();
    assert_eq!(ended, id);
    let st = fake.state();
    assert_eq!(st.check_runs.len(), 1, "no second check run");
    let run = &st.check_runs[0];
    assert_eq!(run.conclusion.as_deref(), Some("cancelled"));
    assert!(run.summary.contains("cancelled"), "{}", run.summary);
    assert!(st.violations.is_empty(), "{:?}", st.violations);
}

#[tokio::test]
async fn ending_a_check_run_that_was_never_opened_creates_it_completed() {
    // kernelgate failed before opening its check: the required check must not wait forever.
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    p.end(HEAD, None, Ending::Cancelled, "kernelgate could not build")
        .await
        .unwrap();
    let st = fake.state();
    assert_eq!(st.check_runs.len(), 1);
    assert_eq!(st.check_runs[0].status, "completed");
    assert_eq!(st.check_runs[0].conclusion.as_deref(), Some("cancelled"));
    assert!(st.violations.is_empty(), "{:?}", st.violations);
}

#[tokio::test]
async fn a_moved_head_completes_the_open_check_run_as_neutral_and_leaves_the_comment() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    let id = p.start_check_run(HEAD).await.unwrap();
    fake.state().pr_head = NEW_HEAD.into();
    let r = report(vec![row(1, OutcomeKind::Correct, 0, "ok")]);
    let done = p.publish(&r, None).await.unwrap();
    assert_eq!(
        done,
        Published::Superseded {
            check_run: Some(id),
            head: NEW_HEAD.into()
        }
    );
    let st = fake.state();
    let run = &st.check_runs[0];
    assert_eq!(
        (run.status.as_str(), run.conclusion.as_deref()),
        ("completed", Some("neutral"))
    );
    assert!(run.summary.contains(NEW_HEAD), "{}", run.summary);
    assert!(st.comments.is_empty(), "no comment for a superseded commit");
}

#[tokio::test]
async fn a_bad_head_sha_is_refused_before_any_request() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    for bad in [
        "abc123",
        "0123456789ABCDEF0123456789ABCDEF01234567",
        "x\n::error::",
    ] {
        let e = p.start_check_run(bad).await.unwrap_err();
        assert!(matches!(e, GithubError::BadSha { .. }), "{e:?}");
    }
    assert!(fake.state().log.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Idempotent retries and rate limits

#[tokio::test]
async fn a_5xx_after_a_successful_create_does_not_create_a_second_check_run() {
    let (server, fake) = github().await;
    fake.fault("POST", "/check-runs", FaultKind::AfterApply502);
    let (p, waits) = publisher(&server);
    let id = p.start_check_run(HEAD).await.unwrap();
    let st = fake.state();
    assert_eq!(st.check_runs.len(), 1, "{:?}", st.log);
    assert_eq!(st.check_runs[0].id, id);
    assert_eq!(
        st.log,
        [
            "POST /repos/acme/kernels/check-runs",
            &format!("GET /repos/acme/kernels/commits/{HEAD}/check-runs"),
        ]
    );
    assert_eq!(waits.lock().unwrap().as_slice(), [Duration::from_secs(2)]);
}

#[tokio::test]
async fn a_5xx_after_a_successful_comment_does_not_comment_twice() {
    let (server, fake) = github().await;
    fake.fault("POST", "/comments", FaultKind::AfterApply502);
    let (p, _) = publisher(&server);
    let action = p
        .upsert_comment(7, &format!("{STICKY_MARKER}\nresults"))
        .await
        .unwrap();
    let st = fake.state();
    assert_eq!(st.comments.len(), 1);
    assert_eq!(action, CommentAction::Created(st.comments[0].id));
}

#[tokio::test]
async fn a_secondary_rate_limit_with_retry_after_waits_exactly_that_long() {
    let (server, fake) = github().await;
    // Longer than the 90 s the old code capped it at.
    fake.fault("POST", "/check-runs", FaultKind::Secondary(Some(240)));
    let (p, waits) = publisher(&server);
    p.start_check_run(HEAD).await.unwrap();
    assert_eq!(waits.lock().unwrap().as_slice(), [Duration::from_secs(240)]);
    assert_eq!(fake.state().check_runs.len(), 1);
}

#[tokio::test]
async fn a_secondary_rate_limit_without_retry_after_waits_at_least_a_minute_and_growing() {
    let (server, fake) = github().await;
    fake.fault("GET", "/comments", FaultKind::Secondary(None));
    fake.fault("GET", "/comments", FaultKind::Secondary(None));
    let (p, waits) = publisher(&server);
    p.upsert_comment(7, STICKY_MARKER).await.unwrap();
    let w = waits.lock().unwrap().clone();
    assert_eq!(w.len(), 2);
    assert!(w[0] >= Duration::from_secs(60) && w[1] > w[0], "{w:?}");
}

#[tokio::test]
async fn an_exhausted_primary_rate_limit_waits_until_the_reset() {
    let (server, fake) = github().await;
    fake.fault("GET", "/pulls/", FaultKind::Primary(300));
    let (p, waits) = publisher(&server);
    assert_eq!(p.pr_head_sha(7).await.unwrap(), HEAD);
    let w = waits.lock().unwrap()[0];
    assert!(
        (Duration::from_secs(295)..=Duration::from_secs(305)).contains(&w),
        "{w:?}"
    );
}

#[tokio::test]
async fn a_rate_limit_longer_than_max_wait_is_reported_not_slept() {
    let (server, fake) = github().await;
    fake.fault("POST", "/check-runs", FaultKind::Secondary(Some(7200)));
    let (p, waits) = publisher(&server);
    let e = p.start_check_run(HEAD).await.unwrap_err();
    assert!(
        matches!(e, GithubError::RateLimited { wait_s: 7200, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("7200"), "{e}");
    assert!(waits.lock().unwrap().is_empty());
}

#[tokio::test]
async fn persistent_5xx_gives_up_after_max_attempts_with_growing_backoff() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("PATCH"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let (p, waits) = publisher(&server);
    let e = p
        .finish_check_run(3, Ending::Cancelled, "x")
        .await
        .unwrap_err();
    assert!(
        matches!(e, GithubError::GaveUp { attempts: 4, .. }),
        "{e:?}"
    );
    assert_eq!(
        waits.lock().unwrap().as_slice(),
        [2, 4, 8].map(Duration::from_secs)
    );
}

#[tokio::test]
async fn a_request_that_hangs_times_out_and_is_retried() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"head": {"sha": HEAD}}))
                .set_delay(Duration::from_secs(5)),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(wiremock::matchers::method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"head": {"sha": HEAD}})))
        .mount(&server)
        .await;
    let (p, waits) = publisher(&server);
    let p = p.with_retry(RetryPolicy {
        max_attempts: 3,
        timeout: Duration::from_millis(300),
        ..RetryPolicy::default()
    });
    let started = std::time::Instant::now();
    assert_eq!(p.pr_head_sha(7).await.unwrap(), HEAD);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the timeout did not fire"
    );
    assert_eq!(waits.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn forbidden_names_the_missing_permission_without_retrying() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"message": "Resource not accessible by integration"})),
        )
        .mount(&server)
        .await;
    let (p, waits) = publisher(&server);
    let e = p.start_check_run(HEAD).await.unwrap_err();
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
    assert!(
        e.to_string()
            .contains("Resource not accessible by integration"),
        "{e}"
    );
    assert!(
        waits.lock().unwrap().is_empty(),
        "a plain 403 is not retried"
    );
}

// ---------------------------------------------------------------------------------------------
// The sticky comment

fn seed_comment(fake: &FakeGithub, body: &str, login: &str, minimized: bool) -> u64 {
    let mut st = fake.state();
    st.next_id += 1;
    let id = st.next_id;
    st.comments.push(Comment {
        id,
        body: body.into(),
        login: login.into(),
        kind: if login.ends_with("[bot]") {
            "Bot"
        } else {
            "User"
        },
        minimized,
    });
    id
}

#[tokio::test]
async fn a_foreign_bot_comment_with_our_marker_is_not_taken_over() {
    let (server, fake) = github().await;
    let foreign = seed_comment(
        &fake,
        &format!("{STICKY_MARKER}\nforged"),
        "other-app[bot]",
        false,
    );
    let pasted = seed_comment(&fake, &format!("{STICKY_MARKER}\nfake"), "mallory", false);
    let (p, _) = publisher(&server);
    let action = p
        .upsert_comment(7, &format!("{STICKY_MARKER}\nours"))
        .await
        .unwrap();
    let st = fake.state();
    assert!(matches!(action, CommentAction::Created(id) if id != foreign && id != pasted));
    assert!(st
        .comments
        .iter()
        .any(|c| c.id == foreign && c.body.ends_with("forged")));
    assert!(st
        .comments
        .iter()
        .any(|c| c.id == pasted && c.body.ends_with("fake")));
}

#[tokio::test]
async fn a_minimised_comment_of_ours_is_left_alone_and_a_new_one_made() {
    let (server, fake) = github().await;
    let hidden = seed_comment(
        &fake,
        &format!("{STICKY_MARKER}\nold"),
        "github-actions[bot]",
        true,
    );
    let (p, _) = publisher(&server);
    let action = p
        .upsert_comment(7, &format!("{STICKY_MARKER}\nnew"))
        .await
        .unwrap();
    assert!(
        matches!(action, CommentAction::Created(id) if id != hidden),
        "{action:?}"
    );
    // The next run updates the new, visible one.
    let again = p
        .upsert_comment(7, &format!("{STICKY_MARKER}\nnewer"))
        .await
        .unwrap();
    assert_eq!(
        again,
        CommentAction::Updated(match action {
            CommentAction::Created(id) => id,
            _ => unreachable!(),
        })
    );
    assert_eq!(fake.state().comments.len(), 2);
}

#[tokio::test]
async fn a_user_token_finds_its_own_comment_instead_of_adding_one_each_run() {
    let (server, fake) = github().await;
    {
        let mut st = fake.state();
        st.user = Some("alice".into());
        st.poster = "alice".into();
    }
    let (p, _) = publisher(&server);
    assert!(matches!(
        p.upsert_comment(7, &format!("{STICKY_MARKER}\nrun 1"))
            .await
            .unwrap(),
        CommentAction::Created(_)
    ));
    let (p2, _) = publisher(&server);
    assert!(matches!(
        p2.upsert_comment(7, &format!("{STICKY_MARKER}\nrun 2"))
            .await
            .unwrap(),
        CommentAction::Updated(_)
    ));
    let st = fake.state();
    assert_eq!(st.comments.len(), 1);
    assert!(st.comments[0].body.ends_with("run 2"));
    assert!(st.log.iter().any(|l| l == "GET /user"));
}

#[tokio::test]
async fn two_gates_on_one_pull_request_keep_their_own_check_and_comment() {
    let (server, fake) = github().await;
    let r = report(vec![row(1, OutcomeKind::Correct, 0, "ok")]);
    for name in ["kernelgate (H100)", "kernelgate (MI300X)"] {
        let (p, _) = publisher(&server);
        let p = p.with_check_name(name, &ctx(&server));
        p.publish(&r, None).await.unwrap();
        p.publish(&r, None).await.unwrap();
    }
    let st = fake.state();
    let names: Vec<&str> = st.check_runs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["kernelgate (H100)", "kernelgate (MI300X)"]);
    assert_eq!(st.comments.len(), 2);
    assert!(st.comments[0]
        .body
        .starts_with(&sticky_marker("kernelgate (H100)")));
    assert!(st.comments[1]
        .body
        .starts_with(&sticky_marker("kernelgate (MI300X)")));
    assert_ne!(sticky_marker("kernelgate (H100)"), STICKY_MARKER);
    assert!(st.violations.is_empty(), "{:?}", st.violations);
}

// ---------------------------------------------------------------------------------------------
// Whole reports

#[tokio::test]
async fn a_200_kernel_report_publishes_with_every_request_within_githubs_limits() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    let long = "x".repeat(70_000);
    let rows: Vec<KernelRow> = (0..200)
        .map(|i| match i % 4 {
            0 => row(i, OutcomeKind::Correct, 0, "ok"),
            1 => row(i, OutcomeKind::Incorrect, 2, "max abs diff 0.5"),
            2 => row(i, OutcomeKind::RuntimeError, 0, &long),
            _ => row(i, OutcomeKind::Correct, 1, "<details>@everyone"),
        })
        .collect();
    let r = report(rows);
    let expected_annotations = check_run::annotations(&r).len();
    assert!(expected_annotations > 200);
    let done = p.publish(&r, None).await.unwrap();
    assert!(
        matches!(
            done,
            Published::Done {
                comment: Some(_),
                ..
            }
        ),
        "{done:?}"
    );
    let st = fake.state();
    assert!(st.violations.is_empty(), "{:?}", st.violations);
    assert_eq!(st.check_runs.len(), 1);
    assert_eq!(st.check_runs[0].annotations, expected_annotations);
    assert_eq!(st.comments.len(), 1);
    let patches = st
        .log
        .iter()
        .filter(|l| l.starts_with("PATCH /repos/acme/kernels/check-runs/"))
        .count();
    assert_eq!(patches, expected_annotations.div_ceil(50));
}

#[tokio::test]
async fn an_unverified_fork_report_is_published_neutral_never_success() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    let p = p.unverified(true);
    let r = report(vec![row(1, OutcomeKind::Correct, 0, "ok")]);
    assert_eq!(check_run::conclusion(&r), "success");
    p.publish(&r, None).await.unwrap();
    let st = fake.state();
    let run = &st.check_runs[0];
    assert_eq!(run.conclusion.as_deref(), Some("neutral"));
    assert_eq!(run.name, "kernelgate", "the check name stays");
    assert!(
        run.title.contains(UNVERIFIED) && run.summary.contains("/kernelgate"),
        "{run:?}"
    );
    // The sticky comment says so too, under its headline: its table is no verdict.
    assert_eq!(st.comments.len(), 1);
    let body = &st.comments[0].body;
    assert!(
        body.contains(&format!("> [!NOTE]\n> {UNVERIFIED}")),
        "{body}"
    );
    assert!(st.violations.is_empty(), "{:?}", st.violations);
}

#[tokio::test]
async fn a_failing_fork_report_stays_a_failure() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    let r = report(vec![row(1, OutcomeKind::Incorrect, 0, "wrong")]);
    p.unverified(true).publish(&r, None).await.unwrap();
    assert_eq!(
        fake.state().check_runs[0].conclusion.as_deref(),
        Some("failure")
    );
}

#[tokio::test]
async fn publish_completes_the_check_run_this_run_opened() {
    let (server, fake) = github().await;
    let (p, _) = publisher(&server);
    let opened = p.start_check_run(HEAD).await.unwrap();
    let r = report(vec![row(1, OutcomeKind::Correct, 0, "ok")]);
    // A later step, a new process: it finds the check run by external_id.
    let (later, _) = publisher(&server);
    // What it did comes back from GitHub's answers: the action's check-run-url and comment-id.
    let comment = match later.publish(&r, None).await.unwrap() {
        Published::Done {
            check_run,
            check_run_url,
            comment,
        } => {
            assert_eq!(check_run, opened);
            assert_eq!(
                check_run_url.as_deref(),
                Some(format!("https://github.com/acme/kernels/runs/{opened}").as_str())
            );
            comment.expect("a pull request gets the comment")
        }
        other => panic!("{other:?}"),
    };
    let st = fake.state();
    assert_eq!(comment, CommentAction::Created(st.comments[0].id));
    assert_eq!(st.check_runs.len(), 1);
    assert_eq!(st.check_runs[0].conclusion.as_deref(), Some("success"));
    assert!(st.comments[0].body.starts_with(STICKY_MARKER));
    assert_eq!(st.comments[0].body, render_comment(&r));
}

// ---------------------------------------------------------------------------------------------
// Drift issues

#[tokio::test]
async fn a_drift_issue_is_opened_once_per_series_and_updated_after() {
    let (server, fake) = github().await;
    // Someone else's issue with the same marker is not ours to edit.
    fake.state().issues.push(Issue {
        number: 1,
        title: "copied marker".into(),
        body: "<!-- kernelgate-drift: a -->\nby hand".into(),
        login: "someone".into(),
        labels: vec![DRIFT_LABEL.into()],
    });
    let (p, _) = publisher(&server);
    let a = p
        .upsert_issue("<!-- kernelgate-drift: a -->", "drift a", "10% slower")
        .await
        .unwrap();
    let b = p
        .upsert_issue("<!-- kernelgate-drift: b -->", "drift b", "6% slower")
        .await
        .unwrap();
    let a_again = p
        .upsert_issue("<!-- kernelgate-drift: a -->", "drift a", "12% slower")
        .await
        .unwrap();
    let CommentAction::Created(na) = a else {
        panic!("{a:?}")
    };
    assert!(matches!(b, CommentAction::Created(nb) if nb != na));
    assert_eq!(a_again, CommentAction::Updated(na));
    let st = fake.state();
    assert!(st.violations.is_empty(), "{:?}", st.violations);
    assert_eq!(st.issues.len(), 3);
    let ours = st.issues.iter().find(|i| i.number == na).unwrap();
    assert!(ours.body.ends_with("12% slower"), "{}", ours.body);
    assert_eq!(ours.labels, vec![DRIFT_LABEL.to_string()]);
    assert_eq!(st.issues[0].body, "<!-- kernelgate-drift: a -->\nby hand");
}

#[tokio::test]
async fn a_lost_answer_to_opening_a_drift_issue_does_not_open_a_second() {
    let (server, fake) = github().await;
    fake.fault("POST", "/issues", FaultKind::AfterApply502);
    let (p, _) = publisher(&server);
    let done = p
        .upsert_issue("<!-- kernelgate-drift: a -->", "drift a", "slower")
        .await
        .unwrap();
    assert!(matches!(done, CommentAction::Created(_)), "{done:?}");
    assert_eq!(fake.state().issues.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// When a report gets the comment

#[tokio::test]
async fn the_comment_mode_decides_which_reports_get_the_sticky_comment() {
    let passing = report(vec![row(1, OutcomeKind::Correct, 0, "ok")]);
    let failing = report(vec![row(1, OutcomeKind::Incorrect, 0, "wrong")]);
    let empty = report(vec![]);
    assert_eq!(empty.summary.verdict, Verdict::Pass);
    for (mode, rep, commented) in [
        (CommentMode::Always, &empty, true),
        (CommentMode::Never, &failing, false),
        (CommentMode::OnChange, &empty, false),
        (CommentMode::OnChange, &passing, true),
        (CommentMode::OnRegression, &passing, false),
        (CommentMode::OnRegression, &failing, true),
    ] {
        let (server, fake) = github().await;
        let (p, _) = publisher(&server);
        let published = p.with_comment_mode(mode).publish(rep, None).await.unwrap();
        let st = fake.state();
        // The check run is completed in every mode.
        assert_eq!(st.check_runs.len(), 1, "{mode:?}");
        assert_eq!(st.comments.len(), usize::from(commented), "{mode:?}");
        match published {
            Published::Done { comment, .. } => assert_eq!(comment.is_some(), commented, "{mode:?}"),
            other => panic!("{mode:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_comment_the_gate_already_wrote_is_updated_in_every_mode_but_never() {
    let passing = report(vec![row(1, OutcomeKind::Correct, 0, "ok")]);
    for (mode, updated) in [
        (CommentMode::OnRegression, true),
        (CommentMode::OnChange, true),
        (CommentMode::Never, false),
    ] {
        let (server, fake) = github().await;
        let (p, _) = publisher(&server);
        // An earlier run's failure.
        p.upsert_comment(7, &format!("{STICKY_MARKER}\nan earlier failure"))
            .await
            .unwrap();
        let empty = report(vec![]);
        let rep = if mode == CommentMode::OnChange {
            &empty
        } else {
            &passing
        };
        p.with_comment_mode(mode).publish(rep, None).await.unwrap();
        let st = fake.state();
        assert_eq!(st.comments.len(), 1, "{mode:?}");
        assert_eq!(
            !st.comments[0].body.contains("an earlier failure"),
            updated,
            "{mode:?}: {}",
            st.comments[0].body
        );
    }
}

#[test]
fn comment_modes_read_as_the_action_writes_them() {
    for name in CommentMode::NAMES {
        let mode: CommentMode = name.parse().unwrap();
        assert_eq!(mode.as_str(), name);
    }
    let err = "sometimes".parse::<CommentMode>().unwrap_err();
    assert!(
        err.contains("always, on-change, on-regression, never"),
        "{err}"
    );
}

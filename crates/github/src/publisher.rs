//! REST calls through octocrab, with our own retries and GitHub's rate-limit rules, idempotent
//! creates, and permission-naming errors on 403.
//!
//! - 5xx and transport errors are retried with exponential backoff; a POST is never simply sent
//!   again: the check run (by `external_id`) or the comment (by marker and author) it may have
//!   created is looked up first.
//! - Rate limits follow GitHub's guidance: `retry-after` is waited out; with
//!   `x-ratelimit-remaining: 0`, until `x-ratelimit-reset`; a secondary limit without either
//!   waits at least a minute, growing. A wait longer than [`RetryPolicy::max_wait`] is an error
//!   that says when to try again.
//! - Every request has a timeout. Waits go through an injectable sleep so tests do not sleep.

use crate::context::valid_sha;
use crate::{GithubContext, GithubError, CHECK_NAME};
use kernelgate_report::{check_run, render_comment, Report, STICKY_MARKER};
use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde_json::{json, Value};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Tries per request, the first included.
    pub max_attempts: u32,
    /// First backoff after a 5xx or a transport error; doubles each time.
    pub base_delay: Duration,
    /// Least wait after a secondary rate limit that names no time (GitHub: at least a minute).
    pub secondary_min: Duration,
    /// Longest single wait accepted; a rate limit asking for more is reported, not waited out.
    pub max_wait: Duration,
    /// Connect, read and write timeout of each request.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(2),
            secondary_min: Duration::from_secs(60),
            max_wait: Duration::from_secs(15 * 60),
            timeout: Duration::from_secs(30),
        }
    }
}

/// How the publisher waits; tests inject one that records and returns at once.
pub type SleepFn = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentAction {
    Created(u64),
    Updated(u64),
}

impl CommentAction {
    /// The comment's id, whether it was created or updated.
    pub fn id(self) -> u64 {
        match self {
            CommentAction::Created(id) | CommentAction::Updated(id) => id,
        }
    }
}

/// When a report gets the sticky comment (the action's `comment` input). A comment this gate
/// already wrote is updated in every mode but `Never`, so a pull request never keeps a stale
/// verdict (a fixed failure still showing as failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommentMode {
    /// Every report (the default).
    #[default]
    Always,
    /// Only a report with something judged: a kernel row, a changed reference problem or a
    /// changed setting.
    OnChange,
    /// Only a report that does not pass (a failure or a warning to act on).
    OnRegression,
    /// Never: the check run, job summary and SARIF still say everything.
    Never,
}

impl CommentMode {
    pub const NAMES: [&'static str; 4] = ["always", "on-change", "on-regression", "never"];

    pub fn as_str(self) -> &'static str {
        match self {
            CommentMode::Always => "always",
            CommentMode::OnChange => "on-change",
            CommentMode::OnRegression => "on-regression",
            CommentMode::Never => "never",
        }
    }

    /// Whether `report` is commented on; `existing`: this gate's comment is already there.
    pub fn wants(self, report: &Report, existing: bool) -> bool {
        match self {
            CommentMode::Always => true,
            CommentMode::Never => false,
            CommentMode::OnChange => {
                existing
                    || !report.kernels.is_empty()
                    || !report.reference_changes.is_empty()
                    || !report.config_changes.is_empty()
            }
            CommentMode::OnRegression => {
                existing || report.summary.verdict != kernelgate_report::Verdict::Pass
            }
        }
    }
}

impl std::str::FromStr for CommentMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(CommentMode::Always),
            "on-change" => Ok(CommentMode::OnChange),
            "on-regression" => Ok(CommentMode::OnRegression),
            "never" => Ok(CommentMode::Never),
            other => Err(format!(
                "unknown comment mode `{other}`: use one of {}",
                CommentMode::NAMES.join(", ")
            )),
        }
    }
}

/// What publishing did: [`Publisher::publish`] completes (`Done`) or stands down
/// (`Superseded`); `kernelgate publish` also opens and ends check runs, and writes the payloads
/// as files without a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The check run was opened `in_progress` on `head`.
    Opened { check_run: u64, head: String },
    /// The check run was completed without a report.
    Ended { check_run: u64, ending: Ending },
    /// The check run was completed with the report; the comment, when there is a PR.
    Done {
        check_run: u64,
        /// The check run's page (`html_url` of GitHub's answer), when GitHub gave one.
        check_run_url: Option<String>,
        comment: Option<CommentAction>,
    },
    /// The PR's head moved past the report's commit: the check run opened for the report (if
    /// any) was completed as `neutral` with that reason; the comment was left alone.
    Superseded {
        check_run: Option<u64>,
        head: String,
    },
    /// No GitHub API: the payloads were written as these files.
    Written { files: Vec<PathBuf> },
}

/// Conclusions of a check run that ends without a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The job was cancelled or kernelgate failed before it had a report: not a pass.
    Cancelled,
    /// Nothing is wrong with the kernels, but there is no verdict here (a moved head, an
    /// unverified fork run).
    Neutral,
    /// The pull request changes no kernel.
    Success,
}

impl Ending {
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Cancelled => "cancelled",
            Ending::Neutral => "neutral",
            Ending::Success => "success",
        }
    }
}

/// What a fork's own `pull_request` run publishes instead of `success`: its report may be forged.
pub const UNVERIFIED: &str =
    "unverified: this run is the fork's own workflow; a maintainer can run /kernelgate";

pub struct Publisher {
    client: Octocrab,
    graphql: Octocrab,
    graphql_path: String,
    owner: String,
    name: String,
    retry: RetryPolicy,
    sleep: SleepFn,
    check_name: String,
    external_id: String,
    /// Login of an installation token, which cannot ask `GET /user` who it is.
    bot_login: String,
    login: Mutex<Option<String>>,
    /// A fork's own run: `success` is published as `neutral` ([`UNVERIFIED`]).
    unverified: bool,
    /// When a report gets the sticky comment.
    comment_mode: CommentMode,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Post,
    Patch,
}

/// What a POST may already have created when its answer was lost.
enum Created<'a> {
    CheckRun { head_sha: &'a str },
    Comment { pr: u64 },
    Issue { marker: &'a str },
}

enum Attempt {
    Done(Value),
    Retry { wait: Duration, why: String },
    Fail(GithubError),
}

const CHECKS: &str = "checks: write";
const PULL_REQUESTS: &str = "pull-requests: write";
const ISSUES: &str = "issues: write";
/// The label of the performance-drift issues: one open issue per series carries it.
pub const DRIFT_LABEL: &str = "kernelgate-drift";
/// The login `GITHUB_TOKEN` posts as.
pub const ACTIONS_BOT: &str = "github-actions[bot]";

/// The hidden marker of the sticky comment for a check name: one comment per gate, so several
/// gates (one per GPU type) coexist on a PR.
pub fn sticky_marker(check_name: &str) -> String {
    if check_name == CHECK_NAME {
        STICKY_MARKER.to_string()
    } else {
        let safe: String = check_name
            .chars()
            .filter(|c| {
                c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.' | '/' | '(' | ')')
            })
            .collect();
        format!("<!-- kernelgate:sticky:{safe} -->")
    }
}

impl Publisher {
    /// Must be called inside a tokio runtime. Fails without a token or repository.
    pub fn new(ctx: &GithubContext) -> Result<Self, GithubError> {
        let token = ctx.token.clone().ok_or_else(|| {
            GithubError::Config(
                "GITHUB_TOKEN is not set; publish with `--publish files` or give the job a token"
                    .into(),
            )
        })?;
        let (owner, name) = ctx.owner_and_name()?;
        let retry = RetryPolicy::default();
        let client = build_client(&token, &ctx.api_url, retry.timeout)?;
        let graphql = build_client(&token, &ctx.graphql_url, retry.timeout)?;
        let graphql_path = url_path(&ctx.graphql_url);
        Ok(Publisher {
            client,
            graphql,
            graphql_path,
            owner: owner.into(),
            name: name.into(),
            retry,
            sleep: Arc::new(|d| Box::pin(tokio::time::sleep(d))),
            check_name: CHECK_NAME.into(),
            external_id: ctx.external_id(CHECK_NAME),
            bot_login: ACTIONS_BOT.into(),
            login: Mutex::new(None),
            unverified: false,
            comment_mode: CommentMode::Always,
        })
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Wait with `sleep` instead of the clock (tests).
    pub fn with_sleep(mut self, sleep: SleepFn) -> Self {
        self.sleep = sleep;
        self
    }

    /// Publish under another check name (and its own sticky comment); `external_id` follows.
    pub fn with_check_name(mut self, name: &str, ctx: &GithubContext) -> Self {
        self.check_name = name.to_string();
        self.external_id = ctx.external_id(name);
        self
    }

    /// The login the token posts as when it is an installation token (default
    /// `github-actions[bot]`, the workflow's `GITHUB_TOKEN`; an app's is `<slug>[bot]`).
    /// When a report gets the sticky comment ([`CommentMode`]).
    pub fn with_comment_mode(mut self, mode: CommentMode) -> Self {
        self.comment_mode = mode;
        self
    }

    pub fn with_bot_login(mut self, login: &str) -> Self {
        self.bot_login = login.to_string();
        self
    }

    /// A fork's own run: a passing report is published as `neutral`, never `success`.
    pub fn unverified(mut self, yes: bool) -> Self {
        self.unverified = yes;
        self
    }

    pub fn check_name(&self) -> &str {
        &self.check_name
    }

    fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}/{rest}", self.owner, self.name)
    }

    /// Open the check run as `in_progress`; returns its id. A retried create finds the check
    /// run the first attempt made (by `external_id`) instead of making a second.
    pub async fn start_check_run(&self, head_sha: &str) -> Result<u64, GithubError> {
        check_sha(head_sha)?;
        let body = check_run::create_payload(&self.check_name, head_sha, &self.external_id);
        let v = self
            .send(
                Method::Post,
                &self.repo_path("check-runs"),
                Some(&body),
                "create a check run",
                CHECKS,
                Some(Created::CheckRun { head_sha }),
            )
            .await?;
        v["id"].as_u64().ok_or_else(|| GithubError::Api {
            action: "create a check run".into(),
            status: 200,
            message: "the answer has no check run id".into(),
        })
    }

    /// The check run this run attempt opened on `head_sha` (matched by `external_id`).
    pub async fn find_check_run(&self, head_sha: &str) -> Result<Option<u64>, GithubError> {
        check_sha(head_sha)?;
        let path = self.repo_path(&format!(
            "commits/{head_sha}/check-runs?check_name={}&filter=all&per_page=100",
            query_escape(&self.check_name)
        ));
        let v = self
            .send(
                Method::Get,
                &path,
                None,
                "list the commit's check runs",
                "checks: read",
                None,
            )
            .await?;
        Ok(v["check_runs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["external_id"].as_str() == Some(self.external_id.as_str()))
            .and_then(|c| c["id"].as_u64()))
    }

    /// Complete the check run with the report's conclusion; annotations go 50 per request.
    /// Returns the check run's page (`html_url`), when GitHub's answer has one.
    pub async fn complete_check_run(
        &self,
        id: u64,
        report: &Report,
        summary_md: &str,
    ) -> Result<Option<String>, GithubError> {
        let path = self.repo_path(&format!("check-runs/{id}"));
        let mut url = None;
        for mut body in check_run::complete_payloads(report, summary_md) {
            if self.unverified && body["conclusion"] == "success" {
                body["conclusion"] = json!("neutral");
                let title = body["output"]["title"].as_str().unwrap_or_default();
                body["output"]["title"] = json!(check_run::truncate(
                    &format!("{title} ({UNVERIFIED})"),
                    check_run::ANNOTATION_TITLE_LIMIT
                ));
            }
            if self.unverified {
                let summary = body["output"]["summary"].as_str().unwrap_or_default();
                body["output"]["summary"] = json!(check_run::truncate(
                    &format!("> [!NOTE]\n> {UNVERIFIED}.\n\n{summary}"),
                    check_run::OUTPUT_LIMIT
                ));
            }
            let v = self
                .send(
                    Method::Patch,
                    &path,
                    Some(&body),
                    "update the check run",
                    CHECKS,
                    None,
                )
                .await?;
            url = v["html_url"].as_str().map(str::to_string).or(url);
        }
        Ok(url)
    }

    /// Complete a check run without a report: `ending` with `reason` (said in the title's
    /// words and as the summary).
    pub async fn finish_check_run(
        &self,
        id: u64,
        ending: Ending,
        reason: &str,
    ) -> Result<(), GithubError> {
        let title = match ending {
            Ending::Cancelled => format!("kernelgate did not finish: {}", first_line(reason)),
            Ending::Neutral => format!("no verdict: {}", first_line(reason)),
            Ending::Success => first_line(reason).to_string(),
        };
        let body = check_run::finish_payload(ending.as_str(), &title, reason);
        self.send(
            Method::Patch,
            &self.repo_path(&format!("check-runs/{id}")),
            Some(&body),
            "complete the check run",
            CHECKS,
            None,
        )
        .await?;
        Ok(())
    }

    /// The login this token posts as: `GET /user` for a user token; an installation token
    /// (which `GET /user` refuses) posts as [`with_bot_login`](Self::with_bot_login)'s login.
    pub async fn own_login(&self) -> Result<String, GithubError> {
        if let Some(login) = self.login.lock().expect("login lock").clone() {
            return Ok(login);
        }
        let login = match self
            .send(
                Method::Get,
                "/user",
                None,
                "read the token's user",
                "",
                None,
            )
            .await
        {
            Ok(v) => v["login"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| self.bot_login.clone()),
            Err(GithubError::Forbidden { .. })
            | Err(GithubError::Api {
                status: 401 | 403 | 404,
                ..
            }) => self.bot_login.clone(),
            Err(e) => return Err(e),
        };
        *self.login.lock().expect("login lock") = Some(login.clone());
        Ok(login)
    }

    /// The sticky comment this token wrote on `pr` for this check name and that nobody
    /// minimised (all pages).
    pub async fn find_comment(&self, pr: u64) -> Result<Option<u64>, GithubError> {
        let login = self.own_login().await?;
        let marker = sticky_marker(&self.check_name);
        let mut ours: Vec<(u64, String)> = Vec::new();
        let mut page = 1;
        loop {
            let path = self.repo_path(&format!("issues/{pr}/comments?per_page=100&page={page}"));
            let v = self
                .send(
                    Method::Get,
                    &path,
                    None,
                    "list the PR's comments",
                    PULL_REQUESTS,
                    None,
                )
                .await?;
            let comments = v.as_array().cloned().unwrap_or_default();
            for c in &comments {
                let marked = c["body"]
                    .as_str()
                    .is_some_and(|b| b.lines().next().map(str::trim) == Some(marker.as_str()));
                let by_us = c["user"]["login"].as_str() == Some(login.as_str());
                if let (true, true, Some(id)) = (marked, by_us, c["id"].as_u64()) {
                    ours.push((id, c["node_id"].as_str().unwrap_or_default().to_string()));
                }
            }
            if comments.len() < 100 {
                break;
            }
            page += 1;
        }
        if ours.is_empty() {
            return Ok(None);
        }
        let minimized = self.minimized(&ours).await;
        Ok(ours
            .into_iter()
            .find(|(_, node)| !minimized.contains(node))
            .map(|(id, _)| id))
    }

    /// Node ids among `comments` that someone minimised (hid). REST does not say; GraphQL does.
    /// When GraphQL cannot be asked, none are taken as minimised.
    async fn minimized(&self, comments: &[(u64, String)]) -> Vec<String> {
        let ids: Vec<&str> = comments
            .iter()
            .map(|(_, n)| n.as_str())
            .filter(|n| !n.is_empty())
            .collect();
        if ids.is_empty() {
            return vec![];
        }
        let query = json!({
            "query": "query($ids: [ID!]!) { nodes(ids: $ids) { ... on IssueComment { id isMinimized } } }",
            "variables": {"ids": ids},
        });
        let answer = self
            .graphql
            ._post(self.graphql_path.as_str(), Some(&query))
            .await;
        let text = match answer {
            Ok(r) if r.status().is_success() => {
                self.graphql.body_to_string(r).await.unwrap_or_default()
            }
            _ => {
                eprintln!("kernelgate: cannot ask GitHub which comments are minimised; updating the newest of ours");
                return vec![];
            }
        };
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        v["data"]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["isMinimized"].as_bool() == Some(true))
            .filter_map(|n| n["id"].as_str().map(str::to_string))
            .collect()
    }

    /// Update this gate's sticky comment, or create it. `body` carries the default marker; it is
    /// replaced by this check name's marker.
    pub async fn upsert_comment(&self, pr: u64, body: &str) -> Result<CommentAction, GithubError> {
        let marker = sticky_marker(&self.check_name);
        let body = match body.strip_prefix(STICKY_MARKER) {
            Some(rest) => format!("{marker}{rest}"),
            None => format!("{marker}\n{body}"),
        };
        let payload = json!({ "body": body });
        match self.find_comment(pr).await? {
            Some(id) => {
                let path = self.repo_path(&format!("issues/comments/{id}"));
                self.send(
                    Method::Patch,
                    &path,
                    Some(&payload),
                    "update the PR comment",
                    PULL_REQUESTS,
                    None,
                )
                .await?;
                Ok(CommentAction::Updated(id))
            }
            None => {
                let path = self.repo_path(&format!("issues/{pr}/comments"));
                let v = self
                    .send(
                        Method::Post,
                        &path,
                        Some(&payload),
                        "comment on the PR",
                        PULL_REQUESTS,
                        Some(Created::Comment { pr }),
                    )
                    .await?;
                Ok(CommentAction::Created(v["id"].as_u64().unwrap_or(0)))
            }
        }
    }

    /// The open drift issue this token opened whose body starts with `marker` (all pages).
    pub async fn find_issue(&self, marker: &str) -> Result<Option<u64>, GithubError> {
        let login = self.own_login().await?;
        let mut page = 1;
        loop {
            let path = self.repo_path(&format!(
                "issues?state=open&labels={DRIFT_LABEL}&per_page=100&page={page}"
            ));
            let v = self
                .send(
                    Method::Get,
                    &path,
                    None,
                    "list the drift issues",
                    ISSUES,
                    None,
                )
                .await?;
            let issues = v.as_array().cloned().unwrap_or_default();
            for i in &issues {
                let marked = i["body"]
                    .as_str()
                    .is_some_and(|b| b.lines().next().map(str::trim) == Some(marker));
                let by_us = i["user"]["login"].as_str() == Some(login.as_str());
                if let (true, true, Some(n)) = (marked, by_us, i["number"].as_u64()) {
                    return Ok(Some(n));
                }
            }
            if issues.len() < 100 {
                return Ok(None);
            }
            page += 1;
        }
    }

    /// Opens the drift issue of one series, or updates the one already open (`marker`, an HTML
    /// comment naming the series, is its first line): never more than one per series.
    pub async fn upsert_issue(
        &self,
        marker: &str,
        title: &str,
        body: &str,
    ) -> Result<CommentAction, GithubError> {
        let body = format!("{marker}\n{body}");
        match self.find_issue(marker).await? {
            Some(n) => {
                let path = self.repo_path(&format!("issues/{n}"));
                let payload = json!({ "title": title, "body": body });
                self.send(
                    Method::Patch,
                    &path,
                    Some(&payload),
                    "update the drift issue",
                    ISSUES,
                    None,
                )
                .await?;
                Ok(CommentAction::Updated(n))
            }
            None => {
                let path = self.repo_path("issues");
                let payload = json!({ "title": title, "body": body, "labels": [DRIFT_LABEL] });
                let v = self
                    .send(
                        Method::Post,
                        &path,
                        Some(&payload),
                        "open the drift issue",
                        ISSUES,
                        Some(Created::Issue { marker }),
                    )
                    .await?;
                Ok(CommentAction::Created(
                    v["number"].as_u64().or(v["id"].as_u64()).unwrap_or(0),
                ))
            }
        }
    }

    /// The current head commit of a pull request.
    pub async fn pr_head_sha(&self, pr: u64) -> Result<String, GithubError> {
        let v = self
            .send(
                Method::Get,
                &self.repo_path(&format!("pulls/{pr}")),
                None,
                "read the pull request",
                "pull-requests: read",
                None,
            )
            .await?;
        Ok(v["head"]["sha"].as_str().unwrap_or_default().to_string())
    }

    /// Everything at once for a finished report: the check run (`check_run_id`, else the one
    /// this run attempt opened, else a new one) completed with annotations, and the sticky
    /// comment when there is a PR. When the PR's head has moved past the report's commit, the
    /// check run is completed as `neutral` and the comment is left alone.
    pub async fn publish(
        &self,
        report: &Report,
        check_run_id: Option<u64>,
    ) -> Result<Published, GithubError> {
        let sha = &report.run.head_sha;
        check_sha(sha)?;
        let existing = match check_run_id {
            Some(id) => Some(id),
            None => self.find_check_run(sha).await?,
        };
        if let Some(pr) = report.run.pr_number {
            let head = self.pr_head_sha(pr).await?;
            if head != *sha {
                if let Some(id) = existing {
                    let reason = format!(
                        "pull request #{pr} moved on to {head} while this run evaluated {sha}; the run for the new head reports instead"
                    );
                    self.finish_check_run(id, Ending::Neutral, &reason).await?;
                }
                return Ok(Published::Superseded {
                    check_run: existing,
                    head,
                });
            }
        }
        let summary = kernelgate_report::render_summary(report);
        let id = match existing {
            Some(id) => id,
            None => self.start_check_run(sha).await?,
        };
        let check_run_url = self.complete_check_run(id, report, &summary).await?;
        let comment = match report.run.pr_number {
            Some(pr) if !self.comment_wanted(report, pr).await? => None,
            Some(pr) => {
                let body = if self.unverified {
                    kernelgate_report::render_unverified_comment(report, UNVERIFIED)
                } else {
                    render_comment(report)
                };
                Some(self.upsert_comment(pr, &body).await?)
            }
            None => None,
        };
        Ok(Published::Done {
            check_run: id,
            check_run_url,
            comment,
        })
    }

    /// Whether `report` gets the sticky comment on `pr` by this publisher's [`CommentMode`]:
    /// asks GitHub for an existing comment only when the report alone does not decide.
    async fn comment_wanted(&self, report: &Report, pr: u64) -> Result<bool, GithubError> {
        let mode = self.comment_mode;
        // Whether a comment exists matters only where the report alone says no and an
        // existing comment says yes (`on-change`, `on-regression`).
        if mode.wants(report, false) == mode.wants(report, true) {
            return Ok(mode.wants(report, false));
        }
        Ok(self.find_comment(pr).await?.is_some())
    }

    /// End the check run of this run attempt on `head_sha` without a report (cancelled job,
    /// error, no kernel changed): the one given or found by `external_id`, else a new one, so
    /// a required check never waits forever.
    pub async fn end(
        &self,
        head_sha: &str,
        check_run_id: Option<u64>,
        ending: Ending,
        reason: &str,
    ) -> Result<u64, GithubError> {
        let id = match check_run_id {
            Some(id) => id,
            None => match self.find_check_run(head_sha).await? {
                Some(id) => id,
                None => self.start_check_run(head_sha).await?,
            },
        };
        self.finish_check_run(id, ending, reason).await?;
        Ok(id)
    }

    /// What a POST may have created before its answer was lost, found again.
    fn find_created<'a>(
        &'a self,
        created: &'a Created<'a>,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Value>, GithubError>> + 'a>> {
        Box::pin(async move {
            let id = match created {
                Created::CheckRun { head_sha } => self.find_check_run(head_sha).await?,
                Created::Comment { pr } => self.find_comment(*pr).await?,
                Created::Issue { marker } => self.find_issue(marker).await?,
            };
            Ok(id.map(|id| json!({ "id": id })))
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        action: &str,
        permission: &'static str,
        created: Option<Created<'_>>,
    ) -> Result<Value, GithubError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self
                .attempt(method, path, body, action, permission, attempt)
                .await
            {
                Attempt::Done(v) => return Ok(v),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry { wait, why } => {
                    if attempt >= self.retry.max_attempts {
                        return Err(GithubError::GaveUp {
                            action: action.into(),
                            attempts: attempt,
                            last: why,
                        });
                    }
                    if wait > self.retry.max_wait {
                        return Err(GithubError::RateLimited {
                            action: action.into(),
                            wait_s: wait.as_secs(),
                        });
                    }
                    eprintln!(
                        "kernelgate: {why} to {action}; retrying in {}s (attempt {attempt} of {})",
                        wait.as_secs_f64().round(),
                        self.retry.max_attempts
                    );
                    (self.sleep)(wait).await;
                    // The lost answer may hide a success: never create twice.
                    if let Some(created) = &created {
                        if let Some(found) = self.find_created(created).await? {
                            eprintln!("kernelgate: the earlier attempt to {action} had succeeded; using its result");
                            return Ok(found);
                        }
                    }
                }
            }
        }
    }

    async fn attempt(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        action: &str,
        permission: &'static str,
        attempt: u32,
    ) -> Attempt {
        let backoff = self
            .retry
            .base_delay
            .saturating_mul(1 << (attempt - 1).min(16));
        let timeout = self.retry.timeout;
        let timed_out = || Attempt::Retry {
            wait: backoff,
            why: format!("GitHub did not answer within {:.1}s", timeout.as_secs_f64()),
        };
        let request = async {
            match method {
                Method::Get => self.client._get(path).await,
                Method::Post => self.client._post(path, body).await,
                Method::Patch => self.client._patch(path, body).await,
            }
        };
        let response = match tokio::time::timeout(timeout, request).await {
            Ok(Ok(r)) => r,
            Ok(Err(error)) => {
                return Attempt::Retry {
                    wait: backoff,
                    why: format!("cannot reach GitHub ({error})"),
                }
            }
            Err(_) => return timed_out(),
        };
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_string())
        };
        let retry_after = header("retry-after").and_then(|v| v.parse::<u64>().ok());
        let exhausted = header("x-ratelimit-remaining").as_deref() == Some("0");
        let reset = header("x-ratelimit-reset").and_then(|v| v.parse::<u64>().ok());
        let text = match tokio::time::timeout(timeout, self.client.body_to_string(response)).await {
            Ok(Ok(t)) => t,
            Ok(Err(error)) => {
                return Attempt::Retry {
                    wait: backoff,
                    why: format!("the answer was cut off ({error})"),
                }
            }
            Err(_) => return timed_out(),
        };
        if (200..300).contains(&status) {
            return Attempt::Done(serde_json::from_str(&text).unwrap_or(Value::Null));
        }
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        let mentions_limit = message.to_ascii_lowercase().contains("rate limit");
        if status == 403 || status == 429 {
            let wait = if let Some(s) = retry_after {
                Some(Duration::from_secs(s))
            } else if exhausted {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                // One second past the reset: GitHub's clock and ours differ a little.
                Some(Duration::from_secs(
                    reset.map(|r| r.saturating_sub(now) + 1).unwrap_or(60),
                ))
            } else if mentions_limit || status == 429 {
                Some(
                    self.retry
                        .secondary_min
                        .saturating_mul(1 << (attempt - 1).min(4)),
                )
            } else {
                None
            };
            if let Some(wait) = wait {
                return Attempt::Retry {
                    wait,
                    why: format!("GitHub rate-limited the request ({status}: {message})"),
                };
            }
        }
        if status >= 500 {
            return Attempt::Retry {
                wait: backoff,
                why: format!("GitHub answered {status}"),
            };
        }
        if status == 403 && !permission.is_empty() {
            return Attempt::Fail(GithubError::Forbidden {
                action: action.into(),
                permission,
                message,
            });
        }
        Attempt::Fail(GithubError::Api {
            action: action.into(),
            status,
            message,
        })
    }
}

fn build_client(token: &str, url: &str, timeout: Duration) -> Result<Octocrab, GithubError> {
    Octocrab::builder()
        .personal_token(token.to_string())
        .add_retry_config(RetryConfig::None)
        .set_connect_timeout(Some(timeout))
        .set_read_timeout(Some(timeout))
        .set_write_timeout(Some(timeout))
        .base_uri(url)
        .map_err(|error| GithubError::Http {
            action: format!("use the GitHub URL `{url}`"),
            error,
        })?
        .build()
        .map_err(|error| GithubError::Http {
            action: "build the GitHub client".into(),
            error,
        })
}

fn check_sha(sha: &str) -> Result<(), GithubError> {
    if valid_sha(sha) {
        Ok(())
    } else {
        Err(GithubError::BadSha {
            sha: sha
                .chars()
                .take(80)
                .collect::<String>()
                .escape_debug()
                .to_string(),
        })
    }
}

/// The path of an absolute URL (`https://host/api/graphql` → `/api/graphql`).
fn url_path(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    match rest.find('/') {
        Some(i) => rest[i..].to_string(),
        None => "/".into(),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// Percent-encode a query value (check names may hold spaces and parentheses).
fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

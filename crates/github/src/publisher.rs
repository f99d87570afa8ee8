//! REST calls through octocrab, with our own retries (5xx, secondary rate limits) and
//! permission-naming errors on 403.

use crate::{GithubContext, GithubError, CHECK_NAME};
use kernelgate_report::{check_run, render_comment, Report, STICKY_MARKER};
use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde_json::{json, Value};
use std::time::Duration;

/// How often and how patiently to retry 5xx answers and secondary rate limits.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(90),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentAction {
    Created(u64),
    Updated(u64),
}

pub struct Publisher {
    client: Octocrab,
    owner: String,
    name: String,
    retry: RetryPolicy,
}

#[derive(Clone, Copy)]
enum Method {
    Get,
    Post,
    Patch,
}

const CHECKS: &str = "checks: write";
const PULL_REQUESTS: &str = "pull-requests: write";

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
        let client = Octocrab::builder()
            .personal_token(token)
            .add_retry_config(RetryConfig::None)
            .base_uri(ctx.api_url.as_str())
            .map_err(|error| GithubError::Http {
                action: format!("use GITHUB_API_URL `{}`", ctx.api_url),
                error,
            })?
            .build()
            .map_err(|error| GithubError::Http {
                action: "build the GitHub client".into(),
                error,
            })?;
        Ok(Publisher {
            client,
            owner: owner.into(),
            name: name.into(),
            retry: RetryPolicy::default(),
        })
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}/{rest}", self.owner, self.name)
    }

    /// Open the check run as `in_progress`; returns its id.
    pub async fn start_check_run(&self, head_sha: &str) -> Result<u64, GithubError> {
        let body = check_run::create_payload(CHECK_NAME, head_sha);
        let v = self
            .send(
                Method::Post,
                &self.repo_path("check-runs"),
                Some(&body),
                "create a check run",
                CHECKS,
            )
            .await?;
        v["id"].as_u64().ok_or_else(|| GithubError::Api {
            action: "create a check run".into(),
            status: 200,
            message: "the answer has no check run id".into(),
        })
    }

    /// Complete the check run with the report's conclusion; annotations go 50 per request.
    pub async fn complete_check_run(
        &self,
        id: u64,
        report: &Report,
        summary_md: &str,
    ) -> Result<(), GithubError> {
        let path = self.repo_path(&format!("check-runs/{id}"));
        for body in check_run::complete_payloads(report, summary_md) {
            self.send(
                Method::Patch,
                &path,
                Some(&body),
                "update the check run",
                CHECKS,
            )
            .await?;
        }
        Ok(())
    }

    /// Find the comment carrying the sticky marker (all pages) and update it, or create one.
    pub async fn upsert_comment(&self, pr: u64, body: &str) -> Result<CommentAction, GithubError> {
        let mut page = 1;
        let existing = loop {
            let path = self.repo_path(&format!("issues/{pr}/comments?per_page=100&page={page}"));
            let v = self
                .send(
                    Method::Get,
                    &path,
                    None,
                    "list the PR's comments",
                    PULL_REQUESTS,
                )
                .await?;
            let comments = v.as_array().cloned().unwrap_or_default();
            if let Some(c) = comments.iter().find(|c| is_ours(c)) {
                break c["id"].as_u64();
            }
            if comments.len() < 100 {
                break None;
            }
            page += 1;
        };
        let payload = json!({ "body": body });
        match existing {
            Some(id) => {
                let path = self.repo_path(&format!("issues/comments/{id}"));
                self.send(
                    Method::Patch,
                    &path,
                    Some(&payload),
                    "update the PR comment",
                    PULL_REQUESTS,
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
                    )
                    .await?;
                Ok(CommentAction::Created(v["id"].as_u64().unwrap_or(0)))
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
            )
            .await?;
        Ok(v["head"]["sha"].as_str().unwrap_or_default().to_string())
    }

    /// Everything at once for a finished report: check run (created unless `check_run_id`
    /// is given), completion with annotations, and the sticky comment when there is a PR.
    pub async fn publish(
        &self,
        report: &Report,
        check_run_id: Option<u64>,
    ) -> Result<Option<CommentAction>, GithubError> {
        let summary = kernelgate_report::render_summary(report);
        let id = match check_run_id {
            Some(id) => id,
            None => self.start_check_run(&report.run.head_sha).await?,
        };
        self.complete_check_run(id, report, &summary).await?;
        match report.run.pr_number {
            Some(pr) => Ok(Some(
                self.upsert_comment(pr, &render_comment(report)).await?,
            )),
            None => Ok(None),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        action: &str,
        permission: &'static str,
    ) -> Result<Value, GithubError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= self.retry.max_attempts;
            let response = match method {
                Method::Get => self.client._get(path).await,
                Method::Post => self.client._post(path, body).await,
                Method::Patch => self.client._patch(path, body).await,
            };
            let response = match response {
                Ok(r) => r,
                Err(error) if last => {
                    return Err(GithubError::Http {
                        action: action.into(),
                        error,
                    })
                }
                Err(error) => {
                    let delay = self.backoff(attempt, None);
                    eprintln!("kernelgate: cannot reach GitHub to {action} ({error}); retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            let status = response.status().as_u16();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let retry_after = header("retry-after").and_then(|v| v.trim().parse::<u64>().ok());
            let exhausted = header("x-ratelimit-remaining").as_deref() == Some("0");
            let text = self
                .client
                .body_to_string(response)
                .await
                .unwrap_or_default();
            if (200..300).contains(&status) {
                return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
            }
            let rate_limited = (status == 403 || status == 429)
                && (retry_after.is_some()
                    || exhausted
                    || text.to_ascii_lowercase().contains("rate limit"));
            if (status >= 500 || rate_limited) && !last {
                let delay = self.backoff(attempt, retry_after);
                eprintln!(
                    "kernelgate: GitHub answered {status} to {action}; retrying in {delay:?} (attempt {attempt} of {})",
                    self.retry.max_attempts
                );
                tokio::time::sleep(delay).await;
                continue;
            }
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            if status == 403 && !rate_limited {
                return Err(GithubError::Forbidden {
                    action: action.into(),
                    permission,
                    message,
                });
            }
            return Err(GithubError::Api {
                action: action.into(),
                status,
                message,
            });
        }
    }

    fn backoff(&self, attempt: u32, retry_after: Option<u64>) -> Duration {
        let exp = self
            .retry
            .base_delay
            .saturating_mul(1 << (attempt - 1).min(16));
        retry_after
            .map(Duration::from_secs)
            .unwrap_or(exp)
            .min(self.retry.max_delay)
    }
}

/// A comment of ours carries the marker and was written by a bot (the workflow's token posts
/// as `github-actions[bot]`): anyone can paste the marker into a comment of their own, and
/// kernelgate must not take that comment over.
fn is_ours(comment: &Value) -> bool {
    let marked = comment["body"]
        .as_str()
        .is_some_and(|b| b.contains(STICKY_MARKER));
    let by_bot = match comment.get("user") {
        Some(user) if !user.is_null() => user["type"].as_str() == Some("Bot"),
        _ => true,
    };
    marked && by_bot
}

//! What a GitHub Actions job knows about itself: token, repository, pull request, files. The
//! one reader of the Actions environment and event payload; `pr`, `publish` and `merge` use it.

use crate::GithubError;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Clone, Default)]
pub struct GithubContext {
    /// `GITHUB_TOKEN`; `None` means local mode (publish to files).
    pub token: Option<String>,
    /// `owner/name` from `GITHUB_REPOSITORY`.
    pub repo: String,
    pub pr_number: Option<u64>,
    pub base_sha: Option<String>,
    pub head_sha: Option<String>,
    /// The pull request's labels (a reviewer's acknowledgement, `kernelgate:ack-speedup`).
    pub labels: Vec<String>,
    /// Running inside GitHub Actions (`GITHUB_ACTIONS=true`): `::warning` lines, folded groups.
    pub actions: bool,
    /// `GITHUB_API_URL`, default `https://api.github.com` (GitHub Enterprise Server sets its own).
    pub api_url: String,
    /// `GITHUB_GRAPHQL_URL`; default derived from `api_url` (`…/api/v3` → `…/api/graphql`).
    pub graphql_url: String,
    /// `GITHUB_SERVER_URL`, default `https://github.com`.
    pub server_url: String,
    /// `GITHUB_RUN_ID` and `GITHUB_RUN_ATTEMPT`: they make the check run's `external_id`, by
    /// which every step of one run attempt finds the check run that run opened.
    pub run_id: Option<String>,
    pub run_attempt: Option<String>,
    pub step_summary: Option<PathBuf>,
    pub output: Option<PathBuf>,
    /// `GITHUB_SERVER_URL` + `/owner/name/actions/runs/GITHUB_RUN_ID`, when known.
    pub run_url: Option<String>,
}

impl std::fmt::Debug for GithubContext {
    // Never print the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubContext")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("repo", &self.repo)
            .field("pr_number", &self.pr_number)
            .field("base_sha", &self.base_sha)
            .field("head_sha", &self.head_sha)
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

impl GithubContext {
    pub fn from_env() -> Result<Self, GithubError> {
        Self::from_vars(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// Same as [`from_env`](Self::from_env) with the variables from `var` (for tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, GithubError> {
        let mut ctx = GithubContext {
            token: var("GITHUB_TOKEN"),
            repo: var("GITHUB_REPOSITORY").unwrap_or_default(),
            api_url: var("GITHUB_API_URL")
                .unwrap_or_else(|| "https://api.github.com".into())
                .trim_end_matches('/')
                .to_string(),
            server_url: var("GITHUB_SERVER_URL")
                .unwrap_or_else(|| "https://github.com".into())
                .trim_end_matches('/')
                .to_string(),
            actions: var("GITHUB_ACTIONS").as_deref() == Some("true"),
            run_id: var("GITHUB_RUN_ID"),
            run_attempt: var("GITHUB_RUN_ATTEMPT"),
            step_summary: var("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            output: var("GITHUB_OUTPUT").map(PathBuf::from),
            ..Default::default()
        };
        ctx.graphql_url = var("GITHUB_GRAPHQL_URL").unwrap_or_else(|| graphql_url(&ctx.api_url));
        if let Some(path) = var("GITHUB_EVENT_PATH") {
            ctx.read_event(Path::new(&path))?;
        }
        if let Some(run) = &ctx.run_id {
            if !ctx.repo.is_empty() {
                ctx.run_url = Some(format!(
                    "{}/{}/actions/runs/{run}",
                    ctx.server_url, ctx.repo
                ));
            }
        }
        Ok(ctx)
    }

    /// Reads the event payload at `path` ([`apply_event`](Self::apply_event)).
    fn read_event(&mut self, path: &Path) -> Result<(), GithubError> {
        let text = std::fs::read_to_string(path).map_err(|e| GithubError::Event {
            path: path.to_path_buf(),
            message: format!("cannot read it: {e}"),
        })?;
        let event: Value = serde_json::from_str(&text).map_err(|e| GithubError::Event {
            path: path.to_path_buf(),
            message: format!("not JSON: {e}"),
        })?;
        self.apply_event(&event);
        Ok(())
    }

    /// Pull request number, SHAs and labels from a `pull_request` / `pull_request_target`
    /// payload; the number of an `issue_comment` on a pull request; the head and pull request of
    /// a `workflow_run`; the previous and new tips of a `push`. The repository, when the
    /// environment did not name it.
    pub fn apply_event(&mut self, event: &Value) {
        let s = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        if let Some(pr) = event.get("pull_request") {
            self.pr_number = pr["number"].as_u64().or_else(|| event["number"].as_u64());
            self.base_sha = s(&pr["base"]["sha"]);
            self.head_sha = s(&pr["head"]["sha"]);
            self.labels = pr["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| s(&l["name"]))
                .collect();
        } else if event["issue"].get("pull_request").is_some() {
            // `issue_comment` on a pull request: the number only; the head is passed explicitly.
            self.pr_number = event["issue"]["number"].as_u64();
        } else if let Some(run) = event.get("workflow_run") {
            self.head_sha = s(&run["head_sha"]);
            if let Some(pr) = run["pull_requests"].as_array().and_then(|a| a.first()) {
                self.pr_number = pr["number"].as_u64();
                self.base_sha = s(&pr["base"]["sha"]);
            }
        } else if let (Some(before), Some(after)) = (s(&event["before"]), s(&event["after"])) {
            // A push: compare with the previous tip unless it is the all-zero "new branch" id.
            if before.bytes().any(|b| b != b'0') {
                self.base_sha = Some(before);
            }
            self.head_sha = Some(after);
        }
        if self.repo.is_empty() {
            self.repo = s(&event["repository"]["full_name"]).unwrap_or_default();
        }
    }

    /// The check run's `external_id` for this run attempt and check name.
    pub fn external_id(&self, check_name: &str) -> String {
        format!(
            "kernelgate:{}:{}:{check_name}",
            self.run_id.as_deref().unwrap_or("local"),
            self.run_attempt.as_deref().unwrap_or("1")
        )
    }

    /// True when there is a token to publish with.
    pub fn can_publish(&self) -> bool {
        self.token.is_some() && self.repo.contains('/')
    }

    pub(crate) fn owner_and_name(&self) -> Result<(&str, &str), GithubError> {
        self.repo.split_once('/').filter(|(o, n)| !o.is_empty() && !n.is_empty()).ok_or_else(|| {
            GithubError::Config(format!(
                "GITHUB_REPOSITORY is `{}`, expected `owner/name`; run inside GitHub Actions or set it",
                self.repo
            ))
        })
    }
}

/// GitHub's GraphQL endpoint next to a REST endpoint: `https://api.github.com/graphql`, or
/// `https://HOST/api/graphql` for GitHub Enterprise Server's `https://HOST/api/v3`.
pub(crate) fn graphql_url(api_url: &str) -> String {
    match api_url.strip_suffix("/v3") {
        Some(base) => format!("{base}/graphql"),
        None => format!("{api_url}/graphql"),
    }
}

/// A commit SHA as GitHub writes it: 40 lowercase hex digits. Anything else is refused before it
/// reaches a URL, a request body or a log line.
pub fn valid_sha(sha: &str) -> bool {
    sha.len() == 40 && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn ctx(vars: &[(&str, &str)]) -> Result<GithubContext, GithubError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        GithubContext::from_vars(|k| map.get(k).cloned())
    }

    #[test]
    fn reads_pull_request_event() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("event.json");
        std::fs::write(&ev, r#"{"number": 5, "pull_request": {"number": 5, "base": {"sha": "b1"}, "head": {"sha": "h1"}}}"#).unwrap();
        let c = ctx(&[
            ("GITHUB_TOKEN", "t"),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_EVENT_PATH", ev.to_str().unwrap()),
        ])
        .unwrap();
        assert_eq!(
            (c.pr_number, c.base_sha.as_deref(), c.head_sha.as_deref()),
            (Some(5), Some("b1"), Some("h1"))
        );
        assert_eq!(c.api_url, "https://api.github.com");
        assert!(c.can_publish());
        assert!(
            !format!("{c:?}").contains("\"t\""),
            "token must not be printed"
        );
    }

    #[test]
    fn reads_workflow_run_event() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("event.json");
        std::fs::write(&ev, r#"{"workflow_run": {"head_sha": "h2", "pull_requests": [{"number": 9, "base": {"sha": "b2"}}]}}"#).unwrap();
        let c = ctx(&[
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_EVENT_PATH", ev.to_str().unwrap()),
        ])
        .unwrap();
        assert_eq!(
            (c.pr_number, c.base_sha.as_deref(), c.head_sha.as_deref()),
            (Some(9), Some("b2"), Some("h2"))
        );
        assert!(!c.can_publish(), "no token: local mode");
    }

    #[test]
    fn enterprise_server_urls_come_from_the_environment() {
        let c = ctx(&[
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_API_URL", "https://ghe.example/api/v3"),
            ("GITHUB_SERVER_URL", "https://ghe.example"),
            ("GITHUB_RUN_ID", "77"),
            ("GITHUB_RUN_ATTEMPT", "2"),
        ])
        .unwrap();
        assert_eq!(c.graphql_url, "https://ghe.example/api/graphql");
        assert_eq!(
            c.run_url.as_deref(),
            Some("https://ghe.example/o/r/actions/runs/77")
        );
        assert_eq!(c.external_id("kernelgate"), "kernelgate:77:2:kernelgate");
        let d = ctx(&[("GITHUB_REPOSITORY", "o/r")]).unwrap();
        assert_eq!(d.graphql_url, "https://api.github.com/graphql");
    }

    #[test]
    fn only_full_lowercase_shas_are_valid() {
        assert!(valid_sha(&"a1".repeat(20)));
        let bad = [
            String::new(),
            "abc123".into(),
            "A1".repeat(20),
            format!("{}\n::set-output", "a".repeat(40)),
            "g".repeat(40),
        ];
        for b in &bad {
            assert!(!valid_sha(b), "{b:?}");
        }
    }

    #[test]
    fn pull_request_labels_actions_and_push_events() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("event.json");
        std::fs::write(
            &ev,
            r#"{"pull_request": {"number": 7, "base": {"sha": "aaa"}, "head": {"sha": "bbb"},
                "labels": [{"name": "kernelgate:ack-speedup"}, {"name": "perf"}]},
                "repository": {"full_name": "org/kernels"}}"#,
        )
        .unwrap();
        let c = ctx(&[
            ("GITHUB_EVENT_PATH", ev.to_str().unwrap()),
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_RUN_ID", "42"),
        ])
        .unwrap();
        assert_eq!(c.labels, ["kernelgate:ack-speedup", "perf"]);
        assert!(c.actions);
        assert_eq!(c.repo, "org/kernels", "the payload names the repository");
        assert_eq!(
            c.run_url.as_deref(),
            Some("https://github.com/org/kernels/actions/runs/42")
        );
        let mut push = GithubContext::default();
        push.apply_event(&serde_json::json!({"before": "0000000", "after": "ccc"}));
        assert_eq!(
            (push.base_sha, push.head_sha.as_deref()),
            (None, Some("ccc"))
        );
    }

    #[test]
    fn bad_event_file_names_the_file() {
        let e = ctx(&[("GITHUB_EVENT_PATH", "/nonexistent/event.json")]).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/event.json"), "{e}");
    }
}

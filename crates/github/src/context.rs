//! What a GitHub Actions job knows about itself: token, repository, pull request, files.

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
    /// `GITHUB_API_URL`, default `https://api.github.com`.
    pub api_url: String,
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
            api_url: var("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into()),
            step_summary: var("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            output: var("GITHUB_OUTPUT").map(PathBuf::from),
            ..Default::default()
        };
        if let (Some(server), Some(run)) = (var("GITHUB_SERVER_URL"), var("GITHUB_RUN_ID")) {
            if !ctx.repo.is_empty() {
                ctx.run_url = Some(format!("{server}/{}/actions/runs/{run}", ctx.repo));
            }
        }
        if let Some(path) = var("GITHUB_EVENT_PATH") {
            ctx.read_event(Path::new(&path))?;
        }
        Ok(ctx)
    }

    /// Pull request number and SHAs from a `pull_request`, `pull_request_target` or
    /// `workflow_run` event payload.
    fn read_event(&mut self, path: &Path) -> Result<(), GithubError> {
        let text = std::fs::read_to_string(path).map_err(|e| GithubError::Event {
            path: path.to_path_buf(),
            message: format!("cannot read it: {e}"),
        })?;
        let event: Value = serde_json::from_str(&text).map_err(|e| GithubError::Event {
            path: path.to_path_buf(),
            message: format!("not JSON: {e}"),
        })?;
        let sha = |v: &Value| v.as_str().map(str::to_string);
        if let Some(pr) = event.get("pull_request") {
            self.pr_number = pr["number"].as_u64().or_else(|| event["number"].as_u64());
            self.base_sha = sha(&pr["base"]["sha"]);
            self.head_sha = sha(&pr["head"]["sha"]);
        } else if let Some(run) = event.get("workflow_run") {
            self.head_sha = sha(&run["head_sha"]);
            if let Some(pr) = run["pull_requests"].as_array().and_then(|a| a.first()) {
                self.pr_number = pr["number"].as_u64();
                self.base_sha = sha(&pr["base"]["sha"]);
            }
        }
        Ok(())
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
    fn bad_event_file_names_the_file() {
        let e = ctx(&[("GITHUB_EVENT_PATH", "/nonexistent/event.json")]).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/event.json"), "{e}");
    }
}

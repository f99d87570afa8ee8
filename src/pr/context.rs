//! Defaults from the GitHub Actions environment, so `kernelgate pr` alone works in a workflow.

use serde_json::Value;
use std::path::Path;

/// What the environment tells us about the pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrContext {
    pub base: Option<String>,
    pub head: Option<String>,
    pub number: Option<u64>,
    /// `owner/name`.
    pub repository: Option<String>,
    pub labels: Vec<String>,
    /// Running inside GitHub Actions (`GITHUB_ACTIONS=true`).
    pub actions: bool,
    /// Link to this workflow run, for "full report in the artifact" pointers.
    pub run_url: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("cannot read the GitHub event payload {path} (from GITHUB_EVENT_PATH): {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the GitHub event payload {path} is not valid JSON: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
}

impl PrContext {
    /// Reads the process environment.
    pub fn from_env() -> Result<PrContext, ContextError> {
        PrContext::from_vars(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// Reads through `var` (testable without touching the process environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<PrContext, ContextError> {
        let mut ctx = PrContext {
            repository: var("GITHUB_REPOSITORY"),
            actions: var("GITHUB_ACTIONS").as_deref() == Some("true"),
            ..PrContext::default()
        };
        if let (Some(server), Some(repo), Some(id)) = (
            var("GITHUB_SERVER_URL"),
            &ctx.repository,
            var("GITHUB_RUN_ID"),
        ) {
            ctx.run_url = Some(format!("{server}/{repo}/actions/runs/{id}"));
        }
        if let Some(path) = var("GITHUB_EVENT_PATH") {
            let text =
                std::fs::read_to_string(Path::new(&path)).map_err(|source| ContextError::Read {
                    path: path.clone(),
                    source,
                })?;
            let event: Value = serde_json::from_str(&text)
                .map_err(|source| ContextError::Json { path, source })?;
            ctx.apply_event(&event);
        }
        Ok(ctx)
    }

    /// Takes base, head, number and labels from a `pull_request` / `pull_request_target` payload,
    /// and the before/after commits of a `push`.
    pub fn apply_event(&mut self, event: &Value) {
        let s = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        if let Some(pr) = event.get("pull_request") {
            self.base = s(&pr["base"]["sha"]);
            self.head = s(&pr["head"]["sha"]);
            self.number = pr["number"].as_u64().or_else(|| event["number"].as_u64());
            self.labels = pr["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| s(&l["name"]))
                .collect();
        } else if event["issue"].get("pull_request").is_some() {
            // An `issue_comment` on a pull request (the trusted `/kernelgate` run): base and
            // head come from --base/--head, the number from the issue.
            self.number = event["issue"]["number"].as_u64();
        } else if let (Some(before), Some(after)) = (s(&event["before"]), s(&event["after"])) {
            // A push: compare with the previous tip unless it is the all-zero "new branch" id.
            if before.bytes().any(|b| b != b'0') {
                self.base = Some(before);
            }
            self.head = Some(after);
        }
        if self.repository.is_none() {
            self.repository = s(&event["repository"]["full_name"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn reads_pull_request_payload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("event.json");
        std::fs::write(
            &path,
            r#"{"number": 7, "pull_request": {"number": 7, "base": {"sha": "aaa"}, "head": {"sha": "bbb"},
                "labels": [{"name": "kernelgate:ack-speedup"}, {"name": "perf"}]}}"#,
        )
        .unwrap();
        let vars: HashMap<&str, String> = [
            ("GITHUB_EVENT_PATH", path.display().to_string()),
            ("GITHUB_REPOSITORY", "org/kernels".to_string()),
            ("GITHUB_ACTIONS", "true".to_string()),
            ("GITHUB_SERVER_URL", "https://github.com".to_string()),
            ("GITHUB_RUN_ID", "42".to_string()),
        ]
        .into_iter()
        .collect();
        let ctx = PrContext::from_vars(|k| vars.get(k).cloned()).unwrap();
        assert_eq!(ctx.base.as_deref(), Some("aaa"));
        assert_eq!(ctx.head.as_deref(), Some("bbb"));
        assert_eq!(ctx.number, Some(7));
        assert_eq!(ctx.repository.as_deref(), Some("org/kernels"));
        assert_eq!(ctx.labels, vec!["kernelgate:ack-speedup", "perf"]);
        assert!(ctx.actions);
        assert_eq!(
            ctx.run_url.as_deref(),
            Some("https://github.com/org/kernels/actions/runs/42")
        );
    }

    #[test]
    fn push_payload_and_missing_file() {
        let mut ctx = PrContext::default();
        ctx.apply_event(&serde_json::json!({"before": "0000000", "after": "ccc", "repository": {"full_name": "o/r"}}));
        assert_eq!(
            (ctx.base, ctx.head.as_deref(), ctx.repository.as_deref()),
            (None, Some("ccc"), Some("o/r"))
        );
        let err = PrContext::from_vars(|k| {
            (k == "GITHUB_EVENT_PATH").then(|| "/nonexistent/event.json".to_string())
        })
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/event.json"), "{err}");
    }
}

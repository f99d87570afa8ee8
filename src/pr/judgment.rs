//! The configuration that judges a pull request, resolved in this one place for `pr`, `pr --plan`
//! and every workflow (docs/config.md, "Where the judging config comes from").
//!
//! A pull request cannot loosen its own judgment: every setting that decides how it is judged
//! (`[sandbox]`, `[policy]`, `[timing]`, `[harness]` with its Python, `[lint]`, `[defaults]`, the
//! dataset and results roots, `[history]`) comes from the trusted side: the `--trusted-config`
//! file a workflow checks out from the default branch, else the config file committed at the
//! base commit, else the defaults. Only `[kernels]` (where kernels live and which problem each
//! answers) is read from the head, so the kernels a pull request adds are found; the judging
//! side's globs still apply, so a head cannot hide a file the base calls a kernel. The head's
//! other changes are reported as a typed diff that applies after merge.

use kernelgate_model::config::CONFIG_FILE;
use kernelgate_model::{Config, ConfigError};
use kernelgate_report::{ConfigApplies, ConfigChange, ConfigSource};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::git::{Git, GitError};

/// Sections of `kernelgate.toml` that describe the repository's layout: the head's apply in its
/// own run. Every other section judges, and comes from the trusted side.
pub const LAYOUT_SECTIONS: &[&str] = &["kernels"];

/// The configuration a pull request is judged with, and what the pull request changes in it.
#[derive(Debug, Clone)]
pub struct Judgment {
    /// The commits compared, resolved to full ids.
    pub base: String,
    pub head: String,
    pub merge_base: String,
    /// The config file's path in the repository (`kernelgate.toml`, or `--config`'s).
    pub config_file: String,
    /// What judges the run: the trusted side's config, with the head's `[kernels]` (its globs
    /// added to the trusted side's).
    pub config: Config,
    /// Where the judging settings came from.
    pub source: ConfigSource,
    /// The settings the pull request changes (merge base → head) to a value other than the one
    /// judging it, sorted by key.
    pub changes: Vec<ConfigChange>,
}

#[derive(Debug, thiserror::Error)]
pub enum JudgmentError {
    #[error(transparent)]
    Git(#[from] GitError),
    /// A config file that does not parse; its message names the file (`<commit>:kernelgate.toml`
    /// for a committed one), line and column, and what to do.
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "cannot read the trusted config {}: {error}\n  help: check the default branch's \
         kernelgate.toml out there (the workflows do it into .kernelgate-trusted/), or leave \
         --trusted-config out to judge with the base commit's config",
        path.display()
    )]
    TrustedUnreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "--trusted-config {} is the pull request's own file ({path_in_repo} is tracked at the \
         head commit), which cannot judge the pull request\n  help: check the default branch's \
         kernelgate.toml out apart from the pull request (e.g. into .kernelgate-trusted/) and \
         pass that, or leave --trusted-config out to judge with the base commit's config",
        path.display()
    )]
    TrustedFromHead { path: PathBuf, path_in_repo: String },
    #[error(
        "--config {} is outside the repository {}: `kernelgate pr` reads the config file at the \
         base commit (and the head's [kernels])\n  help: give --config a path inside the \
         repository, or pass a file from outside it, such as the default branch's \
         kernelgate.toml, as --trusted-config",
        path.display(),
        repo.display()
    )]
    ConfigOutsideRepo { path: PathBuf, repo: PathBuf },
}

/// The config file's path inside the repository, `/`-separated: `kernelgate.toml`, or the file
/// `--config` names (relative to the current directory, as for every command).
pub fn config_file(repo_root: &Path, explicit: Option<&Path>) -> Result<String, JudgmentError> {
    let Some(path) = explicit else {
        return Ok(CONFIG_FILE.to_string());
    };
    inside(repo_root, path).ok_or_else(|| JudgmentError::ConfigOutsideRepo {
        path: path.to_path_buf(),
        repo: repo_root.to_path_buf(),
    })
}

/// `path` relative to `root` (`/`-separated) when it lies inside it, symbolic links resolved
/// where the path exists.
fn inside(root: &Path, path: &Path) -> Option<String> {
    let real = |p: &Path| {
        std::fs::canonicalize(p)
            .ok()
            .or_else(|| std::path::absolute(p).ok())
    };
    let root = real(root)?;
    let path = real(path)?;
    let rel = path.strip_prefix(&root).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The judgment of `head` against `base` (refs or commits): the judging config, where it came
/// from, and the head's changes to it. `trusted` is a file outside the pull request's commits
/// (the default branch's config, checked out by the workflow); it wins over the base commit's.
pub fn resolve(
    git: &Git,
    base: &str,
    head: &str,
    config_file: &str,
    trusted: Option<&Path>,
) -> Result<Judgment, JudgmentError> {
    let base = git.resolve(base)?;
    let head = git.resolve(head)?;
    let merge_base = git.merge_base(&base, &head)?;
    let at = |commit: &str| -> Result<Option<Config>, JudgmentError> {
        let Some(bytes) = git.file_at(commit, config_file)? else {
            return Ok(None);
        };
        let shown = format!("{}:{config_file}", &commit[..commit.len().min(10)]);
        Ok(Some(Config::parse(
            &String::from_utf8_lossy(&bytes),
            Path::new(&shown),
        )?))
    };

    let (judging, source) = match trusted {
        Some(path) => {
            if let Some(rel) = inside(git.root(), path) {
                if git.file_at(&head, &rel)?.is_some() {
                    return Err(JudgmentError::TrustedFromHead {
                        path: path.to_path_buf(),
                        path_in_repo: rel,
                    });
                }
            }
            let text = std::fs::read_to_string(path).map_err(|error| {
                JudgmentError::TrustedUnreadable {
                    path: path.to_path_buf(),
                    error,
                }
            })?;
            let source = ConfigSource::Trusted {
                path: path.display().to_string(),
            };
            (Config::parse(&text, path)?, source)
        }
        None => match at(&base)? {
            Some(cfg) => (
                cfg,
                ConfigSource::Base {
                    commit: base.clone(),
                    path: config_file.to_string(),
                },
            ),
            None => (
                Config::default(),
                ConfigSource::Defaults {
                    commit: base.clone(),
                    path: config_file.to_string(),
                },
            ),
        },
    };
    // The head's config must parse: its [kernels] finds this run's kernels.
    let at_head = at(&head)?.unwrap_or_default();
    // What the pull request started from; one that no longer parses (an older kernelgate's
    // keys) is compared as the judging config.
    let before = match at(&merge_base) {
        Ok(Some(cfg)) => cfg,
        Ok(None) => Config::default(),
        Err(_) => judging.clone(),
    };
    let changes = diff(&judging, &before, &at_head);

    let mut config = judging;
    config.kernels.mapping = at_head.kernels.mapping.clone();
    for glob in &at_head.kernels.globs {
        if !config.kernels.globs.contains(glob) {
            config.kernels.globs.push(glob.clone());
        }
    }
    Ok(Judgment {
        base,
        head,
        merge_base,
        config_file: config_file.to_string(),
        config,
        source,
        changes,
    })
}

/// Every setting as `section.key` → its value (JSON), the way `kernelgate.toml` spells it.
fn settings(cfg: &Config) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Ok(Value::Object(sections)) = serde_json::to_value(cfg) {
        for (section, table) in sections {
            if let Value::Object(keys) = table {
                for (key, value) in keys {
                    out.insert(format!("{section}.{key}"), value);
                }
            }
        }
    }
    out
}

/// The settings the pull request changes (`before` → `head`) to a value other than the one that
/// judges it.
pub fn diff(judging: &Config, before: &Config, head: &Config) -> Vec<ConfigChange> {
    let (judging, before) = (settings(judging), settings(before));
    settings(head)
        .into_iter()
        .filter(|(key, value)| before.get(key) != Some(value))
        .filter_map(|(key, value)| {
            let base = judging.get(&key).cloned().unwrap_or(Value::Null);
            if base == value {
                return None;
            }
            let section = key.split('.').next().unwrap_or_default();
            let applies = if LAYOUT_SECTIONS.contains(&section) {
                ConfigApplies::ThisRun
            } else {
                ConfigApplies::AfterMerge
            };
            Some(ConfigChange {
                key,
                base,
                head: value,
                applies,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_model::Condition;

    fn parse(text: &str) -> Config {
        Config::parse(text, Path::new("kernelgate.toml")).unwrap()
    }

    #[test]
    fn the_heads_judgment_settings_are_reported_and_layout_applies_now() {
        let base = parse("[timing]\nthreshold_pct = 3.0\n");
        let head = parse(
            "[timing]\nthreshold_pct = 3.0\n[sandbox]\nenabled = false\n[policy]\nfail_on = []\n\
             [kernels]\nglobs = [\"kernels/**/*.py\", \"more/*.py\"]\n",
        );
        let changes = diff(&base, &base, &head);
        let keys: Vec<(&str, ConfigApplies)> = changes
            .iter()
            .map(|c| (c.key.as_str(), c.applies))
            .collect();
        assert_eq!(
            keys,
            [
                ("kernels.globs", ConfigApplies::ThisRun),
                ("policy.fail_on", ConfigApplies::AfterMerge),
                ("sandbox.enabled", ConfigApplies::AfterMerge),
            ]
        );
        let sandbox = &changes[2];
        assert_eq!(
            (&sandbox.base, &sandbox.head),
            (&Value::Bool(true), &Value::Bool(false))
        );
        assert_eq!(changes[1].head, Value::Array(vec![]));
        assert!(changes[1]
            .base
            .as_array()
            .unwrap()
            .contains(&Value::from(Condition::Incorrect.as_str())));
    }

    #[test]
    fn only_the_pull_requests_own_changes_count() {
        // main moved the threshold on after the branch was cut: not the PR's change.
        let main = parse("[timing]\nthreshold_pct = 5.0\n");
        let before = parse("[timing]\nthreshold_pct = 2.0\n");
        assert!(diff(&main, &before, &before).is_empty());
        // The PR changes it to what main already has: nothing applies after merge.
        assert!(diff(&main, &before, &main).is_empty());
        // A deleted config returns every changed key to its default.
        let changes = diff(&before, &before, &Config::default());
        assert!(changes.is_empty(), "2.0 is the default: {changes:?}");
    }

    #[test]
    fn config_paths_are_relative_to_the_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("ci")).unwrap();
        std::fs::write(root.join("ci/kg.toml"), "").unwrap();
        assert_eq!(config_file(root, None).unwrap(), "kernelgate.toml");
        assert_eq!(
            config_file(root, Some(&root.join("ci/kg.toml"))).unwrap(),
            "ci/kg.toml"
        );
        let other = tempfile::tempdir().unwrap();
        let e = config_file(root, Some(&other.path().join("kg.toml"))).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("outside the repository"), "{msg}");
        assert!(msg.contains("help: "), "{msg}");
    }
}

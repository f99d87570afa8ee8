//! `kernelgate kernels` as library operations: every candidate kernel with its mapping
//! ([`kernels`] → [`KernelList`]), or the kernels a pull request re-evaluates and why
//! ([`changed`] → [`Changes`]). The command parses flags and prints the result's JSON or its
//! `Display`.

use crate::git::{Git, GitError};
use crate::pr::changes::{self, ChangeSet};
use crate::pr::layout::Layout;
use kernelgate_model::{discover, Config, DatasetError, Kernel, KernelError};
use std::fmt;
use std::path::Path;

/// Why the kernels could not be listed, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum KernelsError {
    #[error("loading problems from {spec}")]
    Load {
        spec: String,
        #[source]
        source: DatasetError,
    },
    #[error(transparent)]
    Git(#[from] GitError),
}

/// The kernels of the repository, and the files whose mapping failed.
#[derive(Debug)]
pub struct KernelList {
    pub kernels: Vec<Kernel>,
    pub errors: Vec<KernelError>,
}

/// Every kernel of `repo`, whose `kernelgate.toml` is `config`, mapped to its problem.
pub fn kernels(repo: &Path, config: &Config) -> Result<KernelList, KernelsError> {
    let spec = config.dataset_spec(repo);
    let problems = spec.load().map_err(|source| KernelsError::Load {
        spec: spec.to_string(),
        source,
    })?;
    let (kernels, errors) = discover(repo, config, &problems);
    Ok(KernelList { kernels, errors })
}

impl KernelList {
    pub fn to_json(&self) -> serde_json::Value {
        let errors: Vec<_> = self
            .errors
            .iter()
            .map(|e| {
                serde_json::json!({
                    "path": e.path(),
                    "line": e.line(),
                    "message": e.to_string(),
                })
            })
            .collect();
        serde_json::json!({ "kernels": self.kernels, "errors": errors })
    }
}

/// The human listing: one row per kernel, then the counts.
impl fmt::Display for KernelList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: Vec<Vec<String>> = self
            .kernels
            .iter()
            .map(|k| {
                vec![
                    k.path.display().to_string(),
                    k.problem_key.clone(),
                    k.backend.to_string(),
                    k.precision.to_string(),
                    k.mapped_by.to_string(),
                ]
            })
            .collect();
        let header = ["KERNEL", "PROBLEM", "BACKEND", "PRECISION", "MAPPED BY"];
        f.write_str(&crate::table::render(
            &header,
            rows.iter().map(Vec::as_slice),
        ))?;
        let (kernels, errors) = (self.kernels.len(), self.errors.len());
        writeln!(
            f,
            "\n{} kernel{}, {} error{}",
            kernels,
            if kernels == 1 { "" } else { "s" },
            errors,
            if errors == 1 { "" } else { "s" }
        )
    }
}

/// The change set `kernelgate pr` plans from (`kernels --changed`).
#[derive(Debug)]
pub struct Changes(pub ChangeSet);

/// The kernels changed from the merge base of `base` with `head`: a changed `.py`, a changed
/// file it is built from, or a changed problem. An unusable `base` or `head` is an error.
pub fn changed(
    repo: &Path,
    config: &Config,
    base: &str,
    head: &str,
) -> Result<Changes, KernelsError> {
    let git = Git::open(repo)?;
    let layout = Layout::from_config(config);
    Ok(Changes(changes::detect(&git, &layout, base, head, false)?))
}

impl Changes {
    /// The JSON of `kernels --changed`: whether the gate has anything to judge is `"gate"`.
    pub fn to_json(&self) -> serde_json::Value {
        let cs = &self.0;
        let kernels: Vec<_> = cs
            .kernels
            .iter()
            .map(|k| {
                serde_json::json!({
                    "path": k.path, "problem": k.problem, "status": k.status,
                    "base_path": k.base_path, "changed_sources": k.changed_sources,
                    "sources": k.sources.files, "unresolved_sources": k.sources.reasons(),
                    "mapping_error": k.mapping_error,
                })
            })
            .collect();
        let references: Vec<&str> = cs.references.iter().map(|r| r.path.as_str()).collect();
        serde_json::json!({
            "base": cs.base, "head": cs.head, "merge_base": cs.merge_base,
            "kernels": kernels, "deleted_kernels": cs.deleted_kernels,
            "reference_changes": references, "config_changed": cs.config_changed,
            "results_changed": cs.results, "gate": cs.needs_gate(),
        })
    }
}

/// The human listing: one row per kernel, whether the gate has anything to judge, then a note
/// per source that could not be resolved.
impl fmt::Display for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cs = &self.0;
        let rows: Vec<Vec<String>> = cs
            .kernels
            .iter()
            .map(|k| {
                vec![
                    k.path.clone(),
                    k.status.as_str().to_string(),
                    k.changed_sources.join(", "),
                ]
            })
            .collect();
        let header = ["KERNEL", "STATUS", "VIA"];
        f.write_str(&crate::table::render(
            &header,
            rows.iter().map(Vec::as_slice),
        ))?;
        writeln!(
            f,
            "\n{} kernel{} to evaluate; the gate {}",
            cs.kernels.len(),
            if cs.kernels.len() == 1 { "" } else { "s" },
            if cs.needs_gate() {
                "has something to judge"
            } else {
                "has nothing to judge (no kernel, source, problem, config or result changed)"
            }
        )?;
        for k in &cs.kernels {
            for why in k.sources.reasons() {
                writeln!(f, "note: {why}")?;
            }
        }
        Ok(())
    }
}

//! Where things live in a kernel repository, and which problem a kernel belongs to.
//!
//! This is the slice of the repository model `kernelgate pr` needs to classify a diff. Paths are
//! repo-relative with `/` separators, as git prints them.

use kernelgate_model::{Config, KernelMapper, KernelSelector, ProblemSet};
use std::path::Path;

/// Repository layout: dataset root, candidate kernels, results root, config file name. Which
/// file is a kernel and which problem it answers are the model crate's rules
/// ([`KernelSelector`], [`KernelMapper`]), the same `kernelgate kernels` applies.
#[derive(Debug, Clone)]
pub struct Layout {
    pub dataset_root: String,
    pub results_root: String,
    pub config_file: String,
    config: Config,
    kernels: KernelSelector,
}

impl Default for Layout {
    fn default() -> Self {
        Layout::from_config(&Config::default())
    }
}

impl Layout {
    /// The layout a repository's `kernelgate.toml` describes.
    pub fn from_config(cfg: &Config) -> Layout {
        let slash = |p: &Path| {
            p.to_string_lossy()
                .replace('\\', "/")
                .trim_end_matches('/')
                .to_string()
        };
        Layout {
            dataset_root: slash(&cfg.dataset.root),
            results_root: slash(&cfg.results.root),
            config_file: "kernelgate.toml".to_string(),
            config: cfg.clone(),
            kernels: KernelSelector::new(cfg),
        }
    }

    /// The config file's path in the repository, when it is not `kernelgate.toml` (`--config`).
    pub fn with_config_file(mut self, path: &str) -> Layout {
        self.config_file = path.to_string();
        self
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The problems among `files` (repo-relative paths at one commit), by key, unread.
    pub fn problems<'p>(&self, files: impl IntoIterator<Item = &'p str>) -> ProblemSet {
        ProblemSet::index(Path::new(&self.dataset_root), files)
    }

    /// The kernel → problem mapping of `kernelgate kernels`, over `problems`.
    pub fn mapper<'a>(&'a self, problems: &'a ProblemSet) -> KernelMapper<'a> {
        KernelMapper::new(&self.config, problems)
    }

    pub fn is_kernel(&self, path: &str) -> bool {
        self.kernels.selects(Path::new(path))
    }

    /// `KernelBench/level1/19_ReLU.py` → `level1/19_ReLU`.
    pub fn problem_key(&self, path: &str) -> Option<String> {
        let rest = path.strip_prefix(&self.dataset_root)?.strip_prefix('/')?;
        let stem = rest.strip_suffix(".py")?;
        let (level, name) = stem.split_once('/')?;
        let is_level = level
            .strip_prefix("level")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        (is_level && !name.contains('/') && !name.starts_with("__")).then(|| stem.to_string())
    }

    pub fn problem_path(&self, key: &str) -> String {
        format!("{}/{key}.py", self.dataset_root)
    }

    pub fn is_results(&self, path: &str) -> bool {
        path.strip_prefix(&self.results_root)
            .is_some_and(|r| r.starts_with('/'))
    }

    pub fn is_config(&self, path: &str) -> bool {
        path == self.config_file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_paths() {
        let l = Layout::default();
        assert!(l.is_kernel("kernels/level1/19_ReLU.py"));
        assert!(!l.is_kernel("kernels/level1/19_ReLU.cu"));
        assert!(!l.is_kernel("src/x.py"));
        assert_eq!(
            l.problem_key("KernelBench/level1/19_ReLU.py").as_deref(),
            Some("level1/19_ReLU")
        );
        assert_eq!(l.problem_key("KernelBench/README.md"), None);
        assert_eq!(l.problem_key("KernelBench/levelx/1_A.py"), None);
        assert!(l.is_results("results/timing/H200/baseline_time_torch.json"));
        assert!(!l.is_results("resultsx/a"));
        assert!(l.is_config("kernelgate.toml"));
    }
}

//! Where things live in a kernel repository, and which problem a kernel belongs to.
//!
//! This is the slice of the repository model `kernelgate pr` needs to classify a diff. Paths are
//! repo-relative with `/` separators, as git prints them.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Repository layout: dataset root, kernel globs, results root, config file name.
#[derive(Debug, Clone)]
pub struct Layout {
    pub dataset_root: String,
    pub kernel_globs: Vec<String>,
    pub results_root: String,
    pub config_file: String,
    kernels: GlobSet,
    /// `[kernels.mapping]`: glob → problem key.
    mapping: Vec<(globset::GlobMatcher, String)>,
}

impl Default for Layout {
    fn default() -> Self {
        Layout::new("KernelBench", &["kernels/**/*.py".to_string()], "results")
            .expect("default globs are valid")
    }
}

impl Layout {
    pub fn new(
        dataset_root: &str,
        kernel_globs: &[String],
        results_root: &str,
    ) -> Result<Layout, globset::Error> {
        let mut set = GlobSetBuilder::new();
        for g in kernel_globs {
            set.add(Glob::new(g)?);
        }
        Ok(Layout {
            dataset_root: dataset_root.trim_end_matches('/').to_string(),
            kernel_globs: kernel_globs.to_vec(),
            results_root: results_root.trim_end_matches('/').to_string(),
            config_file: "kernelgate.toml".to_string(),
            kernels: set.build()?,
            mapping: Vec::new(),
        })
    }

    /// The layout a repository's `kernelgate.toml` describes.
    pub fn from_config(cfg: &kernelgate_model::Config) -> Result<Layout, globset::Error> {
        let slash = |p: &std::path::Path| p.to_string_lossy().replace('\\', "/");
        let mut layout = Layout::new(
            &slash(&cfg.dataset.root),
            &cfg.kernels.globs,
            &slash(&cfg.results.root),
        )?;
        for (glob, problem) in &cfg.kernels.mapping {
            layout.mapping.push((
                Glob::new(glob)?.compile_matcher(),
                problem.trim_end_matches(".py").to_string(),
            ));
        }
        Ok(layout)
    }

    pub fn is_kernel(&self, path: &str) -> bool {
        path.ends_with(".py")
            && self.kernels.is_match(path)
            && !path.rsplit('/').next().unwrap_or("").starts_with("__")
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

    /// The problem a kernel is for: the `# kernelgate: problem=` directive in its first lines, else
    /// the path convention `kernels/level1/19_ReLU.py` or `kernels/level1/19_ReLU/<any>.py`.
    pub fn kernel_problem(&self, path: &str, source: &str) -> Option<String> {
        if let Some(p) = directives(source)
            .into_iter()
            .take_while(|d| d.line <= 10)
            .find_map(|d| d.get("problem"))
        {
            return Some(p.trim_end_matches(".py").to_string());
        }
        if let Some((_, p)) = self.mapping.iter().find(|(m, _)| m.is_match(path)) {
            return Some(p.clone());
        }
        let parts: Vec<&str> = path.split('/').collect();
        let level_at = parts.iter().position(|p| {
            p.strip_prefix("level")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })?;
        let level = parts[level_at];
        let rest = &parts[level_at + 1..];
        let name = match rest {
            [file] => file.strip_suffix(".py")?,
            [dir, _file] => dir,
            _ => return None,
        };
        Some(format!("{level}/{name}"))
    }
}

/// One `# kernelgate: key=value ...` comment line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// 1-based line number.
    pub line: u32,
    pub pairs: Vec<(String, String)>,
}

impl Directive {
    pub fn get(&self, key: &str) -> Option<String> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }
}

/// Every `# kernelgate:` directive in a source file. `reason=` takes the rest of the line, so
/// reasons may contain spaces.
pub fn directives(source: &str) -> Vec<Directive> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let Some(body) = line.trim_start().strip_prefix('#').map(str::trim_start) else {
            continue;
        };
        let Some(body) = body.strip_prefix("kernelgate:") else {
            continue;
        };
        let mut pairs = Vec::new();
        let mut rest = body.trim();
        while !rest.is_empty() {
            let (word, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if let Some((k, v)) = word.split_once('=') {
                if k == "reason" {
                    let reason = rest["reason=".len()..].trim();
                    pairs.push((k.to_string(), reason.trim_matches('"').to_string()));
                    break;
                }
                pairs.push((k.to_string(), v.to_string()));
            }
            rest = tail.trim_start();
        }
        out.push(Directive {
            line: i as u32 + 1,
            pairs,
        });
    }
    out
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

    #[test]
    fn maps_kernels_by_directive_then_path() {
        let l = Layout::default();
        assert_eq!(
            l.kernel_problem("kernels/level1/19_ReLU.py", "").as_deref(),
            Some("level1/19_ReLU")
        );
        assert_eq!(
            l.kernel_problem("kernels/level2/5_Fuse/fast.py", "")
                .as_deref(),
            Some("level2/5_Fuse")
        );
        let src = "# kernelgate: problem=level3/1_MLP backend=cuda\nimport torch\n";
        assert_eq!(
            l.kernel_problem("kernels/mine.py", src).as_deref(),
            Some("level3/1_MLP")
        );
        assert_eq!(l.kernel_problem("kernels/mine.py", ""), None);
    }

    #[test]
    fn parses_allow_directive_with_reason() {
        let d =
            directives("x = 1\n  # kernelgate: allow=KG901 reason=fused three passes into one\n");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].line, 2);
        assert_eq!(d[0].get("allow").as_deref(), Some("KG901"));
        assert_eq!(
            d[0].get("reason").as_deref(),
            Some("fused three passes into one")
        );
    }
}

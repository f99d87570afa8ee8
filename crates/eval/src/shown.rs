//! The names a result shows for a job's absolute paths: messages and logs name files as the
//! user gave them or as the repository does (`kernels/...`), never by the runner's absolute
//! paths or temporary copies. `eval` and `pr` both rewrite through here.

use std::path::Path;

use crate::{EvalResult, Outcome};

/// Absolute paths and the names shown instead, longest path first.
#[derive(Debug, Clone, Default)]
pub struct ShownPaths {
    subs: Vec<(String, String)>,
}

impl ShownPaths {
    /// Shows `path` (as given and as resolved, when absolute) as `shown`.
    pub fn add(&mut self, path: &Path, shown: impl Into<String>) {
        let shown = shown.into();
        for p in [Some(path.to_path_buf()), std::fs::canonicalize(path).ok()]
            .into_iter()
            .flatten()
        {
            let p = p.display().to_string();
            if p.starts_with('/') && p != shown && !self.subs.iter().any(|(f, _)| *f == p) {
                // Longest first, so a file is replaced before its directory.
                let at = self.subs.partition_point(|(f, _)| f.len() >= p.len());
                self.subs.insert(at, (p, shown.clone()));
            }
        }
    }

    /// `text` with every known path shown by its name; a directory shown as `.` disappears
    /// from the paths under it (`/repo/kernels/a.py` is `kernels/a.py`).
    pub fn apply(&self, text: &mut String) {
        if !text.contains('/') {
            return;
        }
        for (from, to) in &self.subs {
            if text.contains(from.as_str()) {
                let under = if to == "." {
                    String::new()
                } else {
                    format!("{to}/")
                };
                *text = text.replace(&format!("{from}/"), &under);
                *text = text.replace(from.as_str(), to);
            }
        }
    }

    /// Every string in a JSON value.
    pub fn apply_json(&self, v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(t) => self.apply(t),
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| self.apply_json(x)),
            serde_json::Value::Object(o) => o.values_mut().for_each(|x| self.apply_json(x)),
            _ => {}
        }
    }

    /// Every text of an outcome (message, log tail, traceback).
    pub fn apply_outcome(&self, outcome: &mut Outcome) {
        if self.subs.is_empty() {
            return;
        }
        for text in outcome.texts_mut() {
            self.apply(text);
        }
    }

    /// Every text of a result: its outcome's, its findings' messages and the child's output.
    pub fn apply_result(&self, result: &mut EvalResult) {
        if self.subs.is_empty() {
            return;
        }
        self.apply_outcome(&mut result.outcome);
        for f in &mut result.findings {
            self.apply(&mut f.message);
        }
        self.apply(&mut result.stdout_tail);
        self.apply(&mut result.stderr_tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_before_their_directories_and_the_root_as_nothing() {
        let mut shown = ShownPaths::default();
        shown.add(Path::new("/runner/repo"), ".");
        shown.add(
            Path::new("/tmp/kg-base-x/a.py"),
            "kernels/a.py (base version)",
        );
        shown.add(Path::new("/runner/repo/kernels/a.py"), "kernels/a.py");
        let mut text = "error in /runner/repo/kernels/a.py:3; see /runner/repo/KernelBench/p.py, \
                        /tmp/kg-base-x/a.py and /runner/repo"
            .to_string();
        shown.apply(&mut text);
        assert_eq!(
            text,
            "error in kernels/a.py:3; see KernelBench/p.py, kernels/a.py (base version) and ."
        );
        let mut outcome = Outcome::CompileError {
            message: "/runner/repo/kernels/a.py: error".into(),
            log_tail: "In file /runner/repo/kernels/a.py".into(),
        };
        shown.apply_outcome(&mut outcome);
        assert_eq!(
            outcome,
            Outcome::CompileError {
                message: "kernels/a.py: error".into(),
                log_tail: "In file kernels/a.py".into(),
            }
        );
        let mut result = EvalResult::new("p".into(), "k".into(), 1, false);
        result.outcome = outcome;
        result.findings.push(kernelgate_model::Finding::runtime(
            "kernels/a.py",
            "eval/x",
            kernelgate_model::Severity::Warning,
            "read /runner/repo/data.bin",
        ));
        result.stderr_tail = "Traceback: /tmp/kg-base-x/a.py line 3".into();
        shown.apply_result(&mut result);
        assert_eq!(result.findings[0].message, "read data.bin");
        assert_eq!(
            result.stderr_tail,
            "Traceback: kernels/a.py (base version) line 3"
        );
    }
}

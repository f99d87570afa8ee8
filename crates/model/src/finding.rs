//! A finding: one rule firing at one place. Static (lint) findings carry a precise span in the
//! candidate's `.py` file; runtime findings from the harness carry no span (`line == 0`).

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule firing. Lines and columns are 1-based; `end_*` is exclusive of nothing (inclusive
/// end position as editors show it). `file` is the path as given to the tool (repo-relative
/// in `kernelgate pr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub end_line: u32,
    pub end_column: u32,
    pub rule: String,
    pub severity: Severity,
    pub message: String,
}

/// The runtime checks whose findings are about the problem, not the kernel: its inputs let a
/// trivial output pass (`eval/trivial-output-passes`), its inputs and outputs do not fit the
/// harness's memory budget on this machine (`eval/memory-budget`). Nothing in a kernel can
/// change them: they are reported once per problem and are no kernel's verdict.
pub const PROBLEM_RUNTIME_RULES: [&str; 2] = ["eval/trivial-output-passes", "eval/memory-budget"];

impl Finding {
    /// A finding of the run (runtime checks, timing integrity), not the linter's: it has no line.
    pub fn is_runtime(&self) -> bool {
        self.line == 0
    }

    /// A runtime finding about the problem rather than the kernel ([`PROBLEM_RUNTIME_RULES`]).
    pub fn is_about_problem(&self) -> bool {
        self.is_runtime() && PROBLEM_RUNTIME_RULES.contains(&self.rule.as_str())
    }

    /// A finding of the run, not of a line (runtime checks, timing integrity): line 0, which
    /// annotations and SARIF place on the file as a whole.
    pub fn runtime(
        file: impl Into<String>,
        rule: impl Into<String>,
        severity: Severity,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            file: file.into(),
            line: 0,
            column: 0,
            end_line: 0,
            end_column: 0,
            rule: rule.into(),
            severity,
            message: message.into(),
        }
    }
}

//! Rendering findings: human (rustc/ruff style, with a snippet and a caret), json, and GitHub
//! workflow commands.

use crate::rule::LineIndex;
use kernelgate_model::{Finding, Severity};
use serde::Serialize;
use std::fmt::Write;

/// Counts for the json summary and the CLI's last line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub files: usize,
    pub errors: usize,
    pub warnings: usize,
}

impl Summary {
    pub fn of(findings: &[Finding], files: usize) -> Summary {
        let errors = findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        Summary {
            files,
            errors,
            warnings: findings.len() - errors,
        }
    }
}

/// rustc/ruff-style text. `source_of(path)` gives the file's text for the snippet.
pub fn human<'s>(
    findings: &[Finding],
    source_of: impl Fn(&str) -> Option<&'s str>,
    color: bool,
) -> String {
    let (red, yellow, blue, bold, reset) = if color {
        ("\x1b[31m", "\x1b[33m", "\x1b[34m", "\x1b[1m", "\x1b[0m")
    } else {
        ("", "", "", "", "")
    };
    let mut out = String::new();
    let mut index_cache: Option<(String, LineIndex)> = None;
    for f in findings {
        let sev_color = if f.severity == Severity::Error {
            red
        } else {
            yellow
        };
        let _ = writeln!(
            out,
            "{bold}{sev_color}{}[{}]{reset}{bold}: {}{reset}",
            f.severity, f.rule, f.message
        );
        let width = f.line.max(f.end_line).to_string().len();
        let pad = " ".repeat(width);
        let _ = writeln!(
            out,
            "{pad}{blue}-->{reset} {}:{}:{}",
            f.file, f.line, f.column
        );
        if let Some(src) = source_of(&f.file) {
            if index_cache.as_ref().is_none_or(|(p, _)| p != &f.file) {
                index_cache = Some((f.file.clone(), LineIndex::new(src)));
            }
            let idx = &index_cache.as_ref().expect("set above").1;
            if f.line >= 1 && (f.line as usize) <= idx.line_count() {
                let text = idx.line_text(src, f.line as usize - 1);
                let shown = text.replace('\t', " ");
                let start = f.column.saturating_sub(1) as usize;
                let line_chars = shown.chars().count();
                let end = if f.end_line == f.line {
                    (f.end_column as usize).max(start + 1)
                } else {
                    line_chars.max(start + 1)
                };
                let carets = "^".repeat(end.min(line_chars.max(start + 1)) - start);
                let _ = writeln!(out, "{pad} {blue}|{reset}");
                let _ = writeln!(out, "{blue}{:>width$} |{reset} {shown}", f.line);
                let _ = writeln!(
                    out,
                    "{pad} {blue}|{reset} {}{sev_color}{carets}{reset}",
                    " ".repeat(start)
                );
            }
        }
        if let Some(meta) = crate::rule(&f.rule) {
            let _ = writeln!(
                out,
                "{pad} {blue}={reset} help: {} (see `kernelgate rule {}`)",
                meta.summary, meta.code
            );
        }
        out.push('\n');
    }
    out
}

/// `{"files": [..], "findings": [..], "summary": {files, errors, warnings}}`.
pub fn json(findings: &[Finding], files: &[String]) -> serde_json::Value {
    serde_json::json!({
        "files": files,
        "findings": findings,
        "summary": Summary::of(findings, files.len()),
    })
}

/// GitHub workflow commands (`::error file=..,line=..::msg`), one per finding.
pub fn github(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let level = if f.severity == Severity::Error {
            "error"
        } else {
            "warning"
        };
        let _ = writeln!(
            out,
            "::{level} file={},line={},col={},endLine={},endColumn={},title={}::{}",
            escape_property(&f.file),
            f.line,
            f.column,
            f.end_line,
            f.end_column,
            escape_property(&f.rule),
            escape_data(&f.message)
        );
    }
    out
}

/// Workflow-command escaping for the message part.
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Workflow-command escaping for `key=value` properties.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding() -> Finding {
        Finding {
            file: "k.py".into(),
            line: 2,
            column: 12,
            end_line: 2,
            end_column: 23,
            rule: "KG101".into(),
            severity: Severity::Error,
            message: "uses 50%, a, b".into(),
        }
    }

    #[test]
    fn human_puts_caret_under_the_span() {
        let src = "import torch\n    return torch.matmul(a, b)\n";
        let text = human(&[finding()], |_| Some(src), false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "error[KG101]: uses 50%, a, b");
        assert_eq!(lines[1], " --> k.py:2:12");
        assert_eq!(lines[3], "2 |     return torch.matmul(a, b)");
        assert_eq!(lines[4], "  |            ^^^^^^^^^^^^");
        assert!(lines[5].contains("kernelgate rule KG101"));
    }

    #[test]
    fn github_escapes_and_json_summarises() {
        assert_eq!(
            github(&[finding()]),
            "::error file=k.py,line=2,col=12,endLine=2,endColumn=23,title=KG101::uses 50%25, a, b\n"
        );
        let j = json(&[finding()], &["k.py".into()]);
        assert_eq!(
            j["summary"],
            serde_json::json!({"files": 1, "errors": 1, "warnings": 0})
        );
        assert_eq!(j["findings"][0]["rule"], "KG101");
        assert_eq!(j["findings"][0]["end_column"], 23);
    }
}

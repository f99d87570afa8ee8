//! The vocabulary every rule shares: its metadata (for `kernelgate rule` and SARIF), the
//! per-file context handed to checks, and the raw finding a check returns (byte offsets into the
//! `.py` file; `lint_file` turns them into line/column `Finding`s, applies suppressions and
//! severity overrides).

pub use crate::registry::Rule;
use kernelgate_model::{Backend, Precision, Severity};
use std::ops::Range;

/// Static description of one rule: its registry entry, written beside the rule's check and
/// listed in `registry.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleMeta {
    /// `KG101`: group digit first (see `registry.rs`).
    pub code: &'static str,
    /// kebab-case name, e.g. `torch-op-fallback`.
    pub name: &'static str,
    /// Default severity; `kernelgate.toml` `[lint] severity` may change it.
    pub severity: Severity,
    /// One line, used as the SARIF short description and the `rule --all` table.
    pub summary: &'static str,
    /// What makes a finding of this rule an error: what the analysis must prove.
    pub error_when: &'static str,
    /// What leaves it a warning: what the analysis could not prove (the runtime checks decide).
    pub warn_when: &'static str,
    /// One paragraph: what the rule catches, why it matters, how to fix it.
    pub doc: &'static str,
    /// A short Python example the rule flags.
    pub bad: &'static str,
    /// The same example written so the rule is silent.
    pub good: &'static str,
}

/// What a check knows about the file being linted.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The path as given to the tool (shown in findings).
    pub path: &'a str,
    /// The whole `.py` source.
    pub source: &'a str,
    /// The precision of the problem this kernel solves (downgrade rules are relative to it).
    pub precision: Precision,
    /// The declared backend, when the kernel's mapping or `--backend` says one.
    pub backend: Option<Backend>,
    pub lines: LineIndex,
}

impl<'a> Context<'a> {
    pub fn new(
        path: &'a str,
        source: &'a str,
        precision: Precision,
        backend: Option<Backend>,
    ) -> Self {
        Context {
            path,
            source,
            precision,
            backend,
            lines: LineIndex::new(source),
        }
    }

    /// 1-based (line, column) of a byte offset; the column counts characters.
    pub fn line_col(&self, offset: usize) -> (u32, u32) {
        self.lines.line_col(self.source, offset)
    }
}

/// One rule firing, before suppression and severity overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFinding {
    pub code: Rule,
    /// Byte offsets in the `.py` file (for embedded C++/CUDA: mapped back to the literal).
    pub range: Range<usize>,
    pub message: String,
    /// A severity decided by the analysis (a joined side stream is a warning); `None`: the
    /// rule's default. `kernelgate.toml` overrides win over both.
    pub severity: Option<Severity>,
    /// Where the finding is when it lies in a file the kernel loads (a `.cu`, a header): the
    /// finding names that file and line; `range` stays where the `.py` names the file, for
    /// suppressions.
    pub file_at: Option<FileAt>,
}

/// A position in a file the kernel loads, as findings name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileAt {
    /// The file as shown (`kernels/level1/19_ReLU/relu.cu`).
    pub file: String,
    /// 1-based.
    pub line: u32,
    pub column: u32,
    /// The column just past the finding's end on that line.
    pub end_column: u32,
}

impl RawFinding {
    pub fn new(code: Rule, range: Range<usize>, message: impl Into<String>) -> Self {
        RawFinding {
            code,
            range,
            message: message.into(),
            severity: None,
            file_at: None,
        }
    }

    /// The same finding placed in a loaded file.
    pub fn at(mut self, file_at: Option<FileAt>) -> Self {
        self.file_at = file_at;
        self
    }

    /// The same finding as a warning.
    pub fn warning(mut self) -> Self {
        self.severity = Some(Severity::Warning);
        self
    }

    /// The same finding as a warning because what it claims is not proven: the analysis could
    /// not resolve every path (`why` says which), so the runtime checks decide.
    pub fn unproven(mut self, why: &str) -> Self {
        self.severity = Some(Severity::Warning);
        self.message.push_str(&unproven_note(why));
        self
    }
}

/// What an unproven finding's message ends with: why the claim is not proven, and who decides.
pub fn unproven_note(why: &str) -> String {
    format!(" (a warning, not proven: {why}; the runtime checks decide)")
}

/// Start offsets of every line, for offset -> line/column in O(log n).
#[derive(Debug, Clone, Default)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(source: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { starts }
    }

    /// 0-based line number of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// Byte offset where the 0-based line starts.
    pub fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(usize::MAX)
    }

    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// 1-based (line, column); the column counts characters, not bytes.
    pub fn line_col(&self, source: &str, offset: usize) -> (u32, u32) {
        let offset = offset.min(source.len());
        let line = self.line_of(offset);
        let start = self.starts[line];
        let col = source
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line as u32 + 1, col as u32 + 1)
    }

    /// The text of the 0-based line, without its newline.
    pub fn line_text<'s>(&self, source: &'s str, line: usize) -> &'s str {
        let start = self.line_start(line).min(source.len());
        let end = self.starts.get(line + 1).map_or(source.len(), |e| *e);
        source[start..end].trim_end_matches(['\n', '\r'])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_and_lines() {
        let src = "ab\nçd = 1\n\nx";
        let idx = LineIndex::new(src);
        assert_eq!(idx.line_col(src, 0), (1, 1));
        assert_eq!(idx.line_col(src, 3), (2, 1));
        // `d` follows a two-byte character: column 2.
        assert_eq!(idx.line_col(src, 5), (2, 2));
        assert_eq!(idx.line_col(src, src.len() - 1), (4, 1));
        assert_eq!(idx.line_text(src, 1), "çd = 1");
        assert_eq!(idx.line_count(), 4);
    }
}

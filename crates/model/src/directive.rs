//! `# kernelgate:` comments: the one parser every command reads them with.
//!
//! The documented forms (docs/config.md, docs/rules.md, docs/policy.md):
//! - mapping, in the first [`DIRECTIVE_LINES`] lines:
//!   `# kernelgate: problem=level1/19_ReLU backend=cuda precision=fp32` (each key optional);
//! - suppression of a lint rule, on the line or the line before:
//!   `# kernelgate: allow=KG101 reason="..."`, or for the whole file `allow-file=KG101 reason="..."`;
//! - acknowledgement of a policy warning: `# kernelgate: allow=excessive_speedup reason="..."`.
//!
//! A comment may mix keys (`problem=... allow-file=... reason="..."`). Values may be quoted with
//! `"` or `'`; a value with spaces (a reason) must be.

use crate::config::Condition;
use crate::types::{Backend, Precision};
use std::ops::Range;

/// How many leading lines may hold the mapping directive.
pub const DIRECTIVE_LINES: usize = 10;

const MARKER: &str = "kernelgate:";

/// The keys a `# kernelgate:` comment may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Problem,
    Backend,
    Precision,
    Allow,
    AllowFile,
    Reason,
}

impl Key {
    pub const ALL: [Key; 6] = [
        Key::Problem,
        Key::Backend,
        Key::Precision,
        Key::Allow,
        Key::AllowFile,
        Key::Reason,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Key::Problem => "problem",
            Key::Backend => "backend",
            Key::Precision => "precision",
            Key::Allow => "allow",
            Key::AllowFile => "allow-file",
            Key::Reason => "reason",
        }
    }

    pub fn parse(key: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|k| k.as_str() == key)
    }

    /// Keys that say which problem a kernel answers and how it runs.
    pub fn is_mapping(self) -> bool {
        matches!(self, Key::Problem | Key::Backend | Key::Precision)
    }
}

/// One `key=value` of a comment; `range` covers the whole pair, in the caller's offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair<'s> {
    pub key: &'s str,
    pub value: String,
    pub range: Range<usize>,
}

/// A comment that is not a list of `key=value` pairs; `at` is in the caller's offsets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    pub at: usize,
    pub message: String,
}

/// The pairs of a `# kernelgate:` comment, or `None` for any other comment. `comment` starts
/// at its `#`; `base` is the offset of that `#` in the caller's text.
pub fn parse_comment(comment: &str, base: usize) -> Option<Result<Vec<Pair<'_>>, SyntaxError>> {
    let body = comment.strip_prefix('#')?.trim_start();
    let text = body.strip_prefix(MARKER)?;
    Some(parse_pairs(text, base + comment.len() - text.len()))
}

/// `key=value key="a value" ...`; `base` is the offset of `text`.
fn parse_pairs(text: &str, base: usize) -> Result<Vec<Pair<'_>>, SyntaxError> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut out: Vec<Pair> = Vec::new();
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &text[start..i];
        if i >= bytes.len() || bytes[i] != b'=' {
            let hint = if out.last().is_some_and(|p| p.key == Key::Reason.as_str()) {
                "; quote a reason that has spaces: reason=\"...\""
            } else {
                ""
            };
            return Err(SyntaxError {
                at: base + start,
                message: format!("expected `key=value`, found `{key}`{hint}"),
            });
        }
        i += 1;
        let value = if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
            let quote = bytes[i];
            let vstart = i + 1;
            let Some(len) = text[vstart..].bytes().position(|b| b == quote) else {
                return Err(SyntaxError {
                    at: base + start,
                    message: format!("unterminated quote in `{key}=`"),
                });
            };
            i = vstart + len + 1;
            text[vstart..vstart + len].to_string()
        } else {
            let vstart = i;
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            text[vstart..i].to_string()
        };
        out.push(Pair {
            key,
            value,
            range: base + start..base + i,
        });
    }
    Ok(out)
}

/// Own-line `# kernelgate:` comments: `(0-based line, byte offset of the line, comment text)`.
/// A directive is a comment line of its own; the linter also reads trailing ones (it has the
/// tokenizer that tells a comment from a string).
fn comment_lines(source: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let mut offset = 0;
    source
        .split_inclusive('\n')
        .enumerate()
        .map(move |(i, raw)| {
            let at = offset;
            offset += raw.len();
            let lead = raw.len() - raw.trim_start().len();
            (i, at + lead, raw.trim())
        })
}

/// The mapping directive: what its keys say, merged over the first [`DIRECTIVE_LINES`] lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directive {
    /// 1-based line of the first mapping key.
    pub line: usize,
    pub problem: Option<String>,
    pub backend: Option<Backend>,
    pub precision: Option<Precision>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectiveErrorKind {
    /// Not `key=value`, or an unterminated quote.
    Syntax,
    UnknownKey,
    /// A key without a value, or a backend or precision that does not exist.
    BadValue,
    /// `# kernelgate:` with nothing after it.
    Empty,
    /// A mapping key given twice with different values.
    Conflict,
}

/// Why a `# kernelgate:` line in the head of a file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DirectiveError {
    pub kind: DirectiveErrorKind,
    /// 1-based line and column (in characters) of the offending pair.
    pub line: usize,
    pub column: usize,
    /// Byte range in the source.
    pub range: Range<usize>,
    pub message: String,
}

/// Find and parse the mapping directive in the first [`DIRECTIVE_LINES`] lines; `Ok(None)`
/// when no line there sets `problem`, `backend` or `precision`. Suppression keys may share
/// the line; anything else is an error, so a typo is never silently ignored.
pub fn parse_directive(source: &str) -> Result<Option<Directive>, DirectiveError> {
    let mut d = Directive::default();
    let mut first_line: Option<usize> = None;
    for (i, at, text) in comment_lines(source).take(DIRECTIVE_LINES) {
        let starts_at = line_start(source, at);
        let err = |kind, range: Range<usize>, message: String| {
            let column = source[starts_at..range.start].chars().count() + 1;
            DirectiveError {
                kind,
                line: i + 1,
                column,
                range,
                message,
            }
        };
        let Some(parsed) = parse_comment(text, at) else {
            continue;
        };
        let pairs = parsed
            .map_err(|e| err(DirectiveErrorKind::Syntax, e.at..at + text.len(), e.message))?;
        if pairs.is_empty() {
            let end = at + text.len();
            return Err(err(
                DirectiveErrorKind::Empty,
                end..end,
                "the directive is empty".into(),
            ));
        }
        for p in pairs {
            let Some(key) = Key::parse(p.key) else {
                return Err(err(
                    DirectiveErrorKind::UnknownKey,
                    p.range,
                    format!(
                        "unknown key `{}` (expected {})",
                        p.key,
                        Key::ALL.map(Key::as_str).join(", ")
                    ),
                ));
            };
            if !key.is_mapping() {
                continue;
            }
            if p.value.is_empty() {
                let m = format!("`{}` has no value", p.key);
                return Err(err(DirectiveErrorKind::BadValue, p.range, m));
            }
            let conflict = |old: String| {
                format!(
                    "`{}` is given twice, as `{old}` and as `{}`: keep one",
                    p.key, p.value
                )
            };
            let bad = |m: String| err(DirectiveErrorKind::BadValue, p.range.clone(), m);
            let clash = |m: String| err(DirectiveErrorKind::Conflict, p.range.clone(), m);
            match key {
                Key::Problem => match &d.problem {
                    Some(old) if *old != p.value => return Err(clash(conflict(old.clone()))),
                    _ => d.problem = Some(p.value.clone()),
                },
                Key::Backend => {
                    let b: Backend = p.value.parse().map_err(bad)?;
                    match d.backend {
                        Some(old) if old != b => return Err(clash(conflict(old.to_string()))),
                        _ => d.backend = Some(b),
                    }
                }
                Key::Precision => {
                    let v: Precision = p.value.parse().map_err(bad)?;
                    match d.precision {
                        Some(old) if old != v => return Err(clash(conflict(old.to_string()))),
                        _ => d.precision = Some(v),
                    }
                }
                _ => unreachable!("only mapping keys reach here"),
            }
            first_line.get_or_insert(i + 1);
        }
    }
    Ok(first_line.map(|line| Directive { line, ..d }))
}

fn line_start(source: &str, at: usize) -> usize {
    source[..at].rfind('\n').map_or(0, |p| p + 1)
}

/// One code of an `allow=` or `allow-file=` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowCode {
    /// A policy warning a reviewer acknowledges (`excessive_speedup`).
    Condition(Condition),
    /// Anything else: a lint rule code, checked by the linter against its registry.
    Rule(String),
}

impl AllowCode {
    pub fn parse(code: &str) -> AllowCode {
        match Condition::ALL.into_iter().find(|c| c.as_str() == code) {
            Some(c) => AllowCode::Condition(c),
            None => AllowCode::Rule(code.to_string()),
        }
    }
}

/// The codes of an `allow=`/`allow-file=` value (`KG101,KG102`).
pub fn allow_codes(value: &str) -> impl Iterator<Item = AllowCode> + '_ {
    value
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(AllowCode::parse)
}

/// The `reason=` of a comment's pairs; an empty reason is none.
pub fn reason<'a>(pairs: &'a [Pair<'_>]) -> Option<&'a str> {
    pairs
        .iter()
        .find(|p| p.key == Key::Reason.as_str())
        .map(|p| p.value.trim())
        .filter(|r| !r.is_empty())
}

/// One acknowledgement of a policy warning in a file: `allow=<condition> reason="..."`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledgement {
    /// 1-based line of the comment.
    pub line: usize,
    pub condition: Condition,
    /// `None` when the comment gives no reason: it then acknowledges nothing.
    pub reason: Option<String>,
}

/// Every policy acknowledgement in own-line `# kernelgate:` comments of `source`. Unreadable
/// comments acknowledge nothing (the linter reports them as KG901).
pub fn acknowledgements(source: &str) -> Vec<Acknowledgement> {
    let mut out = Vec::new();
    for (i, at, text) in comment_lines(source) {
        let Some(Ok(pairs)) = parse_comment(text, at) else {
            continue;
        };
        let why = reason(&pairs).map(str::to_string);
        for p in pairs
            .iter()
            .filter(|p| matches!(Key::parse(p.key), Some(Key::Allow | Key::AllowFile)))
        {
            for code in allow_codes(&p.value) {
                if let AllowCode::Condition(condition) = code {
                    out.push(Acknowledgement {
                        line: i + 1,
                        condition,
                        reason: why.clone(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_directive() {
        let d = parse_directive(
            "import torch\n# kernelgate: problem=level1/19_ReLU backend=cuda precision=bf16\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.line, 2);
        assert_eq!(d.problem.as_deref(), Some("level1/19_ReLU"));
        assert_eq!(d.backend, Some(Backend::Cuda));
        assert_eq!(d.precision, Some(Precision::Bf16));
        assert_eq!(parse_directive("x = 1\n").unwrap(), None);
        let late = format!(
            "{}# kernelgate: problem=level1/1_A\n",
            "\n".repeat(DIRECTIVE_LINES)
        );
        assert_eq!(parse_directive(&late).unwrap(), None);
        assert_eq!(
            parse_directive("#kernelgate: backend=triton")
                .unwrap()
                .unwrap()
                .backend,
            Some(Backend::Triton)
        );
    }

    #[test]
    fn mapping_errors_point_at_the_pair() {
        let e = parse_directive("\n# kernelgate: problem=level1/1_A backend=opencl\n").unwrap_err();
        assert_eq!(
            (e.line, e.column, e.kind),
            (2, 34, DirectiveErrorKind::BadValue)
        );
        assert!(e.message.contains("opencl"), "{e}");
        let e = parse_directive("# kernelgate: level=1").unwrap_err();
        assert_eq!((e.column, e.kind), (15, DirectiveErrorKind::UnknownKey));
        assert!(e.message.contains("unknown key `level`"), "{e}");
        assert!(parse_directive("# kernelgate: problem")
            .unwrap_err()
            .message
            .contains("key=value"));
        assert!(parse_directive("# kernelgate: precision=fp8")
            .unwrap_err()
            .message
            .contains("fp8"));
        assert!(parse_directive("# kernelgate: problem=")
            .unwrap_err()
            .message
            .contains("no value"));
        let e = parse_directive("# kernelgate:").unwrap_err();
        assert_eq!(e.kind, DirectiveErrorKind::Empty);
        let e =
            parse_directive("# kernelgate: backend=cuda\n# kernelgate: backend=cpp\n").unwrap_err();
        assert_eq!((e.line, e.kind), (2, DirectiveErrorKind::Conflict));
    }

    #[test]
    fn suppression_keys_share_the_head_without_breaking_the_mapping() {
        let src = "# kernelgate: allow-file=KG101 reason=\"a fused epilogue\"\n# kernelgate: problem=19_ReLU precision='fp16'\n";
        let d = parse_directive(src).unwrap().unwrap();
        assert_eq!(d.line, 2);
        assert_eq!(d.problem.as_deref(), Some("19_ReLU"));
        assert_eq!(d.precision, Some(Precision::Fp16));
        assert_eq!(
            parse_directive("# kernelgate: allow=KG101 reason=\"x\"\n").unwrap(),
            None
        );
    }

    #[test]
    fn an_unquoted_reason_with_spaces_says_to_quote_it() {
        let e = parse_comment("# kernelgate: allow=KG901 reason=fused three passes", 0)
            .unwrap()
            .unwrap_err();
        assert!(e.message.contains("quote a reason"), "{e}");
        assert_eq!(parse_comment("# plain comment", 0), None);
    }

    #[test]
    fn acknowledgements_need_a_condition_and_keep_a_missing_reason() {
        let acks = acknowledgements(
            "x = 1\n  # kernelgate: allow=excessive_speedup,KG101 reason=\"fused three passes\"\n# kernelgate: allow=implausible_time\n",
        );
        assert_eq!(
            acks,
            [
                Acknowledgement {
                    line: 2,
                    condition: Condition::ExcessiveSpeedup,
                    reason: Some("fused three passes".into())
                },
                Acknowledgement {
                    line: 3,
                    condition: Condition::ImplausibleTime,
                    reason: None
                }
            ]
        );
    }
}

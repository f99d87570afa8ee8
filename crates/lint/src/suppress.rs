//! `# kernelgate:` comments: suppressions (`allow=`, `allow-file=`, each with a `reason="..."`)
//! and the mapping directive (`problem=`, `backend=`, `precision=`). Only real comment tokens
//! count: the same text inside a string or docstring is inert.

use crate::rule::{LineIndex, RawFinding, Rule};
use kernelgate_model::{Backend, Precision};
use ruff_python_ast::token::{TokenKind, Tokens};
use ruff_text_size::Ranged;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;

const MARKER: &str = "kernelgate:";

/// One `key=value` of a `# kernelgate:` comment, with the byte range of the whole pair.
#[derive(Debug, PartialEq)]
struct Pair<'s> {
    key: &'s str,
    value: String,
    range: std::ops::Range<usize>,
}

/// Parse the part of a comment after `# kernelgate:`. `base` is the byte offset of `text`.
fn pairs(text: &str, base: usize) -> Result<Vec<Pair<'_>>, (usize, String)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
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
            return Err((base + start, format!("expected `key=value`, found `{key}`")));
        }
        i += 1;
        let value = if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
            let quote = bytes[i];
            let vstart = i + 1;
            let Some(len) = text[vstart..].bytes().position(|b| b == quote) else {
                return Err((base + start, format!("unterminated quote in `{key}=`")));
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

/// The `# kernelgate:` text of a comment (`None` for ordinary comments).
fn marker_text(comment: &str) -> Option<(&str, usize)> {
    let body = comment.strip_prefix('#')?;
    let trimmed = body.trim_start();
    let rest = trimmed.strip_prefix(MARKER)?;
    Some((rest, comment.len() - rest.len()))
}

/// Precision/backend from a mapping directive in the first lines of the file.
#[derive(Debug, Default)]
pub(crate) struct Directive {
    pub precision: Option<Precision>,
    pub backend: Option<Backend>,
    /// Bad values, reported as KG901.
    pub problems: Vec<RawFinding>,
}

/// Read the mapping directive (`# kernelgate: problem=... backend=... precision=...`) from the
/// first 10 lines, like the model crate's kernel discovery does.
pub(crate) fn directive(source: &str) -> Directive {
    let mut d = Directive::default();
    let mut offset = 0;
    for line in source.split_inclusive('\n').take(10) {
        let lead = line.len() - line.trim_start().len();
        if let Some((text, at)) = marker_text(line.trim()) {
            if let Ok(ps) = pairs(text, offset + lead + at) {
                for p in ps {
                    match p.key {
                        "precision" => match p.value.parse() {
                            Ok(v) => d.precision = Some(v),
                            Err(e) => d.problems.push(RawFinding::new(Rule::KG901, p.range, e)),
                        },
                        "backend" => match p.value.parse() {
                            Ok(v) => d.backend = Some(v),
                            Err(e) => d.problems.push(RawFinding::new(Rule::KG901, p.range, e)),
                        },
                        _ => {}
                    }
                }
            }
        }
        offset += line.len();
    }
    d
}

/// Every suppression of a file.
#[derive(Debug, Default)]
pub(crate) struct Suppressions {
    file: BTreeSet<String>,
    /// 0-based line -> codes allowed on it.
    lines: HashMap<usize, BTreeSet<String>>,
    /// Malformed suppressions (KG900, KG901).
    pub problems: Vec<RawFinding>,
}

impl Suppressions {
    pub fn collect(tokens: &Tokens, source: &str) -> Self {
        let index = LineIndex::new(source);
        let mut s = Suppressions::default();
        for tok in tokens.iter() {
            if tok.kind() != TokenKind::Comment {
                continue;
            }
            let start = usize::from(tok.start());
            let comment = &source[start..usize::from(tok.end())];
            let Some((text, at)) = marker_text(comment) else {
                continue;
            };
            let line = index.line_of(start);
            let line_start = index.line_start(line);
            let own_line = source[line_start..start].trim().is_empty();
            let target = if own_line {
                next_code_line(&index, source, line)
            } else {
                line
            };
            s.add(text, start + at, start..start + comment.len(), line, target);
        }
        s
    }

    fn add(
        &mut self,
        text: &str,
        base: usize,
        comment: std::ops::Range<usize>,
        line: usize,
        target: usize,
    ) {
        let ps = match pairs(text, base) {
            Ok(ps) => ps,
            Err((at, msg)) => {
                self.problems.push(RawFinding::new(
                    Rule::KG901,
                    at..comment.end,
                    format!("malformed `# kernelgate:` comment: {msg}"),
                ));
                return;
            }
        };
        let reason = ps
            .iter()
            .find(|p| p.key == "reason")
            .map(|p| p.value.trim().to_string());
        for p in &ps {
            let file_wide = match p.key {
                "allow" => false,
                "allow-file" => true,
                "reason" | "problem" | "backend" | "precision" => continue,
                other => {
                    self.problems.push(RawFinding::new(
                        Rule::KG901,
                        p.range.clone(),
                        format!("unknown key `{other}` in `# kernelgate:` comment (expected allow=, allow-file=, reason=)"),
                    ));
                    continue;
                }
            };
            if reason.as_deref().is_none_or(str::is_empty) {
                self.problems.push(RawFinding::new(
                    Rule::KG900,
                    p.range.clone(),
                    format!(
                        "`{}={}` has no reason: add reason=\"why this is not a hack\"",
                        p.key, p.value
                    ),
                ));
                continue;
            }
            for code in p.value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                let Some(meta) = crate::rule(code) else {
                    self.problems.push(RawFinding::new(
                        Rule::KG901,
                        p.range.clone(),
                        format!(
                            "unknown rule `{code}` in suppression (see `kernelgate rule --all`)"
                        ),
                    ));
                    continue;
                };
                let code = meta.code.to_string();
                if file_wide {
                    self.file.insert(code);
                } else {
                    self.lines.entry(target).or_default().insert(code.clone());
                    self.lines.entry(line).or_default().insert(code);
                }
            }
        }
    }

    /// True when `code` at 0-based `line` is suppressed. KG900/KG901 cannot be suppressed.
    pub fn allows(&self, code: &str, line: usize) -> bool {
        if code == "KG900" || code == "KG901" || code == "KG000" {
            return false;
        }
        self.file.contains(code) || self.lines.get(&line).is_some_and(|c| c.contains(code))
    }
}

/// The first line after `line` that is not blank or a comment.
fn next_code_line(index: &LineIndex, source: &str, line: usize) -> usize {
    let mut l = line + 1;
    while l < index.line_count() {
        let t = index.line_text(source, l).trim();
        if !t.is_empty() && !t.starts_with('#') {
            return l;
        }
        l += 1;
    }
    line + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sup(src: &str) -> Suppressions {
        let parsed = ruff_python_parser::parse_module(src).unwrap();
        Suppressions::collect(parsed.tokens(), src)
    }

    #[test]
    fn trailing_own_line_and_file_wide() {
        let s = sup("x = 1  # kernelgate: allow=KG101 reason=\"ok\"\n# kernelgate: allow=KG103,KG104 reason='own line'\n\ny = 2\n# kernelgate: allow-file=KG201 reason=\"x\"\n");
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        assert!(s.allows("KG101", 0));
        assert!(!s.allows("KG101", 1));
        assert!(s.allows("KG103", 3) && s.allows("KG104", 3));
        assert!(!s.allows("KG103", 2 + 5));
        assert!(s.allows("KG201", 99));
    }

    #[test]
    fn missing_reason_unknown_code_and_strings() {
        let s = sup("x = 1  # kernelgate: allow=KG101\ny = '# kernelgate: allow=KG102'\nz = 1  # kernelgate: allow=KG999 reason=\"r\"\n");
        let codes: Vec<_> = s.problems.iter().map(|p| p.code).collect();
        assert_eq!(codes, [Rule::KG900, Rule::KG901]);
        assert!(!s.allows("KG101", 0));
        assert!(!s.allows("KG102", 1));
    }

    #[test]
    fn directive_reads_precision_and_backend() {
        let d = directive(
            "# kernelgate: problem=level1/19_ReLU backend=triton precision=fp16\nimport torch\n",
        );
        assert_eq!(d.precision, Some(Precision::Fp16));
        assert_eq!(d.backend, Some(Backend::Triton));
        let d = directive("# kernelgate: precision=fp64\n");
        assert_eq!(d.precision, None);
        assert_eq!(d.problems.len(), 1);
    }
}

//! Problem identity: sha-256 of the source with comments, docstrings and all whitespace removed
//! (kernelgate's key), and KernelBench's own md5 (`get_code_hash`), shown beside it.
//!
//! KernelBench strips with regexes; for the sha-256 we tokenize with ruff's Python lexer so that
//! a `#` inside a string literal is kept. The md5 is KernelBench's regexes exactly, so it equals
//! `get_code_hash` for every source (`r"""` docstrings, `#` in strings, assigned triple-quoted
//! strings included), even where the two normalisations differ.

use md5::Md5;
use ruff_python_ast::token::TokenKind;
use ruff_python_ast::PySourceType;
use ruff_text_size::Ranged;
use sha2::{Digest, Sha256};

/// Source text with comments, docstrings (string-only expression statements) and every
/// whitespace character removed.
pub fn normalize(source: &str) -> String {
    let parsed = ruff_python_parser::parse_unchecked_source(source, PySourceType::Python);
    let tokens: Vec<_> = parsed
        .tokens()
        .iter()
        .map(|t| (t.kind(), t.range()))
        .collect();
    let trivia = |k: TokenKind| matches!(k, TokenKind::Comment | TokenKind::NonLogicalNewline);
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut prev_significant: Option<TokenKind> = None;
    let mut i = 0;
    while i < tokens.len() {
        let (kind, range) = tokens[i];
        if kind == TokenKind::Comment {
            cut.push((range.start().to_usize(), range.end().to_usize()));
            i += 1;
            continue;
        }
        let at_statement_start = matches!(
            prev_significant,
            None | Some(TokenKind::Newline | TokenKind::Indent | TokenKind::Dedent)
        );
        if kind == TokenKind::String && at_statement_start {
            // A run of (implicitly concatenated) strings that ends the logical line.
            let mut j = i;
            let mut strings = Vec::new();
            while j < tokens.len() && (tokens[j].0 == TokenKind::String || trivia(tokens[j].0)) {
                strings.push(j);
                j += 1;
            }
            if j == tokens.len() || matches!(tokens[j].0, TokenKind::Newline | TokenKind::EndOfFile)
            {
                for k in strings {
                    let r = tokens[k].1;
                    cut.push((r.start().to_usize(), r.end().to_usize()));
                }
                prev_significant = Some(TokenKind::String);
                i = j;
                continue;
            }
        }
        if !trivia(kind) {
            prev_significant = Some(kind);
        }
        i += 1;
    }
    let mut out = String::with_capacity(source.len());
    let mut pos = 0;
    for (start, end) in cut {
        if start >= pos {
            out.extend(source[pos..start].chars().filter(|c| !c.is_whitespace()));
            pos = end;
        }
    }
    out.extend(source[pos..].chars().filter(|c| !c.is_whitespace()));
    out
}

/// Source with Python comments removed (text inside string literals, such as a C++
/// `#include`, is kept); line structure is preserved.
pub fn strip_comments(source: &str) -> String {
    let parsed = ruff_python_parser::parse_unchecked_source(source, PySourceType::Python);
    let mut out = String::with_capacity(source.len());
    let mut pos = 0;
    for t in parsed.tokens().iter() {
        if t.kind() == TokenKind::Comment {
            let (start, end) = (t.range().start().to_usize(), t.range().end().to_usize());
            if start >= pos {
                out.push_str(&source[pos..start]);
                pos = end;
            }
        }
    }
    out.push_str(&source[pos..]);
    out
}

/// `(sha256 of the [`normalize`]d source, KernelBench's md5 [`kernelbench_code_hash`])`,
/// lowercase hex.
pub fn hashes(source: &str) -> (String, String) {
    let norm = normalize(source);
    (
        hex::encode(Sha256::digest(norm.as_bytes())),
        kernelbench_code_hash(source),
    )
}

/// KernelBench's `get_code_hash` (src/dataset.py): every `"""..."""` / `'''...'''` span
/// removed (non-greedy, a string prefix such as `r` stays), then `#` to the end of each line and
/// all whitespace, then md5 of what is left.
pub fn kernelbench_code_hash(source: &str) -> String {
    use std::sync::OnceLock;
    static TRIPLE: OnceLock<regex::Regex> = OnceLock::new();
    static TRIVIA: OnceLock<regex::Regex> = OnceLock::new();
    let triple = TRIPLE.get_or_init(|| {
        regex::Regex::new(r#""""[\s\S]*?"""|'''[\s\S]*?'''"#).expect("valid regex")
    });
    let trivia = TRIVIA.get_or_init(|| regex::Regex::new(r"(?m)#.*$|\s+").expect("valid regex"));
    let without_strings = triple.replace_all(source, "");
    let cleaned = trivia.replace_all(&without_strings, "");
    hex::encode(Md5::digest(cleaned.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#""""Module docstring."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x):  # the whole op
        return torch.relu(x)


batch_size = 4096
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"#;

    #[test]
    fn removes_comments_docstrings_and_whitespace() {
        assert_eq!(
            normalize(SRC),
            "importtorchimporttorch.nnasnnclassModel(nn.Module):def__init__(self):super().__init__()defforward(self,x):returntorch.relu(x)batch_size=4096dim=1024defget_inputs():return[torch.randn(batch_size,dim)]defget_init_inputs():return[]"
        );
    }

    #[test]
    fn reformatting_keeps_the_hash() {
        let reformatted = SRC
            .replace("    ", "\t")
            .replace("batch_size = 4096", "batch_size=4096   # rows")
            .replace("\"\"\"Applies ReLU.\"\"\"", "'''Another\n    docstring'''")
            .replace("\n\n\n", "\n");
        assert_ne!(reformatted, SRC);
        assert_eq!(hashes(&reformatted), hashes(SRC));
    }

    #[test]
    fn edits_move_the_hash() {
        let edited = SRC.replace("dim = 1024", "dim = 2048");
        assert_ne!(hashes(&edited).0, hashes(SRC).0);
        assert_ne!(hashes(&edited).1, hashes(SRC).1);
    }

    #[test]
    fn hash_inside_string_is_kept_and_assigned_strings_are_not_docstrings() {
        let a = "x = \"a # b\"\n";
        assert_eq!(normalize(a), "x=\"a#b\"");
        let b = "src = \"\"\"\n__global__ void k() {}\n\"\"\"\n";
        assert_eq!(normalize(b), "src=\"\"\"__global__voidk(){}\"\"\"");
        assert_ne!(hashes(a), hashes("x = \"a \"\n"));
    }

    #[test]
    fn md5_matches_kernelbench() {
        // md5 of the normalised text, computed independently with python:
        // hashlib.md5(re.sub(r"#.*$|\s+", "", re.sub(r'"""[\s\S]*?"""', "", SRC), flags=re.M).encode())
        assert_eq!(hashes(SRC).1, KERNELBENCH_MD5);
    }

    #[test]
    fn strip_comments_keeps_strings() {
        assert_eq!(
            strip_comments("x = 1  # one\ns = '#include <a>'\n# end\n"),
            "x = 1  \ns = '#include <a>'\n\n"
        );
    }

    const KERNELBENCH_MD5: &str = "05e24504a15f43b469a14ae2ddb407db";

    #[test]
    fn md5_of_a_raw_docstring_matches_kernelbench() {
        // KernelBench's regex removes `"""..."""` and leaves the `r` prefix; computed with
        // KernelBench's get_code_hash (src/dataset.py) in Python.
        let src = "import torch\n\n\nclass Model(torch.nn.Module):\n    r\"\"\"Applies ReLU: $y = \\max(0, x)$ # not a comment.\"\"\"\n\n    def forward(self, x):  # the op\n        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(4, 4)]\n\n\ndef get_init_inputs():\n    return []\n";
        assert!(src.contains("r\"\"\"Applies ReLU: $y = \\max"));
        assert_eq!(hashes(src).1, "3878c086e597329e52518309ffaab937");
        assert_eq!(kernelbench_code_hash(SRC), KERNELBENCH_MD5);
    }
}

//! Just enough of the C preprocessor to see through macros: tokens of a macro body (comments and
//! string literals dropped), object- and function-like expansion, `##` pasting.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Macro {
    pub params: Option<Vec<String>>,
    pub body: String,
    /// Offset of the body in the extension text.
    pub body_at: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tok {
    pub text: String,
    /// Byte range in the text that was tokenized.
    pub range: Range<usize>,
}

impl Tok {
    pub fn is_ident(&self) -> bool {
        self.text
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    }
}

/// Tokens of C source: identifiers (with `::` joined into one qualified token), numbers,
/// `##`, `#`, and single punctuation. Comments, string and char literals are skipped.
pub fn tokenize(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        // Skipping an escape in a literal can land inside a multi-byte character.
        if !s.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let c = b[i];
        if c.is_ascii_whitespace() || c == b'\\' {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i = s[i + 2..].find("*/").map_or(b.len(), |k| i + 2 + k + 2);
        } else if c == b'"' || c == b'\'' {
            let mut j = i + 1;
            while j < b.len() && b[j] != c && b[j] != b'\n' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            i = (j + 1).min(b.len());
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let start = i;
            loop {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80)
                {
                    i += 1;
                }
                // `a::b` is one token.
                if b.get(i) == Some(&b':')
                    && b.get(i + 1) == Some(&b':')
                    && b.get(i + 2)
                        .is_some_and(|x| x.is_ascii_alphabetic() || *x == b'_')
                {
                    i += 2;
                    continue;
                }
                break;
            }
            out.push(Tok {
                text: s[start..i].to_string(),
                range: start..i,
            });
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            out.push(Tok {
                text: s[start..i].to_string(),
                range: start..i,
            });
        } else if c == b'#' && b.get(i + 1) == Some(&b'#') {
            out.push(Tok {
                text: "##".into(),
                range: i..i + 2,
            });
            i += 2;
        } else {
            let len = s[i..].chars().next().map_or(1, |ch| ch.len_utf8());
            out.push(Tok {
                text: s[i..i + len].to_string(),
                range: i..i + len,
            });
            i += len;
        }
    }
    out
}

/// Expands the macros in `toks` (recursively, depth-limited) and applies `##`. Resulting tokens
/// keep the range of the token they came from in the original list, so a finding lands on the
/// macro use. Also returns the identifiers that `##` produced.
pub fn expand(toks: &[Tok], macros: &HashMap<String, Macro>, depth: u32) -> (Vec<Tok>, Vec<Tok>) {
    let mut out = Vec::new();
    let mut pasted = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let Some(m) = macros.get(&t.text).filter(|_| depth < 8 && t.is_ident()) else {
            out.push(t.clone());
            i += 1;
            continue;
        };
        let body = tokenize(&m.body);
        let (mut replaced, next) = match &m.params {
            None => (body, i + 1),
            Some(params) => {
                if toks.get(i + 1).map(|x| x.text.as_str()) != Some("(") {
                    out.push(t.clone());
                    i += 1;
                    continue;
                }
                let (args, next) = split_args(toks, i + 1);
                let mut r = Vec::new();
                for bt in body {
                    match params.iter().position(|p| *p == bt.text) {
                        Some(k) => r.extend(args.get(k).cloned().unwrap_or_default()),
                        None => r.push(bt),
                    }
                }
                (r, next)
            }
        };
        // Everything produced by this use points at the macro name.
        for r in &mut replaced {
            r.range = t.range.clone();
        }
        let (glued, new) = paste(replaced);
        pasted.extend(new);
        let (inner, inner_pasted) = expand(&glued, macros, depth + 1);
        out.extend(inner);
        pasted.extend(inner_pasted);
        i = next;
    }
    (out, pasted)
}

/// Splits `( a, b(c, d), e )` starting at `open`; returns the argument token lists and the index
/// after the closing parenthesis.
fn split_args(toks: &[Tok], open: usize) -> (Vec<Vec<Tok>>, usize) {
    let mut args = vec![Vec::new()];
    let mut level = 0;
    let mut i = open;
    while i < toks.len() {
        let x = toks[i].text.as_str();
        match x {
            "(" => {
                level += 1;
                if level > 1 {
                    args.last_mut().unwrap().push(toks[i].clone());
                }
            }
            ")" => {
                level -= 1;
                if level == 0 {
                    return (args, i + 1);
                }
                args.last_mut().unwrap().push(toks[i].clone());
            }
            "," if level == 1 => args.push(Vec::new()),
            _ => args.last_mut().unwrap().push(toks[i].clone()),
        }
        i += 1;
    }
    (args, toks.len())
}

fn paste(toks: Vec<Tok>) -> (Vec<Tok>, Vec<Tok>) {
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    let mut pasted = Vec::new();
    let mut it = toks.into_iter().peekable();
    while let Some(t) = it.next() {
        if t.text == "##" {
            if let (Some(prev), Some(next)) = (out.last_mut(), it.next()) {
                prev.text.push_str(&next.text);
                pasted.push(prev.clone());
            }
            continue;
        }
        out.push(t);
    }
    // Keep only final pasted names (a ## b ## c yields abc).
    pasted.retain(|p| out.iter().any(|o| o.text == p.text));
    (out, pasted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(params: Option<&[&str]>, body: &str) -> Macro {
        Macro {
            params: params.map(|p| p.iter().map(|s| s.to_string()).collect()),
            body: body.into(),
            body_at: 0,
        }
    }

    #[test]
    fn tokenizer_skips_comments_and_strings_and_joins_qualified_names() {
        let t: Vec<String> = tokenize("a::b(x) // cublas\n/* cudnn */ \"cublasSgemm\" c##d")
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert_eq!(t, ["a::b", "(", "x", ")", "c", "##", "d"]);
        // An escape before a multi-byte character inside a literal does not split it.
        assert_eq!(
            tokenize("\"\\é\" x").last().map(|t| t.text.as_str()),
            Some("x")
        );
    }

    #[test]
    fn pasting_through_nested_macros() {
        let mut macros = HashMap::default();
        macros.insert("CAT".into(), m(Some(&["a", "b"]), "a##b"));
        macros.insert("MK".into(), m(None, "CAT(cudaStream, Create)"));
        let toks = tokenize("MK(&s);");
        let (out, pasted) = expand(&toks, &macros, 0);
        assert_eq!(out[0].text, "cudaStreamCreate");
        assert_eq!(out[0].range, 0..2, "points at the macro use");
        assert_eq!(pasted.len(), 1);
        assert_eq!(pasted[0].text, "cudaStreamCreate");
    }
}

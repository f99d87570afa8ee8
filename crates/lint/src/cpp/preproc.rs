//! The preprocessor and assembly: `#include`, `#define` (macros expanded at their uses), `asm`.

use super::*;

impl<'t> Analyzer<'t> {
    /// A macro used in code: everything it expands to counts as called/launched from here, and
    /// names built with `##` are judged like names written out.
    pub(in crate::cpp) fn macro_use(&mut self, node: Node<'t>, name: &str) {
        let m = &self.macros[name];
        // For a function-like macro take the argument list that follows.
        let span = match (&m.params, node.parent()) {
            (Some(_), Some(p)) if p.kind_fast() == "call_expression" => p.byte_range(),
            _ => node.byte_range(),
        };
        let toks: Vec<_> = tokenize(&self.text[span.clone()])
            .into_iter()
            .map(|mut t| {
                t.range = t.range.start + span.start..t.range.end + span.start;
                t
            })
            .collect();
        let (expanded, pasted) = expand(&toks, &self.macros, 0);
        let pasted_names: HashSet<String> = pasted.iter().map(|p| p.text.clone()).collect();
        for p in &pasted {
            if api_like(&p.text) {
                self.token_pasting(
                    p.range.clone(),
                    format!("token pasting (`##`) in macro `{name}` builds the API name `{}`; write API calls out", p.text),
                );
            }
        }
        for t in expanded.iter().filter(|t| t.is_ident()) {
            if let Some(i) = self.cur {
                self.funcs[i]
                    .calls
                    .insert(last_segment(&t.text).to_string());
                self.funcs[i]
                    .launches
                    .insert(last_segment(&t.text).to_string());
            }
            if pasted_names.contains(&t.text) {
                if let Some((code, msg)) = classify(&t.text, NameKind::Type) {
                    self.flag(
                        code,
                        t.range.clone(),
                        format!("{msg} (built by macro `{name}`)"),
                    );
                }
            }
        }
    }

    pub(in crate::cpp) fn include(&mut self, node: Node<'t>) {
        let Some(path) = node.field("path") else {
            return;
        };
        let p = self.t(path).trim_matches(['<', '>', '"']);
        let file = p.rsplit('/').next().unwrap_or(p);
        if p.starts_with("cutlass/") || p.starts_with("cute/") {
            self.uses_cutlass = true;
        }
        let vendor = [
            "cublas", "cudnn", "cufft", "cusparse", "cusolver", "cutensor",
        ]
        .iter()
        .any(|v| file.starts_with(v))
            || p.contains("cutlass/library/")
            || (p.contains("cutlass/gemm/device/") || p.contains("cutlass/conv/device/"))
                && self.library_ops_banned()
            || p.contains("ATen/cuda/CUDABlas")
            || p.contains("ATen/cudnn/");
        // A header alone calls nothing (templates copy boilerplate includes): what is used
        // from it is flagged where it is used (`cublasSgemm`, `wmma::fragment`).
        let _ = vendor;
    }

    pub(in crate::cpp) fn define(&mut self, node: Node<'t>) {
        let Some(name) = node.field("name") else {
            return;
        };
        let name = self.t(name).to_string();
        if let Some((code, msg)) = classify(&name, NameKind::Value) {
            let r = node
                .field("name")
                .map_or(node.byte_range(), |n| n.byte_range());
            self.flag(code, r, format!("{msg} (defined as a macro)"));
        }
        let params = node.field("parameters").map(|p| {
            let mut c = p.walk();
            p.named_children(&mut c)
                .filter(|x| x.kind_fast() == "identifier")
                .map(|x| self.t(x).to_string())
                .collect::<Vec<_>>()
        });
        let (body, body_at) = node
            .field("value")
            .map_or((String::new(), node.end_byte()), |v| {
                (self.t(v).to_string(), v.start_byte())
            });
        // Names written in the body are judged where they are written.
        let toks: Vec<_> = tokenize(&body)
            .into_iter()
            .map(|mut t| {
                t.range = t.range.start + body_at..t.range.end + body_at;
                t
            })
            .collect();
        let params_set: Vec<String> = params.clone().unwrap_or_default();
        for t in toks
            .iter()
            .filter(|t| t.is_ident() && !params_set.contains(&t.text))
        {
            if let Some((code, msg)) = classify(&t.text, NameKind::Type) {
                self.flag(code, t.range.clone(), format!("{msg} (in macro `{name}`)"));
            }
        }
        // An object-like macro that pastes or uses other macros: expand it here.
        if params.is_none() {
            let (expanded, pasted) = expand(&toks, &self.macros, 0);
            let pasted_names: HashSet<String> = pasted.iter().map(|p| p.text.clone()).collect();
            for t in expanded.iter().filter(|t| pasted_names.contains(&t.text)) {
                if api_like(&t.text) {
                    self.token_pasting(t.range.clone(), format!("token pasting (`##`) in macro `{name}` builds the API name `{}`; write API calls out", t.text));
                }
                if let Some((code, msg)) = classify(&t.text, NameKind::Type) {
                    self.flag(
                        code,
                        t.range.clone(),
                        format!("{msg} (built by macro `{name}`)"),
                    );
                }
            }
        }
        self.macros.insert(
            name,
            Macro {
                params,
                body,
                body_at,
            },
        );
    }

    pub(in crate::cpp) fn asm(&mut self, node: Node<'t>) {
        if let Some(i) = self.cur {
            self.funcs[i].has_asm = true;
        }
        let code = node.field("assembly_code").unwrap_or(node);
        let t = rules::precision::joined_literals(self.t(code), &self.macros);
        if t.contains("globaltimer") || t.contains("%clock") {
            self.timer_tampering(
                node.byte_range(),
                "inline PTX reads a clock register (`%globaltimer`, `%clock`): a kernel that reads the time can tell timed calls from checked ones".into(),
            );
        }
        self.asm_precision(node);
    }
}

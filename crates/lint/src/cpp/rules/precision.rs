//! KG610 `cpp-precision-downgrade`: half/bf16/TF32 on an fp32 problem, except in branches only
//! half inputs take.

use crate::cpp::macros::Macro;
use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// Every KG610 finding of the analyzer is raised here (dropped on fp16/bf16 problems and in half-only branches).
    pub(in crate::cpp) fn precision_downgrade(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG610, range, msg);
    }

    /// Reduced-precision findings by whether the code they are in is proven to run on fp32:
    /// kernels and device functions launched (or called) from host code outside any dtype test
    /// keep their errors; those launched only on a branch of a dtype test the analysis cannot
    /// decide, or reached from no host code at all, become warnings; those only branches for
    /// half/bf16 inputs launch are dropped (fp32 inputs never run them).
    pub(in crate::cpp) fn judge_precision_reach(&mut self) {
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::default();
        for (i, f) in self.funcs.iter().enumerate() {
            by_name.entry(f.name.as_str()).or_default().push(i);
        }
        #[derive(Clone, Copy, PartialEq)]
        enum Edges {
            Full,
            Maybe,
            All,
        }
        let reach = |edges: Edges| -> Vec<bool> {
            let mut seen = vec![false; self.funcs.len()];
            let mut queue: Vec<usize> = (0..self.funcs.len())
                .filter(|&i| self.funcs[i].kind == FuncKind::Host)
                .collect();
            while let Some(i) = queue.pop() {
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                let f = &self.funcs[i];
                let launches: Vec<&String> = match edges {
                    Edges::Full => f.full_launches.iter().collect(),
                    Edges::Maybe => f.full_launches.iter().chain(&f.maybe_launches).collect(),
                    Edges::All => f.launches.iter().collect(),
                };
                for n in launches.into_iter().chain(f.calls.iter()) {
                    queue.extend(by_name.get(n.as_str()).into_iter().flatten().copied());
                }
            }
            seen
        };
        let (all, maybe, full) = (reach(Edges::All), reach(Edges::Maybe), reach(Edges::Full));
        // (range of the function, what to do with its findings)
        let mut verdicts: Vec<(Range<usize>, Option<String>)> = Vec::new();
        for (i, f) in self.funcs.iter().enumerate() {
            if f.kind == FuncKind::Host || full[i] {
                continue;
            }
            let why = if maybe[i] {
                Some(format!("it is in `{}`, launched only on a branch of a dtype test the analysis cannot decide, so it is not proven to run on this fp32 problem", f.name))
            } else if all[i] {
                None // launched only on branches half/bf16 inputs take
            } else {
                Some(format!(
                    "it is in `{}`, which no host code is proven to launch or call",
                    f.name
                ))
            };
            verdicts.push((f.range.clone(), why));
        }
        if verdicts.is_empty() {
            return;
        }
        let mut kept = Vec::new();
        for (code, r, msg) in std::mem::take(&mut self.findings) {
            let verdict = (code == Rule::KG610)
                .then(|| verdicts.iter().find(|(f, _)| f.contains(&r.start)))
                .flatten();
            match verdict {
                None => kept.push((code, r, msg)),
                Some((_, None)) => {}
                Some((_, Some(why))) => {
                    let why = why.clone();
                    self.unproven(code, r, msg, &why);
                }
            }
        }
        self.findings = kept;
    }
}

/// A condition only half/bf16 inputs satisfy: a conjunction with a dtype test against a
/// half type (`x.scalar_type() == at::kHalf && n % 2 == 0`, `std::is_same<scalar_t, at::Half>`).
pub(in crate::cpp) fn half_only_test(cond: &str) -> bool {
    let c: String = cond.chars().filter(|ch| !ch.is_whitespace()).collect();
    if c.contains("||") || c.contains("!=") {
        return false;
    }
    let half = |t: &str| {
        [
            "kHalf",
            "kFloat16",
            "kBFloat16",
            "ScalarType::Half",
            "ScalarType::BFloat16",
        ]
        .iter()
        .any(|h| t.contains(h))
    };
    c.trim_matches(|ch| ch == '(' || ch == ')')
        .split("&&")
        .any(|part| {
            let part = part.trim_start_matches('(');
            !part.starts_with('!')
                && ((part.contains("==")
                    && half(part)
                    && (part.contains("scalar_type()") || part.contains("dtype()")))
                    || (part.contains("is_same")
                        && [
                            "Half",
                            "BFloat16",
                            "__half",
                            "__nv_bfloat16",
                            ",half>",
                            ",half2>",
                        ]
                        .iter()
                        .any(|h| part.contains(h))))
        })
}

/// Text that looks at a dtype: `scalar_type()`, `dtype()`, `element_size()`, `is_same`,
/// `sizeof(scalar_t)`, a half/bf16/fp32 dtype constant or half type name (not a variable
/// named `half`, as in a tree reduction).
pub(in crate::cpp) fn dtype_text(t: &str) -> bool {
    [
        "scalar_type",
        "dtype",
        "element_size",
        "itemsize",
        "is_same",
        "sizeof(scalar_t",
        "sizeof(T)",
        "is_floating_point",
        "ScalarType",
        "kFloat",
        "kHalf",
        "kBFloat16",
        "__half",
        "half2",
        "Half",
        "BFloat16",
        "bfloat16",
    ]
    .iter()
    .any(|k| t.contains(k))
}

/// A half/bf16 dtype constant (`at::kHalf`, `torch::kBFloat16`, `at::ScalarType::Half`).
pub(in crate::cpp) fn half_dtype(t: &str) -> bool {
    [
        "kHalf",
        "kFloat16",
        "kBFloat16",
        "ScalarType::Half",
        "ScalarType::BFloat16",
    ]
    .iter()
    .any(|h| t.contains(h))
}

/// Text naming a half or bf16 type (`at::Half`, `__half`, `half2`, `__nv_bfloat16`).
pub(in crate::cpp) fn half_type_text(t: &str) -> bool {
    ["Half", "half", "BFloat16", "bfloat16"]
        .iter()
        .any(|h| t.contains(h))
}

/// An fp32 dtype constant (`at::kFloat`, `torch::kFloat32`, `at::ScalarType::Float`), not
/// `kFloat16`/`kFloat8_*`.
fn float_dtype(t: &str) -> bool {
    t.match_indices("kFloat")
        .chain(t.match_indices("ScalarType::Float"))
        .any(|(k, m)| {
            let rest = &t[k + m.len()..];
            !rest.starts_with("16") && !rest.starts_with('8') && !rest.starts_with("64")
        })
}

/// A dtype comparison (`x.scalar_type() == at::kFloat`, `x.dtype() == torch::kFloat32`) or
/// `std::is_same<scalar_t, float>`.
fn dtype_test(part: &str) -> bool {
    part.contains("scalar_type()") || part.contains("dtype()") || part.contains("is_same")
}

/// A condition fp32 inputs always satisfy and nothing else decides: `x.scalar_type() ==
/// at::kFloat`, or a disjunction of dtype tests one of which is fp32. Its `else` is dead on an
/// fp32 problem.
pub(in crate::cpp) fn float_only_test(cond: &str) -> bool {
    let c: String = cond.chars().filter(|ch| !ch.is_whitespace()).collect();
    let c = c.trim_matches(|ch| ch == '(' || ch == ')');
    if c.contains("&&") || c.contains("!=") || c.contains('!') && !c.contains("!=") {
        return false;
    }
    let parts: Vec<&str> = c.split("||").collect();
    parts
        .iter()
        .all(|p| dtype_test(p) && (p.contains("==") || p.contains("is_same")))
        && parts.iter().any(|p| {
            float_dtype(p)
                || p.contains("is_same") && (p.contains(",float>") || p.contains(",float,"))
        })
}

/// `x.scalar_type() != at::kFloat`: only non-fp32 inputs take the branch.
pub(in crate::cpp) fn not_float_test(cond: &str) -> bool {
    let c: String = cond.chars().filter(|ch| !ch.is_whitespace()).collect();
    let c = c.trim_matches(|ch| ch == '(' || ch == ')');
    c.split("&&")
        .any(|p| p.contains("!=") && !p.contains("||") && dtype_test(p) && float_dtype(p))
        && !c.contains("||")
}

impl<'t> Analyzer<'t> {
    /// Overloads for half types (`store(at::Half* p, float v)` next to `store(float* p, float
    /// v)`): a call with fp32 arguments picks the fp32 overload, so the half one runs only for
    /// half instantiations; its reduced-precision findings are dropped.
    pub(in crate::cpp) fn drop_half_overloads(&mut self) {
        let overloads: Vec<Range<usize>> = self
            .funcs
            .iter()
            .filter(|f| f.half_params.iter().any(|h| *h))
            .filter(|f| {
                self.funcs.iter().any(|g| {
                    g.name == f.name
                        && g.half_params.len() == f.half_params.len()
                        && f.half_params
                            .iter()
                            .zip(&g.half_params)
                            .any(|(fh, gh)| *fh && !*gh)
                        && !g
                            .half_params
                            .iter()
                            .zip(&f.half_params)
                            .any(|(gh, fh)| *gh && !*fh)
                })
            })
            .map(|f| f.range.clone())
            .collect();
        if overloads.is_empty() {
            return;
        }
        self.findings.retain(|(code, r, _)| {
            *code != Rule::KG610 || !overloads.iter().any(|o| o.contains(&r.start))
        });
    }

    /// `.to(at::kHalf)`, `.half()`: a conversion to reduced precision.
    pub(in crate::cpp) fn reduced_precision_method(
        &mut self,
        node: Node<'t>,
        at: &Range<usize>,
        m: &str,
    ) {
        if matches!(m, "to" | "toType" | "dtype" | "type") {
            let args = node.field("arguments").map(|a| self.t(a)).unwrap_or("");
            if ["kHalf", "kFloat16", "kBFloat16", "Half", "BFloat16"]
                .iter()
                .any(|h| args.contains(h))
            {
                self.precision_downgrade(
                    at.clone(),
                    format!("`.{m}{args}` converts to reduced precision on an fp32 problem"),
                );
            }
        }
        if matches!(m, "half" | "bfloat16") {
            self.precision_downgrade(
                at.clone(),
                format!("`.{m}()` converts to reduced precision on an fp32 problem"),
            );
        }
    }
}

/// The text of C string literals as the compiler sees it: adjacent literals joined
/// (`"mma.sync.aligned" ".m16n8k8"` is `mma.sync.aligned.m16n8k8`), object-like macros that
/// stand between them expanded (`"mma.sync" SHAPE ".row"`), raw literals (`R"(...)"`) read as
/// written; comments and whitespace between literals dropped. Anything else is kept as it
/// stands, so a split mnemonic reads the same as one written out.
pub(in crate::cpp) fn joined_literals(text: &str, macros: &HashMap<String, Macro>) -> String {
    let mut out = String::new();
    join_into(text, macros, 0, &mut out);
    out
}

fn join_into(text: &str, macros: &HashMap<String, Macro>, depth: u32, out: &mut String) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            i = text[i..].find('\n').map_or(b.len(), |k| i + k);
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i = text[i + 2..].find("*/").map_or(b.len(), |k| i + 2 + k + 2);
        } else if c == b'R' && b.get(i + 1) == Some(&b'"') {
            // R"delim( ... )delim"
            let open = text[i + 2..].find('(').map(|k| i + 2 + k);
            let Some(open) = open else { break };
            let close = format!("){}\"", &text[i + 2..open]);
            let end = text[open + 1..]
                .find(&close)
                .map_or(b.len(), |k| open + 1 + k);
            out.push_str(&text[open + 1..end]);
            i = (end + close.len()).min(b.len());
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str(&text[i + 1..j.min(b.len())]);
            i = (j + 1).min(b.len());
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            // `u8"..."`, `L"..."`: a prefix of the literal that follows.
            if b.get(i) == Some(&b'"') && matches!(word, "u8" | "u" | "U" | "L") {
                continue;
            }
            match macros.get(word) {
                Some(m) if m.params.is_none() && depth < 8 => {
                    join_into(&m.body, macros, depth + 1, out)
                }
                _ => out.push_str(word),
            }
        } else {
            let ch = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + ch]);
            i += ch;
        }
    }
}

/// What makes PTX reduced precision, read from its joined text: TF32, fp16, bf16, fp8/fp6/fp4
/// operand types anywhere (`mma.sync...tf32`, `wgmma...bf16`, `cvt.rna.tf32.f32`,
/// `cvt.rn.f16x2.f32`), and integer MMA (`mma...s8`), which needs the data quantised.
pub(in crate::cpp) fn ptx_reduced_precision(ptx: &str) -> Option<&'static str> {
    let has_type = |ty: &str| {
        ptx.match_indices(ty).any(|(k, _)| {
            !ptx[k + ty.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
    };
    if ptx.contains("tf32") {
        return Some("TF32");
    }
    if has_type(".bf16") {
        return Some("bf16");
    }
    if has_type(".f16") {
        return Some("fp16");
    }
    if [
        ".e4m3", ".e5m2", ".e2m1", ".e3m2", ".e2m3", ".ue8m0", ".ue4m3",
    ]
    .iter()
    .any(|t| ptx.contains(t))
    {
        return Some("fp8/fp6/fp4");
    }
    let mma = ptx.contains("mma.") || ptx.contains("mma_");
    if mma
        && [".s8", ".u8", ".s4", ".u4", ".b1"]
            .iter()
            .any(|t| has_type(t))
    {
        return Some("integer");
    }
    None
}

/// The bit mask that rounds an fp32 value to TF32 (10 mantissa bits) or bf16 (7) with integer
/// operations instead of `cvt.rna.tf32.f32`: `__float_as_uint(v) & 0xffffe000`.
pub(in crate::cpp) fn mantissa_mask(lit: &str) -> Option<&'static str> {
    let hex = lit
        .trim_end_matches(['u', 'U', 'l', 'L'])
        .to_ascii_lowercase();
    match hex.as_str() {
        "0xffffe000" => Some("TF32"),
        "0xffff0000" => Some("bf16"),
        _ => None,
    }
}

impl<'t> Analyzer<'t> {
    /// `asm("mma.sync.aligned" ".m16n8k8.row.col.f32.t" "f32...")`: the instruction text as
    /// the assembler gets it, judged for reduced-precision types.
    pub(in crate::cpp) fn asm_precision(&mut self, node: Node<'t>) {
        let code = node.field("assembly_code").unwrap_or(node);
        let ptx = joined_literals(self.t(code), &self.macros);
        if let Some(kind) = ptx_reduced_precision(&ptx) {
            self.precision_downgrade(
                code.byte_range(),
                format!(
                    "inline PTX computes in {kind} on an fp32 problem (`{}`)",
                    first_instruction(&ptx)
                ),
            );
        }
    }

    /// `__float_as_uint(v) & 0xffffe000`: an fp32 value's mantissa cut to TF32 or bf16 by hand.
    pub(in crate::cpp) fn mantissa_truncation(&mut self, node: Node<'t>, l: Node<'t>, r: Node<'t>) {
        let (lit, other) = if r.kind_fast() == "number_literal" {
            (r, l)
        } else {
            (l, r)
        };
        if lit.kind_fast() != "number_literal" {
            return;
        }
        let Some(kind) = mantissa_mask(self.t(lit)) else {
            return;
        };
        let mut o = self.t(other).to_string();
        if other.kind_fast() == "identifier" {
            if let Some(v) = self.state.inits.get(self.t(other)) {
                o = self.t(*v).to_string();
            }
        }
        let float_bits = [
            "float_as_uint",
            "float_as_int",
            "__float_as",
            "_cast<unsigned",
            "_cast<uint32_t",
            "_cast<int",
            "(unsigned",
            "(uint32_t",
        ]
        .iter()
        .any(|p| o.contains(p));
        if float_bits {
            self.precision_downgrade(
                node.byte_range(),
                format!("`{}` rounds an fp32 value to {kind} precision with integer operations on an fp32 problem", self.t(node)),
            );
        }
    }
}

/// The instruction that carries the finding, for the message.
fn first_instruction(ptx: &str) -> String {
    let line = ptx
        .split([';', '\n'])
        .map(|l| l.trim_start_matches(|c: char| c == '{' || c.is_whitespace()))
        .find(|l| ptx_reduced_precision(l).is_some())
        .unwrap_or("")
        .trim();
    let ins: String = line
        .split_whitespace()
        .next()
        .unwrap_or("")
        .chars()
        .take(80)
        .collect();
    ins
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG610: RuleMeta = RuleMeta {
    code: "KG610",
    name: "cpp-precision-downgrade",
    severity: Error,
    summary: "CUDA code computes in fp16/bf16/TF32 on an fp32 problem",
    error_when: "reduced precision in code proven to run on fp32: host code, and kernels or device functions launched or called from host code off every dtype test the analysis cannot decide",
    warn_when: "it is on a branch of a dtype test the analysis cannot decide (a helper predicate, `kHalf || kBFloat16`, an element size), or in a kernel only such branches launch, or in code no host function is proven to launch or call; the runtime checks decide. Branches only half inputs take raise nothing",
    doc: "On an fp32 problem the CUDA uses reduced-precision types or conversions (`__half`, `half2`, `__float2half`, `__nv_bfloat16`, fp8 types such as `__nv_fp8_e4m3`, `wmma` fragments and `wmma::precision::tf32`, TF32 conversions, `.half()`, `at::kHalf`), inline PTX with TF32, fp16, bf16, fp8 or integer operand types (`mma.sync`/`wmma`/`wgmma` with `.tf32`, `.f16`, `.bf16`, `.e4m3`, `.s8`; `cvt.rna.tf32.f32`), read after joining adjacent string literals and the macros between them (`\"mma.sync.aligned\" SHAPE \".row.col.f32.t\" \"f32...\"` is one mnemonic), rounds fp32 bits to TF32 or bf16 by hand (`__float_as_uint(v) & 0xffffe000`), or asks cuBLAS/cuDNN for reduced precision (`CUBLAS_TF32_TENSOR_OP_MATH`, `cublasSetMathMode` with anything but the default or pedantic mode, `CUBLAS_COMPUTE_32F_FAST_TF32`, `CUDA_R_16F`). It is faster but answers a different problem. Silent on fp16 and bf16 problems, on `#include <mma.h>` or `<cuda_fp16.h>` alone, and on half/bf16 code fp32 inputs never reach: the branch of a dtype test (`if (x.scalar_type() == at::kHalf)`, also through a bool local, the `else` of `== at::kFloat`, `case at::kHalf:` in a switch on the dtype) and the kernels only that branch launches, explicit specialisations for half types (`template <> struct Acc<at::Half>`), and overloads for half types next to an fp32 overload of the same function (`store(at::Half*, float)` beside `store(float*, float)`: fp32 arguments pick the fp32 one), as under `AT_DISPATCH_FLOATING_TYPES_AND_HALF`. Compute in fp32.",
    bad: "__half h = __float2half(x[i]);",
    good: "float v = x[i];",
};

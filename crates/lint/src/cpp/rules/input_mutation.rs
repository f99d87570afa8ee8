//! KG608 `cpp-input-mutation` and KG609 `cpp-unwritten-output`: what host code and kernels write.
//! The analyzer records stores through parameters and data pointers as it walks; `input_writes`
//! and `returned_inputs` judge them once every function is seen.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::{Error, Warning};
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// Every KG608 finding of the analyzer is raised here: an error for a parameter `forward`
    /// passes one of its inputs (or one no call site shows), a warning for one whose argument
    /// the Python analysis could not trace, nothing for the candidate's own buffers.
    pub(in crate::cpp) fn input_mutation(
        &mut self,
        range: Range<usize>,
        msg: String,
        origin: Origin,
    ) {
        match origin {
            Origin::Owned => {}
            Origin::Input | Origin::NoCallSite => self.flag(Rule::KG608, range, msg),
            Origin::Unknown => self.soft_findings.push((
                Rule::KG608,
                range,
                format!("{msg} (a warning: what `forward` passes here could not be traced to one of its inputs or to the module's own buffers and parameters)"),
            )),
        }
    }

    /// Every KG609 finding of the analyzer is raised here.
    pub(in crate::cpp) fn unwritten_output(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG609, range, msg);
    }

    /// Parameters of the current function handed on as is to `callee` (`launch(p, n)`).
    pub(in crate::cpp) fn record_param_passes(&mut self, callee: &str, call: Node<'t>) {
        let (Some(i), Some(al)) = (self.cur, call.field("arguments")) else {
            return;
        };
        if self.funcs[i].params.is_empty() {
            return;
        }
        let mut c = self.cursor(al);
        let mut passes = Vec::new();
        for (k, a) in al
            .named_children(&mut c)
            .filter(|n| n.kind_fast() != "comment")
            .enumerate()
        {
            let mut a = a;
            // `(float*)p`, `reinterpret_cast<float4*>(p)`, `p + off`
            for _ in 0..3 {
                a = match a.kind_fast() {
                    "cast_expression" => a.field("value").unwrap_or(a),
                    "binary_expression" => a.field("left").unwrap_or(a),
                    "call_expression" => a
                        .field("arguments")
                        .and_then(|x| x.named_child(0))
                        .filter(|_| self.t(a).contains("_cast<"))
                        .unwrap_or(a),
                    _ => break,
                };
            }
            if a.kind_fast() == "identifier" {
                let t = self.t(a);
                if let Some(j) = self.funcs[i].params.iter().position(|p| p.name == t) {
                    passes.push((callee.to_string(), k, j));
                }
            }
        }
        self.cursors.push(c);
        self.funcs[i].param_passes.extend(passes);
    }

    /// Whether a function named `callee` writes through its argument `k` (a kernel storing
    /// through the pointer, a helper handing it to one, `cudaMemset`/`cudaMemcpy` into it).
    pub(in crate::cpp) fn writes_arg(&self, callee: &str, k: usize, depth: u32) -> bool {
        if k == 0
            && (callee.starts_with("cudaMemset")
                || callee.starts_with("cuMemset")
                || callee.starts_with("cuMemcpy")
                || callee.starts_with("cudaMemcpy") && !callee.contains("ToSymbol"))
        {
            return true;
        }
        if depth > 4 {
            return false;
        }
        self.funcs.iter().filter(|f| f.name == callee).any(|f| {
            if f.kind == FuncKind::Global {
                return f.params.get(k).is_some_and(|p| f.writes.contains(&p.name));
            }
            f.param_passes
                .iter()
                .any(|(c, m, j)| *j == k && self.writes_arg(c, *m, depth + 1))
        })
    }

    /// The base name of a written place: `p[i]`, `*p`, `*(p + i)`, `&p[i]`, `p[i].x` -> `p`.
    /// `pure`: the place is only stored to (`=`, `atomicAdd`), not read as well (`+=`, `++`).
    pub(in crate::cpp) fn record_write(&mut self, mut n: Node<'t>, pure: bool) {
        let Some(i) = self.cur else { return };
        let site = n.byte_range();
        for _ in 0..8 {
            let next = match n.kind_fast() {
                "identifier" => {
                    let name = self.t(n);
                    let f = &mut self.funcs[i];
                    let param = f.params.iter().position(|p| p.name == name);
                    if pure {
                        if let Some(k) = param {
                            f.param_stores[k] += 1;
                        }
                    }
                    f.writes.insert(name.to_string());
                    if param.is_none()
                        && self.state.inits.get(name).is_some_and(|v| {
                            let t = &self.text[v.byte_range()];
                            t.contains("data_ptr") || t.contains("accessor") || t.contains(".data<")
                        })
                    {
                        self.funcs[i].stores_tensor_data = true;
                    }
                    // A local pointer into a parameter (`float* row = out + r * cols;`):
                    // the store goes through to the parameter.
                    match (param, self.state.inits.get(name)) {
                        (None, Some(v)) if self.state.ptr_locals.contains(name) => Some(*v),
                        _ => return,
                    }
                }
                "call_expression" if self.t(n).contains("_cast<") => {
                    n.field("arguments").and_then(|a| a.named_child(0))
                }
                // Reached a tensor parameter's data pointer: host code stores into that tensor.
                "call_expression" => {
                    if self.t(n).contains("data_ptr") || self.t(n).contains(".data<") {
                        self.funcs[i].stores_tensor_data = true;
                    }
                    if let Some(p) = self.input_param_of(n, 0) {
                        self.funcs[i].host_writes.push((p, site));
                    }
                    return;
                }
                "subscript_expression" | "pointer_expression" | "field_expression" => {
                    n.field("argument")
                }
                "binary_expression" => n.field("left"),
                "cast_expression" => n.field("value"),
                "parenthesized_expression" => n.named_child(0),
                _ => None,
            };
            match next {
                Some(x) => n = x,
                None => return,
            }
        }
    }

    /// The tensor parameter of the current host function whose data pointer `n` passes:
    /// `x.data_ptr<float>()`, `(float*)x.data_ptr()`, or a local initialised from one.
    pub(in crate::cpp) fn input_param_of(&self, n: Node<'t>, depth: u32) -> Option<String> {
        let i = self.cur?;
        if depth > 4 {
            return None;
        }
        if n.kind_fast() == "identifier" {
            let v = self.state.inits.get(self.t(n))?;
            return self.input_param_of(*v, depth + 1);
        }
        if n.kind_fast() == "call_expression" {
            let f = n.field("function")?;
            if f.kind_fast() == "field_expression" {
                let m = f.field("field").and_then(|x| self.qualname(x))?;
                let r = f.field("argument")?;
                if matches!(m.as_str(), "data_ptr" | "data" | "mutable_data_ptr")
                    && r.kind_fast() == "identifier"
                {
                    let name = self.t(r);
                    return self.funcs[i]
                        .params
                        .iter()
                        .find(|p| p.is_tensor && p.name == name)
                        .map(|p| p.name.clone());
                }
            }
        }
        // Look through casts and pointer arithmetic only: in an aggregate (`Params p{x_ptr,
        // out_ptr}`), a conditional or another call, which pointer ends up written is unknown.
        match n.kind_fast() {
            "initializer_list" | "conditional_expression" => return None,
            "call_expression"
                if !n
                    .field("function")
                    .is_some_and(|f| self.t(f).contains("_cast")) =>
            {
                return None
            }
            _ => {}
        }
        let mut c = n.walk();
        let children: Vec<_> = n.named_children(&mut c).collect();
        children
            .into_iter()
            .find_map(|ch| self.input_param_of(ch, depth + 1))
    }

    /// Host functions that return a tensor treat their tensor parameters as inputs: a kernel
    /// writing through one of their data pointers mutates an input.
    pub(in crate::cpp) fn input_writes(&mut self) {
        let mut hits = Vec::new();
        let hosts = self
            .funcs
            .iter()
            .filter(|f| f.kind == FuncKind::Host && f.returns_tensor);
        for host in hosts {
            for (p, range) in &host.host_writes {
                let origin = self.param_origin(host, p);
                if !host.returned_params.contains(p) && origin != Origin::Owned {
                    hits.push((
                        range.clone(),
                        format!(
                            "`{}` stores into the data of input `{p}`: inputs must not be modified",
                            &self.text[range.clone()]
                        ),
                        origin,
                    ));
                }
            }
            for (callee, args) in host.launch_args.iter().chain(&host.helper_calls) {
                for (j, (p, range)) in args.iter().enumerate() {
                    let Some(p) = p else { continue };
                    let origin = self.param_origin(host, p);
                    if host.returned_params.contains(p)
                        || origin == Origin::Owned
                        || !self.writes_arg(callee, j, 0)
                    {
                        continue;
                    }
                    hits.push((
                        range.clone(),
                        format!(
                            "`{callee}` writes through `{}`, the data of input `{p}`: inputs must not be modified",
                            &self.text[range.clone()],
                        ),
                        origin,
                    ));
                }
            }
        }
        for (r, m, o) in hits {
            self.input_mutation(r, m, o);
        }
    }

    /// `return p;` of a tensor parameter `p` is in-place compute on an input, unless `p` is an
    /// out-parameter: the function takes other tensors, and every kernel given `p`'s data
    /// only stores through it (`out[i] = ...`), never reads it.
    pub(in crate::cpp) fn returned_inputs(&mut self) {
        let mut hits = Vec::new();
        for h in self.funcs.iter().filter(|f| f.kind == FuncKind::Host) {
            for (p, range) in &h.returned_sites {
                let origin = self.param_origin(h, p);
                if !self.is_out_param(h, p) && origin != Origin::Owned {
                    hits.push((range.clone(), format!("returns its input `{p}`: the output is the input tensor, computed in place (inputs must not be modified; allocate an output)"), origin));
                }
            }
            for (p, range, msg) in &h.inplace_sites {
                hits.push((range.clone(), msg.clone(), self.param_origin(h, p)));
            }
        }
        for (r, m, o) in hits {
            self.input_mutation(r, m, o);
        }
    }

    pub(in crate::cpp) fn is_out_param(&self, host: &Func, p: &str) -> bool {
        if !host.params.iter().any(|q| q.is_tensor && q.name != p) {
            return false;
        }
        let mut stored = false;
        for (kernel, args) in &host.launch_args {
            for (j, (arg, _)) in args.iter().enumerate() {
                if arg.as_deref() != Some(p) {
                    continue;
                }
                let mut known = false;
                for k in self
                    .funcs
                    .iter()
                    .filter(|k| k.kind == FuncKind::Global && &k.name == kernel)
                {
                    known = true;
                    let Some(kp) = k.params.get(j) else {
                        return false;
                    };
                    let read = k.param_uses[j] > k.param_stores[j];
                    if read || !k.writes.contains(&kp.name) {
                        return false;
                    }
                    stored = true;
                }
                // A kernel defined elsewhere: what it does with `p` is unknown.
                if !known {
                    return false;
                }
            }
        }
        stored
    }

    /// What `forward` passes at tensor parameter `p` of `host`, over every call site: one of
    /// its inputs, only the candidate's own buffers (a workspace, an output, partial sums, the
    /// module's parameters and buffers such as BatchNorm's running statistics), something the
    /// Python analysis could not trace, or no call site seen at all.
    pub(in crate::cpp) fn param_origin(&self, host: &Func, p: &str) -> Origin {
        let Some(k) = host.params.iter().position(|q| q.name == p) else {
            return Origin::NoCallSite;
        };
        let mut py_names: Vec<&str> = vec![host.name.as_str()];
        py_names.extend(
            self.pybind_names
                .iter()
                .filter(|(_, cpp)| *cpp == host.name)
                .map(|(py, _)| py.as_str()),
        );
        let mut origin = Origin::NoCallSite;
        for name in py_names {
            if let Some(args) = self.py_args.get(name) {
                origin = match (origin, args.get(k)) {
                    (_, Some(ArgKind::Input)) | (Origin::Input, _) => Origin::Input,
                    (Origin::NoCallSite | Origin::Owned, Some(ArgKind::Owned)) => Origin::Owned,
                    _ => Origin::Unknown,
                };
            }
        }
        origin
    }
}

/// What `forward` passes a tensor parameter (see [`Analyzer::param_origin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::cpp) enum Origin {
    Input,
    Owned,
    Unknown,
    NoCallSite,
}

impl<'t> Analyzer<'t> {
    /// `x.add_(y)` on a tensor parameter: the input is modified in place.
    pub(in crate::cpp) fn inplace_on_input(
        &mut self,
        at: &Range<usize>,
        recv: Option<Node<'t>>,
        recv_t: &str,
        m: &str,
    ) {
        if m.ends_with('_') && m != "data_ptr_" {
            if let (Some(i), Some(r)) = (self.cur, recv) {
                if r.kind_fast() == "identifier"
                    && self.funcs[i]
                        .params
                        .iter()
                        .any(|p| p.is_tensor && p.name == recv_t)
                {
                    // Judged in `returned_inputs`, once the exported names are known.
                    self.funcs[i].inplace_sites.push((
                        recv_t.to_string(),
                        at.clone(),
                        format!(
                            "`{recv_t}.{m}(...)` modifies the input tensor `{recv_t}` in place"
                        ),
                    ));
                }
            }
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG608: RuleMeta = RuleMeta {
    code: "KG608",
    name: "cpp-input-mutation",
    severity: Error,
    summary: "The extension modifies an input or returns it as the output",
    error_when: "the written or returned tensor is traced to one of `forward`'s inputs",
    warn_when: "what `forward` passes could not be traced to an input or to the module's own buffers",
    doc: "A host function returns one of its input tensors (in-place compute on the input; returning an out-parameter such as `f(x, out)` ... `return out;` is fine when its kernels only store through `out`, never read it), calls an in-place method (`x.zero_()`, `x.copy_(...)`) on an input, or launches a kernel, calls a helper that launches one, or `cudaMemset`/`cudaMemcpy`s into an input's `data_ptr()` while returning a fresh output. Inputs must stay unchanged: a mutated input can make a later reference run agree with a wrong answer. What counts as an input is traced from the Python call sites: a parameter that `forward` only ever passes the candidate's own buffers (`self.workspace`, a fresh `torch.empty`, partial sums of a split-K reduction) or the module's parameters and buffers (`self.running_mean`, `self.running_var` of a BatchNorm updated in place in training mode, as `nn.BatchNorm2d` does) may be written, by a kernel or an in-place method. An error needs a parameter `forward` passes one of its inputs (or one no call site shows); a parameter whose argument the Python side cannot trace (`self.bn.running_mean` of a submodule) is a warning. Allocate an output and write to it.",
    bad: "relu_inplace<<<g, b>>>(x.data_ptr<float>(), n);\nreturn x;",
    good: "auto y = torch::empty_like(x);\nrelu<<<g, b, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\nreturn y;",
};

pub(crate) const KG609: RuleMeta = RuleMeta {
    code: "KG609",
    name: "cpp-unwritten-output",
    severity: Warning,
    summary: "An output from `torch::empty` is returned without being written",
    error_when: "never by default (a warning rule)",
    warn_when: "always: an unwritten `empty` output is a signal; the poisoned allocator and the correctness check decide",
    doc: "A host function returns a tensor allocated with `torch::empty`/`empty_like` that is never handed to a kernel or helper (only its metadata is read, or only a `data_ptr()` taken and never passed on), or returns `torch::empty_like(x)` directly. `empty` memory is whatever the caching allocator held, often the reference's freed result, so the candidate passes without computing. Pass the output to the kernel that fills it.",
    bad: "auto out = torch::empty_like(x);\nreturn out;",
    good: "auto out = torch::empty_like(x);\nk<<<g, b, 0, stream>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);\nreturn out;",
};

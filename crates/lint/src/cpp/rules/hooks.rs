//! KG617 `cpp-harness-hook`: the extension registers itself into PyTorch's or CUDA's machinery
//! that the harness and the reference run through: PyTorch's operators (`TORCH_LIBRARY_IMPL(aten,
//! ...)`, dispatcher registration), its profiler callbacks (`at::addGlobalCallback`), its
//! allocator's observers, the CUDA driver's entry-point table (`cuGetProcAddress`), and symbol
//! interposition (`dlsym(RTLD_NEXT, ...)`, `LD_PRELOAD`). No kernel needs any of these; each
//! lets code run inside the harness's own calls. Names are judged through [`hook_name`] (called
//! from `names::classify`); registrations and strings here.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

/// A name that only a hook needs, and what it hooks. `field`: the name is a member
/// (`Dispatcher::singleton().registerImpl(...)`).
pub fn hook_name(q: &str, last: &str, field: bool) -> Option<String> {
    let what = match last {
        "addGlobalCallback" | "addThreadLocalCallback" | "RecordFunctionCallback" => {
            "registers a PyTorch RecordFunction callback, which runs inside every operator the harness and the reference call"
        }
        "attachAllocatorTraceTracker" | "attachOutOfMemoryObserver" => {
            "attaches an observer to PyTorch's CUDA caching allocator, which sees every allocation of the harness"
        }
        "changeCurrentAllocator" | "CUDAPluggableAllocator" => {
            "replaces PyTorch's CUDA allocator for the whole process, the harness's buffers included"
        }
        "cuGetProcAddress" | "cuGetProcAddress_v2" | "cudaGetDriverEntryPoint"
        | "cudaGetDriverEntryPointByVersion" => {
            "reads the CUDA driver's entry-point table, the way driver functions the timer calls are hooked"
        }
        "RTLD_NEXT" => "looks up the next definition of a symbol, the way a CUDA or timing function is interposed",
        "registerImpl" | "registerKernel" | "registerFallback" | "registerDef"
        | "addRegistrationListener"
            if field || q.contains("Dispatcher") =>
        {
            "registers with PyTorch's dispatcher directly, which can replace the kernels of PyTorch's own operators"
        }
        _ => return None,
    };
    Some(format!("`{q}` {what}; an extension needs none of this"))
}

/// An operator namespace that is PyTorch's own: registering into it changes what the reference
/// and the harness run.
fn torch_namespace(ns: &str) -> bool {
    matches!(ns, "aten" | "prim" | "_" | "c10" | "quantized" | "prims") || ns.contains("aten")
}

/// A string naming one of PyTorch's own operators (`"aten::relu"`, `"prim::..."`).
fn torch_op_string(s: &str) -> bool {
    let s = s.trim_start_matches(['"', 'R', '(']);
    ["aten::", "prim::", "prims::", "quantized::"]
        .iter()
        .any(|p| s.starts_with(p))
}

impl<'t> Analyzer<'t> {
    /// Every KG617 finding of the analyzer is raised here.
    pub(in crate::cpp) fn harness_hook(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG617, range, msg);
    }

    /// `TORCH_LIBRARY_IMPL(aten, CUDA, m)`, `TORCH_LIBRARY_FRAGMENT(aten, m)`,
    /// `TORCH_LIBRARY_IMPL(_, Autograd, m)`: the extension registers kernels for PyTorch's own
    /// operators (any dispatch key), the ones the reference runs. The candidate's own namespace
    /// (`TORCH_LIBRARY(myops, m)`) is fine.
    pub(in crate::cpp) fn library_registration(&mut self, node: Node<'t>, q: &str) {
        let Some(p) = node.parent() else { return };
        let args = match p.kind_fast() {
            "call_expression" | "function_declarator" => {
                p.field("arguments").or_else(|| p.field("parameters"))
            }
            _ => None,
        };
        let first = args
            .and_then(|a| a.named_child(0))
            .map(|a| self.t(a).trim().to_string())
            .unwrap_or_default();
        if torch_namespace(&first) {
            self.harness_hook(
                node.byte_range(),
                format!("`{q}({first}, ...)` registers kernels for PyTorch's own operators: the reference would run the candidate's code; register ops in your own namespace"),
            );
        }
    }

    /// `m.impl("aten::mm", f)`, `m.def("aten::...")`, `c10::RegisterOperators().op("aten::...")`:
    /// registration that names one of PyTorch's own operators, whatever the block's namespace.
    pub(in crate::cpp) fn op_registration(&mut self, node: Node<'t>, m: &str) {
        if !matches!(m, "impl" | "def" | "op" | "fallback" | "impl_UNBOXED") {
            return;
        }
        let Some(a0) = node.field("arguments").and_then(|a| a.named_child(0)) else {
            return;
        };
        if matches!(a0.kind_fast(), "string_literal" | "raw_string_literal")
            && torch_op_string(self.t(a0))
        {
            self.harness_hook(
                a0.byte_range(),
                format!("`.{m}({}, ...)` registers a kernel for one of PyTorch's own operators: the reference would run the candidate's code; register ops in your own namespace", self.t(a0)),
            );
        }
    }

    /// A string literal that sets up symbol interposition (`"LD_PRELOAD"`, `"LD_AUDIT"`), or that
    /// names a CUDA API looked up by `dlsym` (`dlsym(h, "cudaLaunchKernel")`).
    pub(in crate::cpp) fn hook_string(&mut self, node: Node<'t>) {
        let t = self.t(node);
        if t.contains("LD_PRELOAD") || t.contains("LD_AUDIT") {
            self.harness_hook(
                node.byte_range(),
                format!("{t} preloads a library into processes, the way CUDA and timing functions are interposed; an extension needs none of this"),
            );
            return;
        }
        let in_dlsym = node
            .parent()
            .filter(|p| p.kind_fast() == "argument_list")
            .and_then(|p| p.parent())
            .and_then(|c| c.field("function"))
            .is_some_and(|f| matches!(self.t(f).trim_start_matches("::"), "dlsym" | "dlvsym"));
        let joined = crate::cpp::rules::precision::joined_literals(t, &self.macros);
        let name = joined.trim();
        if in_dlsym && api_like(name) {
            self.harness_hook(
                node.byte_range(),
                format!("`dlsym(..., {t})` looks up a CUDA API by name, the way the functions the timer calls are hooked; an extension needs none of this"),
            );
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG617: RuleMeta = RuleMeta {
    code: "KG617",
    name: "cpp-harness-hook",
    severity: Error,
    summary: "The extension hooks PyTorch's operators, profiler or allocator, or the CUDA driver",
    error_when: "whenever the C++ registers into PyTorch's operators, profiler, allocator or the driver",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The C++ registers itself into machinery the harness and the reference run through: kernels for PyTorch's own operators (`TORCH_LIBRARY_IMPL(aten, <any key>, m)`, `TORCH_LIBRARY_FRAGMENT(aten, m)`, `TORCH_LIBRARY_IMPL(_, ...)` fallbacks, `m.impl(\"aten::mm\", ...)`, `c10::RegisterOperators().op(\"aten::...\")`, or the dispatcher directly: `Dispatcher::singleton().registerImpl`/`registerKernel`/`registerFallback`/`addRegistrationListener`), RecordFunction callbacks (`at::addGlobalCallback`, `at::addThreadLocalCallback`, `at::RecordFunctionCallback`) that run inside every operator, observers or replacements of the CUDA caching allocator (`CUDACachingAllocator::attachAllocatorTraceTracker`, `attachOutOfMemoryObserver`, `changeCurrentAllocator`), the CUDA driver's entry-point table (`cuGetProcAddress`, `cudaGetDriverEntryPoint`), or symbol interposition (`dlsym(RTLD_NEXT, ...)`, `dlsym(h, \"cudaLaunchKernel\")`, `LD_PRELOAD`). No kernel needs any of these; each lets the candidate's code run inside the harness's own calls (the reference's matmul, the timer's event record, the correctness check's allocation) and change what they see. Registering the candidate's own operators in its own namespace (`TORCH_LIBRARY(myops, m)`, `TORCH_LIBRARY_IMPL(myops, CUDA, m)`) is fine. Remove the hook; call your kernel from `forward`.",
    bad: "TORCH_LIBRARY_IMPL(aten, CUDA, m) {\n    m.impl(\"mm\", fast_mm);\n}\nat::addGlobalCallback(at::RecordFunctionCallback(on_enter));",
    good: "TORCH_LIBRARY(myops, m) { m.def(\"mm(Tensor a, Tensor b) -> Tensor\"); }\nTORCH_LIBRARY_IMPL(myops, CUDA, m) { m.impl(\"mm\", fast_mm); }",
};

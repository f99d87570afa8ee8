//! KG611 `cpp-decoy-kernel` and KG612 `cpp-no-kernel`: kernels that make the extension look
//! custom without doing work (never launched from the exported functions, launched on an empty
//! grid, storing nothing), and CUDA sources with no kernel at all.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// Every KG611 finding of the analyzer is raised here.
    pub(in crate::cpp) fn decoy_kernel(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG611, range, msg);
    }

    /// Every KG612 finding of the analyzer is raised here.
    pub(in crate::cpp) fn no_kernel(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG612, range, msg);
    }

    /// Which kernels the exported functions (or, without exports, all host code) launch, and
    /// the decoys among the defined kernels. Returns the exports that work and those that may.
    ///
    /// "Never launched" is proven only when no host code on the exports' paths hands the
    /// kernel on as a value (a function pointer, a template or lambda argument, a cast for
    /// `cudaLaunchKernel`): then the launch goes through a path the analysis does not follow,
    /// and the finding is a warning.
    pub(in crate::cpp) fn decoy_kernels(&mut self, src: &EmbeddedSource) -> Exports {
        let kernels: Vec<usize> = (0..self.funcs.len())
            .filter(|&i| self.funcs[i].kind == FuncKind::Global)
            .collect();
        if kernels.is_empty() {
            if src.has_cuda() && !self.uses_cutlass {
                let at = src
                    .parts
                    .iter()
                    .find(|p| p.lang == crate::embedded::Lang::Cuda)
                    .map_or(0, |p| p.range.start);
                let first = src.text[at..]
                    .find(|c: char| !c.is_whitespace())
                    .map_or(at, |k| at + k);
                self.no_kernel(
                    first..first + 1,
                    "the CUDA sources define no `__global__` kernel: the extension launches no kernel of its own".into(),
                );
            }
            return self.working_exports(src, &HashSet::default());
        }
        // Roots: the exported functions (functions=[...] or PYBIND11_MODULE), else every host function.
        let mut exported: Vec<String> = src.functions.clone().unwrap_or_default();
        exported.extend(self.pybind_exports.iter().cloned());
        let mut queue: Vec<usize> = (0..self.funcs.len())
            .filter(|&i| {
                self.funcs[i].kind == FuncKind::Host && exported.contains(&self.funcs[i].name)
            })
            .collect();
        if queue.is_empty() {
            queue = (0..self.funcs.len())
                .filter(|&i| self.funcs[i].kind == FuncKind::Host)
                .collect();
            exported.clear();
        }
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::default();
        for (i, f) in self.funcs.iter().enumerate() {
            by_name.entry(f.name.as_str()).or_default().push(i);
        }
        let mut seen = vec![false; self.funcs.len()];
        let mut launched: HashSet<&str> = HashSet::default();
        // Kernel -> the host function that hands it on as a value.
        let mut handed_on: HashMap<&str, &str> = HashMap::default();
        while let Some(i) = queue.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            let f = &self.funcs[i];
            for k in &f.launches {
                launched.insert(k.as_str());
                queue.extend(by_name.get(k.as_str()).into_iter().flatten().copied());
            }
            for r in &f.value_refs {
                if by_name
                    .get(r.as_str())
                    .is_some_and(|is| is.iter().any(|&j| self.funcs[j].kind == FuncKind::Global))
                {
                    handed_on.entry(r.as_str()).or_insert(f.name.as_str());
                    queue.extend(by_name.get(r.as_str()).into_iter().flatten().copied());
                }
            }
            for c in &f.calls {
                queue.extend(
                    by_name
                        .get(c.as_str())
                        .into_iter()
                        .flatten()
                        .copied()
                        .filter(|&j| self.funcs[j].kind != FuncKind::Global),
                );
            }
        }
        let from = if exported.is_empty() {
            "host code".to_string()
        } else {
            format!("the exported functions ({})", exported.join(", "))
        };
        let mut reported = HashSet::default();
        let mut decoys = Vec::new();
        let mut unproven = Vec::new();
        for &k in &kernels {
            let f = &self.funcs[k];
            if launched.contains(f.name.as_str()) || !reported.insert(f.name.clone()) {
                continue;
            }
            let msg = format!("`__global__` kernel `{}` is never launched from {from}: a kernel that does not run does no work", f.name);
            match handed_on.get(f.name.as_str()) {
                Some(host) => {
                    reported.remove(&f.name);
                    unproven.push((f.name_range.clone(), msg, format!("`{host}` hands the kernel on as a value (a function pointer, a template or lambda argument, a cast for `cudaLaunchKernel`), a launch the analysis does not follow")));
                }
                None => decoys.push((f.name_range.clone(), msg)),
            }
        }
        // A kernel that stores through none of its parameters and calls nothing that could
        // (only math and intrinsics) does no work, however it is launched.
        for &k in &kernels {
            let f = &self.funcs[k];
            let maybe_run =
                launched.contains(f.name.as_str()) || handed_on.contains_key(f.name.as_str());
            if maybe_run
                && !f.has_asm
                && !f.params.iter().any(|p| f.writes.contains(&p.name))
                && f.calls.iter().all(|c| pure_device_call(c))
                && reported.insert(f.name.clone())
            {
                decoys.push((f.name_range.clone(), format!("`__global__` kernel `{}` is launched but stores through none of its parameters: it does no work", f.name)));
            }
        }
        for (r, m) in decoys {
            self.decoy_kernel(r, m);
        }
        for (r, m, why) in unproven {
            self.unproven(Rule::KG611, r, m, &why);
        }
        self.working_exports(src, &reported)
    }

    /// Python names of the exported functions that do work of their own: they (or host
    /// helpers they call) launch a kernel that is not a decoy, or store into tensor data; and
    /// those that hand such a kernel on as a value (they may launch it).
    pub(in crate::cpp) fn working_exports(
        &self,
        src: &EmbeddedSource,
        decoys: &HashSet<String>,
    ) -> Exports {
        let mut exported: Vec<String> = src.functions.clone().unwrap_or_default();
        exported.extend(self.pybind_names.iter().map(|(py, _)| py.clone()));
        let cpp_of = |py: &str| -> String {
            self.pybind_names
                .iter()
                .find(|(p, _)| p == py)
                .map_or(py.to_string(), |(_, c)| c.clone())
        };
        if exported.is_empty() {
            exported = self
                .funcs
                .iter()
                .filter(|f| f.kind == FuncKind::Host)
                .map(|f| f.name.clone())
                .collect();
        }
        let kernel_works = |name: &str| {
            !decoys.contains(name)
                && self.funcs.iter().any(|f| {
                    f.kind == FuncKind::Global
                        && f.name == name
                        && (f.has_asm
                            || f.params.iter().any(|p| f.writes.contains(&p.name))
                            || !f.calls.iter().all(|c| pure_device_call(c)))
                })
        };
        let mut out = Exports::default();
        for py in exported {
            let root = cpp_of(&py);
            let mut stack = vec![root];
            let mut seen: HashSet<String> = HashSet::default();
            let mut works = false;
            let mut maybe: Option<String> = None;
            while let Some(n) = stack.pop() {
                if !seen.insert(n.clone()) {
                    continue;
                }
                for f in self
                    .funcs
                    .iter()
                    .filter(|f| f.name == n && f.kind == FuncKind::Host)
                {
                    if (f.stores_tensor_data && !src.has_cuda())
                        || f.launches.iter().any(|k| kernel_works(k))
                    {
                        works = true;
                    }
                    if let Some(k) = f
                        .value_refs
                        .iter()
                        .find(|k| !f.launches.contains(*k) && kernel_works(k))
                    {
                        maybe.get_or_insert_with(|| format!("`{}` hands the kernel `{k}` on as a value, a launch the analysis does not follow", f.name));
                    }
                    stack.extend(f.calls.iter().cloned());
                }
            }
            if works {
                out.working.push(py);
            } else if let Some(why) = maybe {
                out.maybe.push((py, why));
            }
        }
        out
    }
}

/// Device calls that cannot store through a kernel's parameters: math functions, casts and
/// `__`-intrinsics (`__syncthreads`, `__shfl_xor_sync`, `__ldg`).
pub(in crate::cpp) fn pure_device_call(name: &str) -> bool {
    // `__stcs`/`__stwt`/... are store intrinsics.
    name.starts_with("__") && !name.starts_with("__st")
        || matches!(
            name,
            "fmaxf"
                | "fminf"
                | "fmax"
                | "fmin"
                | "max"
                | "min"
                | "expf"
                | "exp"
                | "exp2f"
                | "logf"
                | "log"
                | "log2f"
                | "sqrtf"
                | "sqrt"
                | "rsqrtf"
                | "tanhf"
                | "tanh"
                | "fabsf"
                | "fabs"
                | "abs"
                | "powf"
                | "pow"
                | "erff"
                | "erf"
                | "floorf"
                | "ceilf"
                | "roundf"
                | "sinf"
                | "cosf"
                | "fmaf"
                | "isnan"
                | "isinf"
                | "static_cast"
                | "reinterpret_cast"
                | "const_cast"
                | "float"
                | "int"
                | "make_float2"
                | "make_float4"
                | "printf"
        )
}

impl<'t> Analyzer<'t> {
    /// `kernel<<<0, ...>>>`: a launch that runs no threads.
    pub(in crate::cpp) fn empty_launch(&mut self, kernel: &str, args: &[Node<'t>]) {
        let empty = |n: &Node<'t>| {
            let t: String = self.t(*n).split_whitespace().collect();
            matches!(t.as_str(), "0" | "dim3(0)" | "dim3(0,0,0)" | "dim3(0,1,1)")
        };
        if let Some(z) = args.iter().take(2).find(|n| empty(n)) {
            self.decoy_kernel(
                z.byte_range(),
                format!("kernel `{kernel}` is launched with an empty grid or block (`{}`): it runs no threads and does no work", self.t(*z)),
            );
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG611: RuleMeta = RuleMeta {
    code: "KG611",
    name: "cpp-decoy-kernel",
    severity: Error,
    summary: "A `__global__` kernel is never launched",
    error_when: "the kernel is never launched and no host code on the exported functions' paths hands it on as a value (every path resolved; naming it in `cudaFuncSetAttribute` launches nothing), or it is launched on an empty grid, or it stores nothing",
    warn_when: "host code on those paths hands the kernel on as a value (a function pointer, a template or lambda argument, a local for `cudaLaunchKernel`): a launch the analysis does not follow; the runtime op audit decides",
    doc: "A `__global__` kernel is defined but never launched (`<<<...>>>`, `cudaLaunchKernel`, or a macro that expands to a launch) from host code reachable from the functions exported in `functions=[...]` / `PYBIND11_MODULE`, or is launched only on an empty grid or block (`<<<0, 256>>>`) or in dead code (`if (0)`, `#if 0`), or stores through none of its parameters (no store, atomic or call that could store), so it does no work. A decoy kernel makes the file look custom while something else does the work. Launch the kernel, or delete it.",
    bad: "__global__ void relu_kernel(...) { ... }\ntorch::Tensor run(torch::Tensor x) { return x.clamp_min(0); }",
    good: "torch::Tensor run(torch::Tensor x) {\n    auto y = torch::empty_like(x);\n    relu_kernel<<<g, b, 0, stream>>>(...);\n    return y;\n}",
};

pub(crate) const KG612: RuleMeta = RuleMeta {
    code: "KG612",
    name: "cpp-no-kernel",
    severity: Error,
    summary: "The CUDA sources define no `__global__` kernel",
    error_when: "whenever CUDA sources define no `__global__` kernel (CUTLASS/CuTe excepted)",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "An extension built with `cuda_sources=` (or `.cu` files) contains no `__global__` function at all, so no custom kernel can run: the host code only calls PyTorch or a library. CPU-only C++ via `cpp_sources=` alone is not affected, nor are sources that include CUTLASS/CuTe headers (their kernels are templates instantiated in the extension).",
    bad: "cuda_sources = \"torch::Tensor run(torch::Tensor x) { return torch::relu(x); }\"",
    good: "cuda_sources = \"__global__ void relu_kernel(...) {...}\\ntorch::Tensor run(torch::Tensor x) {...}\"",
};

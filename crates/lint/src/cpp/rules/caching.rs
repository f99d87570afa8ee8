//! KG606 `cpp-static-cache` and KG607 `cpp-l2-persistence`: state kept across calls, in static
//! memory or in L2. L2 persistence is a set of names (`names::classify`); static caches are
//! judged where the analyzer sees statics written or wrapped.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// KG606 on a declarator `d` of type `ty` that outlives the call: a static or global that
    /// can hold results (tensors, containers of pointers, captured CUDA graphs).
    pub(in crate::cpp) fn static_declaration(&mut self, storage: Storage, ty: &str, d: Node<'t>) {
        // Tensors, or containers holding pointers (`data_ptr()` keys); a map of device
        // properties or launch configurations is not an output cache.
        let container = ty.contains("map<") || ty.contains("set<") || ty.contains("vector<");
        // A captured CUDA graph replays the pointers of the call that captured it.
        let cache_type = ty.contains("Tensor")
            || ty.contains("Storage")
            || ty.contains("DataPtr")
            || ty.contains("cudaGraphExec_t")
            || ty.contains("CUgraphExec")
            || ty.contains("CUDAGraph")
            || self.tensor_structs.contains(ty.trim())
            || container && (ty.contains('*') || ty.contains("intptr_t") || ty.contains("void"));
        // `static auto cache = std::unordered_map<void*, torch::Tensor>();`
        let auto_cache = ty.trim() == "auto"
            && d.kind_fast() == "init_declarator"
            && d.field("value").is_some_and(|v| {
                let t = self.t(v);
                t.contains("Tensor")
                    && [
                        "map<",
                        "set<",
                        "vector<",
                        "optional<",
                        "tuple<",
                        "pair<",
                        "Tensor()",
                        "Tensor{",
                    ]
                    .iter()
                    .any(|c| t.contains(c))
            });
        if cache_type || auto_cache {
            let target = d.field("declarator").unwrap_or(d);
            let kind = if storage.is_static {
                "static"
            } else {
                "global"
            };
            self.static_cache(
                target.byte_range(),
                format!("`{}` is a {kind} `{ty}` that outlives the call: results can be cached across calls (keyed by pointer or shape)", self.t(target)),
            );
        }
    }

    /// Every KG606 finding of the analyzer is raised here.
    pub(in crate::cpp) fn static_cache(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG606, range, msg);
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG606: RuleMeta = RuleMeta {
    code: "KG606",
    name: "cpp-static-cache",
    severity: Error,
    summary: "A static or global tensor/map in C++ outlives the call",
    error_when: "whenever a static or global tensor, map or counter outlives the call",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A `static`, `thread_local` or namespace-level variable holds tensors, a map of pointers, a struct with a tensor member, or a captured CUDA graph (`static std::unordered_map<void*, torch::Tensor> cache;`, a global `torch::Tensor`, `static cudaGraphExec_t`), or `torch::from_blob` wraps memory kept in a static or global variable, or a static counter is incremented (`++calls`: behaviour that changes with the call count is phase detection). Results can be returned from it on later calls, keyed by `data_ptr()` or shape, instead of being computed. Allocate outputs per call; cache only configuration (constants, compiled handles).",
    bad: "static std::unordered_map<const void*, torch::Tensor> cache;\nauto it = cache.find(x.data_ptr());",
    good: "auto y = torch::empty_like(x);  // fresh output every call",
};

pub(crate) const KG607: RuleMeta = RuleMeta {
    code: "KG607",
    name: "cpp-l2-persistence",
    severity: Error,
    summary: "The extension pins data in L2 across calls",
    error_when: "whenever data is pinned in L2 across calls",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`cudaStreamSetAttribute` with an access-policy window, `cudaLimitPersistingL2CacheSize` or `accessPolicyWindow`/`hitProp` fields make inputs persist in L2, so the harness's cache flush between timed runs no longer empties the cache and the kernel looks faster than it is on cold data. Remove the persistence settings.",
    bad: "attr.accessPolicyWindow.base_ptr = x.data_ptr();\ncudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);",
    good: "k<<<g, b, 0, at::cuda::getCurrentCUDAStream()>>>(x, y, n);",
};

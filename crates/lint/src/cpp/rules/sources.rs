//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Warning;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG615: RuleMeta = RuleMeta {
    code: "KG615",
    name: "cpp-source-missing",
    severity: Warning,
    summary: "A source named in `cpp_extension.load(sources=...)` was not found",
    doc: "`cpp_extension.load(sources=[...])` names a file that is not next to the candidate, so its C++/CUDA could not be checked (and the build will fail). Commit the file with the kernel, with a path relative to the `.py`.",
    bad: "ext = load(name=\"k\", sources=[\"/home/me/k.cu\"])",
    good: "ext = load(name=\"k\", sources=[os.path.join(os.path.dirname(__file__), \"k.cu\")])",
};

pub(crate) const KG616: RuleMeta = RuleMeta {
    code: "KG616",
    name: "cpp-source-unresolved",
    severity: Warning,
    summary: "C++/CUDA sources handed to load_inline are not statically known",
    doc: "`cpp_sources=`/`cuda_sources=` receive text that kernelgate cannot resolve statically (read from a file, decoded, fetched or built at run time), so none of the C++/CUDA rules could check it. Hiding kernel source is also how hacks evade review. Pass string literals, f-strings or module-level strings, or build from files with `cpp_extension.load(sources=[...])` next to the `.py`.",
    bad: "cuda_sources=[base64.b64decode(BLOB).decode()]",
    good: "cuda_sources=[CUDA_SRC]  # a module-level string literal",
};

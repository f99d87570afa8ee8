//! KG615 `cpp-source-missing` and KG616 `cpp-source-unresolved`: C++/CUDA that extraction could
//! not read, so no other C++ rule could check it.

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Warning;
use std::ops::Range;

/// Findings for the sources `src` names but extraction could not read.
pub(in crate::cpp) fn unread_source_findings(
    src: &EmbeddedSource,
) -> Vec<(Rule, Range<usize>, String)> {
    let mut out = Vec::new();
    for (file, range) in &src.missing_files {
        // Missing files point at their name in the .py directly.
        out.push((
            Rule::KG615,
            range.clone(),
            format!(
                "`{}` (listed in `sources=`) was not found next to the file, so its C++/CUDA was not checked; commit it with the kernel",
                file.display()
            ),
        ));
    }
    for r in &src.unresolved {
        out.push((
            Rule::KG616,
            r.clone(),
            "the C++/CUDA sources passed here are not statically known (read or decoded at run time), so they were not checked; pass string literals or module-level strings".into(),
        ));
    }
    out
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG615: RuleMeta = RuleMeta {
    code: "KG615",
    name: "cpp-source-missing",
    severity: Warning,
    summary: "A source named in `cpp_extension.load(sources=...)` was not found",
    error_when: "never by default (a warning rule)",
    warn_when: "always: the source could not be checked; the build decides",
    doc: "`cpp_extension.load(sources=[...])` names a file that is not next to the candidate, so its C++/CUDA could not be checked (and the build will fail). Commit the file with the kernel, with a path relative to the `.py`.",
    bad: "ext = load(name=\"k\", sources=[\"/home/me/k.cu\"])",
    good: "ext = load(name=\"k\", sources=[os.path.join(os.path.dirname(__file__), \"k.cu\")])",
};

pub(crate) const KG616: RuleMeta = RuleMeta {
    code: "KG616",
    name: "cpp-source-unresolved",
    severity: Warning,
    summary: "C++/CUDA sources handed to load_inline are not statically known",
    error_when: "never by default (a warning rule)",
    warn_when: "always: the source could not be checked",
    doc: "`cpp_sources=`/`cuda_sources=` receive text that kernelgate cannot resolve statically (read from a file, decoded, fetched or built at run time), so none of the C++/CUDA rules could check it. Hiding kernel source is also how hacks evade review. Pass string literals, f-strings or module-level strings, or build from files with `cpp_extension.load(sources=[...])` next to the `.py`.",
    bad: "cuda_sources=[base64.b64decode(BLOB).decode()]",
    good: "cuda_sources=[CUDA_SRC]  # a module-level string literal",
};

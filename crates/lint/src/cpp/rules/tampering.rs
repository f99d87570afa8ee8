//! KG604 `cpp-token-pasting`, KG613 `cpp-sandbox`, KG614 `cpp-timer-tampering`: hiding names,
//! reaching outside the sandbox, interposing the timer's symbols (hooks into PyTorch and the driver are KG617's).

use crate::cpp::*;
use crate::rule::Rule;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;
use std::ops::Range;

impl<'t> Analyzer<'t> {
    /// Every KG604 finding of the analyzer is raised here.
    pub(in crate::cpp) fn token_pasting(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG604, range, msg);
    }

    /// Every KG613 finding of the analyzer is raised here.
    pub(in crate::cpp) fn sandbox(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG613, range, msg);
    }

    /// Every KG614 finding of the analyzer is raised here.
    pub(in crate::cpp) fn timer_tampering(&mut self, range: Range<usize>, msg: String) {
        self.flag(Rule::KG614, range, msg);
    }
}

/// Text printed the way a harness or leaderboard prints results (`correct=True`,
/// `"speedup": 12`); prose is not result-like.
pub(in crate::cpp) fn result_like(text: &str) -> bool {
    static RESULT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?i)\b(correct(ness)?|speedup|runtime(_ms)?|elapsed(_ms)?|passed|allclose|max_diff|avg_diff|time_ms|mean_ms|verdict|fast_[0-9p]+|compiled)\b\\?["']?\s*[:=]"#,
        )
        .expect("static regex")
    });
    RESULT.is_match(text)
}

impl<'t> Analyzer<'t> {
    /// `system(...)`, `fopen(path, "w")`: the extension reaching outside the sandbox.
    pub(in crate::cpp) fn sandbox_call(
        &mut self,
        node: Node<'t>,
        func: Node<'t>,
        q: &str,
        last: &str,
        qualified: bool,
        ns: &str,
    ) {
        if (!qualified || ns == "std") && sandbox_call(last) {
            self.sandbox(func.byte_range(), format!("`{q}(...)` reaches outside the sandbox (processes, libraries, environment or files)"));
        }
        if last == "fopen" || last == "open" {
            let mode = node
                .field("arguments")
                .and_then(|a| a.named_child(1))
                .map(|m| self.t(m))
                .unwrap_or("");
            if mode.contains('w')
                || mode.contains('a')
                || mode.contains('+')
                || mode.contains("O_WRONLY")
                || mode.contains("O_RDWR")
            {
                self.sandbox(
                    func.byte_range(),
                    format!("`{last}` opens a file for writing from inside the extension"),
                );
            }
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG604: RuleMeta = RuleMeta {
    code: "KG604",
    name: "cpp-token-pasting",
    severity: Error,
    summary: "A macro builds an API name with `##`",
    error_when: "whenever a macro builds an API name with `##`",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A preprocessor macro pastes tokens (`##`) into the name of a CUDA, driver or library API (`CAT(cudaStream, Create)`). Honest kernels have no reason to hide an API name; it is how a banned call gets past a text search. Write the call out.",
    bad: "#define CAT(a, b) a##b\nCAT(cudaStream, Create)(&s);",
    good: "#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x \" must be a CUDA tensor\")",
};

pub(crate) const KG613: RuleMeta = RuleMeta {
    code: "KG613",
    name: "cpp-sandbox",
    severity: Error,
    summary: "The extension reaches outside the sandbox",
    error_when: "whenever the C++ reaches outside the sandbox",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The C++ runs processes or shells (`system`, `popen`, `fork`, `exec*`), loads libraries (`dlopen`, `dlsym`), reads or changes the environment (`getenv`, `setenv`, `putenv`), changes memory protection or files (`mprotect`, `ptrace`, `rename`, `chmod`), opens files for writing (`fopen(..., \"w\")`, `std::ofstream`), exits early (`_exit`, `quick_exit`, `exit(0)`) or prints result-like text (`printf(\"correct=True speedup=...\")`, `std::cout << \"speedup: ...\"`, raw `write(1, ...)`). A kernel needs none of this; it is how results get forged, phases detected and harnesses patched. Remove it.",
    bad: "system(\"pip install fastrelu\");\nFILE* f = fopen(\"/tmp/result.json\", \"w\");",
    good: "TORCH_CHECK(x.is_cuda(), \"x must be a CUDA tensor\");",
};

pub(crate) const KG614: RuleMeta = RuleMeta {
    code: "KG614",
    name: "cpp-timer-tampering",
    severity: Error,
    summary: "The extension defines a CUDA or clock API function, or reads the clock",
    error_when: "whenever the C++ interposes a CUDA or clock API, reads a clock or changes PyTorch's global settings",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "The C++ defines a function named like a CUDA runtime/driver API or a clock (`cudaEventElapsedTime`, `cuEventRecord`, `clock_gettime`, `dlsym`), which interposes the symbol the timer relies on; or its kernels or host code read the clock (`clock64()`, `%globaltimer` in inline PTX, `std::chrono::steady_clock`, `clock_gettime`), which lets a kernel tell timed calls from checked ones; or it changes PyTorch's global settings (`at::globalContext().setAllowTF32CuBLAS(true)`), which the reference runs under too. kernelgate times through the driver from Rust, but interposition and timing-dependent behaviour are tampering by construction. Give your functions your own names and do not read clocks.",
    bad: "extern \"C\" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { *ms = 0.001f; return cudaSuccess; }",
    good: "torch::Tensor relu_cuda(torch::Tensor x);",
};

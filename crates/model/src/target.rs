//! What a kernel is written in and where it runs: [`classify`] is the one place both are
//! decided, so the mapper, the planner, the scheduler and the harness launcher agree.

use crate::types::Backend;

/// A kernel's backend and whether it runs on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelTarget {
    /// The declared backend, else what the source shows, else the default; `None` when none
    /// says (an error for the caller, never a guess).
    pub backend: Option<Backend>,
    /// CPU-only C++ (`load_inline(cpp_sources=...)` with no CUDA or Triton marker): it runs on
    /// the CPU even where a GPU exists, since its extension cannot take CUDA tensors.
    pub runs_on_cpu: bool,
}

impl KernelTarget {
    /// True when the kernel cannot run without a GPU: a GPU backend and not CPU-only C++.
    pub fn needs_gpu(&self) -> bool {
        !self.runs_on_cpu && self.backend.is_some_and(Backend::needs_gpu)
    }
}

/// Classifies a kernel. `declared`: the backend a `# kernelgate: backend=` directive (or an
/// earlier mapping) names; it wins over the source's markers, which win over `default`.
/// Where the kernel runs comes from the source alone: a directive cannot move a CPU-only
/// extension onto the GPU. Comments are ignored for both answers.
pub fn classify(declared: Option<Backend>, source: &str, default: Option<Backend>) -> KernelTarget {
    let code = crate::hash::strip_comments(source);
    KernelTarget {
        backend: declared.or_else(|| inferred_backend(&code)).or(default),
        runs_on_cpu: cpu_only(&code),
    }
}

/// Backend from what the code uses; `None` when nothing is recognisable. A `#include` inside
/// a C++ string is code, not a comment.
fn inferred_backend(code: &str) -> Option<Backend> {
    let has = |needles: &[&str]| needles.iter().any(|n| code.contains(n));
    if has(&["kittens.cuh", "kittens::", "import thunderkittens"]) {
        Some(Backend::Thunderkittens)
    } else if has(&[
        "import tilelang",
        "from tilelang",
        "@T.prim_func",
        "tilelang.jit",
    ]) {
        Some(Backend::Tilelang)
    } else if has(&[
        "cute/",
        "cute::",
        "cutlass/",
        "cutlass::",
        "import cutlass",
        "from cutlass",
    ]) {
        Some(Backend::Cute)
    } else if has(&[
        "hip/hip_runtime",
        "hipLaunchKernelGGL",
        "__HIP_PLATFORM",
        "hipStream_t",
    ]) {
        Some(Backend::Hip)
    } else if has(&["triton.jit", "@jit", "triton.autotune"]) && has(&["triton"]) {
        Some(Backend::Triton)
    } else if has(&["cuda_sources", "__global__", "<<<", "load_inline(cuda"]) {
        Some(Backend::Cuda)
    } else if has(&["cpp_sources", "cpp_extension"]) {
        // `cpp_extension.load(sources=[...])` is C++ too, but its files may be `.cu`: only
        // inline `cpp_sources` is known to be CPU-only (see `cpu_only`).
        Some(Backend::Cpp)
    } else {
        None
    }
}

/// Inline C++ sources and no GPU marker.
fn cpu_only(code: &str) -> bool {
    let gpu = [
        "cuda_sources",
        "__global__",
        "triton",
        "tl.",
        ".cuda(",
        "device=\"cuda\"",
        "device='cuda'",
    ];
    code.contains("cpp_sources") && !gpu.iter().any(|m| code.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(source: &str) -> Option<Backend> {
        classify(None, source, None).backend
    }

    #[test]
    fn backend_inference() {
        let cuda = "from torch.utils.cpp_extension import load_inline\nsrc = '''__global__ void k(float* x) {}'''\nm = load_inline(name='m', cpp_sources='', cuda_sources=src)\n";
        assert_eq!(backend(cuda), Some(Backend::Cuda));
        let cpp = "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='m', cpp_sources=src, functions=['f'])\n";
        assert_eq!(backend(cpp), Some(Backend::Cpp));
        let triton = "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x): pass\n";
        assert_eq!(backend(triton), Some(Backend::Triton));
        let hip = "src = '''#include <hip/hip_runtime.h>\n__global__ void k() {}'''\nload_inline(cuda_sources=src)";
        assert_eq!(backend(hip), Some(Backend::Hip));
        let cute = "src = '''#include <cute/tensor.hpp>\n__global__ void k() {}'''\nload_inline(cuda_sources=src)";
        assert_eq!(backend(cute), Some(Backend::Cute));
        assert_eq!(backend("import tilelang\n"), Some(Backend::Tilelang));
        assert_eq!(
            backend("src = '#include \"kittens.cuh\"'\n"),
            Some(Backend::Thunderkittens)
        );
        // Mentions in comments do not count.
        assert_eq!(backend("# uses @triton.jit one day\nimport torch\n"), None);
    }

    #[test]
    fn cpu_kernels_are_inline_cpp_without_gpu_markers() {
        let runs_on_cpu = |s: &str| classify(None, s, None).runs_on_cpu;
        assert!(runs_on_cpu(
            "load_inline(name='x', cpp_sources=src, functions=['f'])"
        ));
        assert!(!runs_on_cpu(
            "load_inline(name='x', cpp_sources=a, cuda_sources=b)"
        ));
        assert!(!runs_on_cpu("import triton\n@triton.jit\ndef k(): pass"));
        assert!(!runs_on_cpu("class ModelNew: pass"));
        assert!(!runs_on_cpu(
            "load_inline(name='x', cpp_sources=src)\ny = x.cuda()\n"
        ));
        // A GPU word in a comment does not put a CPU kernel on the GPU.
        assert!(runs_on_cpu(
            "# faster than the triton one\nload_inline(name='x', cpp_sources=src)\n"
        ));
    }

    #[test]
    fn inline_cpu_cpp_is_cpp_on_the_cpu() {
        let t = classify(
            None,
            "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='m', cpp_sources=src, functions=['f'])\n",
            Some(Backend::Cuda),
        );
        assert_eq!(
            t,
            KernelTarget {
                backend: Some(Backend::Cpp),
                runs_on_cpu: true
            }
        );
        assert!(!t.needs_gpu());
    }

    #[test]
    fn cpp_extension_load_is_cpp_but_not_known_to_run_on_the_cpu() {
        // Its sources may be `.cu` files: it is not put on a CPU lane, and (a C++ backend)
        // it is not skipped where no GPU exists either.
        let t = classify(
            None,
            "from torch.utils.cpp_extension import load\next = load(name='k', sources=['k.cpp'])\n",
            None,
        );
        assert_eq!(t.backend, Some(Backend::Cpp));
        assert!(!t.runs_on_cpu);
        assert!(!t.needs_gpu());
    }

    #[test]
    fn load_inline_with_cuda_sources_is_cuda_on_the_gpu() {
        let t = classify(
            None,
            "from torch.utils.cpp_extension import load_inline\nsrc = '__global__ void k() {}'\nm = load_inline(name='m', cpp_sources='', cuda_sources=src)\n",
            None,
        );
        assert_eq!(t.backend, Some(Backend::Cuda));
        assert!(!t.runs_on_cpu);
        assert!(t.needs_gpu());
    }

    #[test]
    fn triton_is_triton_on_the_gpu() {
        let t = classify(
            None,
            "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x): pass\n",
            None,
        );
        assert_eq!(t.backend, Some(Backend::Triton));
        assert!(!t.runs_on_cpu);
        assert!(t.needs_gpu());
    }

    #[test]
    fn declared_backend_wins_over_the_source_and_the_default() {
        // Plain torch: nothing to infer, so the declaration (a directive) or the default says.
        let torch =
            "# kernelgate: backend=triton\nimport torch\nclass ModelNew(torch.nn.Module): pass\n";
        let t = classify(Some(Backend::Triton), torch, Some(Backend::Cuda));
        assert_eq!(t.backend, Some(Backend::Triton));
        assert!(t.needs_gpu());
        assert_eq!(
            classify(None, torch, Some(Backend::Cuda)).backend,
            Some(Backend::Cuda)
        );
        assert_eq!(classify(None, torch, None).backend, None);
        assert!(!classify(None, torch, None).needs_gpu());
        // A declared GPU backend does not move CPU-only C++ onto the GPU.
        let t = classify(
            Some(Backend::Cuda),
            "load_inline(name='x', cpp_sources=src)",
            None,
        );
        assert_eq!(t.backend, Some(Backend::Cuda));
        assert!(t.runs_on_cpu);
        assert!(!t.needs_gpu());
        // A declared C++ backend never needs a GPU.
        assert!(!classify(Some(Backend::Cpp), torch, None).needs_gpu());
    }
}

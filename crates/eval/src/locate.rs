//! Finding the runner's Python, the built harness extension, and whether CUDA is present.

use std::path::{Path, PathBuf};

use crate::EvalError;

/// File name cargo gives the harness cdylib.
pub const HARNESS_LIB: &str = "libkernelgate_harness.so";

/// The Python that holds torch: `$KERNELGATE_PYTHON`, else `<repo>/.venv/bin/python`, else `python3`.
pub fn find_python(repo: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("KERNELGATE_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = repo.join(".venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// The harness extension: `$KERNELGATE_HARNESS`, else `libkernelgate_harness.so` next to the
/// running executable or in its parent directory (`target/<profile>/deps/` test binaries).
pub fn find_harness() -> Result<PathBuf, EvalError> {
    if let Some(p) = std::env::var_os("KERNELGATE_HARNESS").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(EvalError::HarnessMissing { looked: vec![p] })
        };
    }
    let mut looked = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent().map(Path::to_path_buf);
        for _ in 0..2 {
            let Some(d) = dir else { break };
            let cand = d.join(HARNESS_LIB);
            if cand.is_file() {
                return Ok(cand);
            }
            looked.push(cand);
            dir = d.parent().map(Path::to_path_buf);
        }
    }
    Err(EvalError::HarnessMissing { looked })
}

/// True when the CUDA driver library can be loaded: then the child may use the GPU and needs
/// a large virtual address space (so memory is watched by RSS instead of `RLIMIT_AS`).
pub fn libcuda_present() -> bool {
    // SAFETY: dlopen with a constant NUL-terminated name; the handle is closed right away.
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
        true
    }
}

/// True when the kernel source is C++ for the CPU only (`load_inline(cpp_sources=...)` with no
/// CUDA or Triton): such a kernel runs on the CPU even where a GPU exists.
pub fn is_cpu_kernel(source: &str) -> bool {
    let gpu = [
        "cuda_sources",
        "__global__",
        "triton",
        "tl.",
        ".cuda(",
        "device=\"cuda\"",
        "device='cuda'",
    ];
    source.contains("cpp_sources") && !gpu.iter().any(|m| source.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_kernels_are_cpp_without_gpu_markers() {
        assert!(is_cpu_kernel(
            "load_inline(name='x', cpp_sources=src, functions=['f'])"
        ));
        assert!(!is_cpu_kernel(
            "load_inline(name='x', cpp_sources=a, cuda_sources=b)"
        ));
        assert!(!is_cpu_kernel("import triton\n@triton.jit\ndef k(): pass"));
        assert!(!is_cpu_kernel("class ModelNew: pass"));
    }

    #[test]
    fn missing_harness_error_names_the_build_command() {
        // The only test in this crate that touches KERNELGATE_HARNESS.
        std::env::set_var(
            "KERNELGATE_HARNESS",
            "/nonexistent/libkernelgate_harness.so",
        );
        let err = find_harness().unwrap_err().to_string();
        std::env::remove_var("KERNELGATE_HARNESS");
        assert!(err.contains("cargo build -p kernelgate-harness"), "{err}");
        assert!(
            err.contains("/nonexistent/libkernelgate_harness.so"),
            "{err}"
        );
    }
}

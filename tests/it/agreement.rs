//! One question, one answer: every documented directive form, mapping rule and backend goes
//! through `kernelgate kernels`, `kernelgate pr --plan` and `kernelgate baseline --kernels
//! --plan`, and the three map each file alike (or fail it alike).

use crate::common::{git, write};

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const RELU: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(4, 4)]\n\ndef get_init_inputs():\n    return []\n";

const CUDA: &str = "from torch.utils.cpp_extension import load_inline\nsrc = '''__global__ void k(float* x) {}'''\nm = load_inline(name='m', cpp_sources='', cuda_sources=src)\n";
const CPP: &str = "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='m', cpp_sources='int f();', functions=['f'])\n";
const TRITON: &str = "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x): pass\n";
const HIP: &str = "src = '''#include <hip/hip_runtime.h>\n__global__ void k() {}'''\nload_inline(name='m', cpp_sources='', cuda_sources=src)\n";
const CUTE: &str = "src = '''#include <cute/tensor.hpp>\n__global__ void k() {}'''\nload_inline(name='m', cpp_sources='', cuda_sources=src)\n";
const TILELANG: &str = "import tilelang\n";
const THUNDERKITTENS: &str = "src = '#include \"kittens.cuh\"'\n";
const NO_MARKER: &str = "import torch\n";

/// (path, source) of every form the docs name (docs/config.md, docs/rules.md, docs/policy.md).
fn kernels() -> Vec<(&'static str, String)> {
    let with = |head: &str, body: &str| format!("{head}\n{body}");
    vec![
        // Directive: full key, every key, a `.py` suffix, the short key, quoted values.
        (
            "kernels/full.py",
            with("# kernelgate: problem=level1/19_ReLU backend=cuda precision=fp32", CUDA),
        ),
        ("kernels/suffix.py", with("# kernelgate: problem=level1/19_ReLU.py", CPP)),
        ("kernels/short.py", with("# kernelgate: problem=19_ReLU", CUDA)),
        ("kernels/quoted.py", with("# kernelgate: problem='19_ReLU' precision=\"fp16\"", CPP)),
        // The mapping shares the head with suppressions and acknowledgements.
        (
            "kernels/with_allow.py",
            with(
                "# kernelgate: allow-file=KG101 reason=\"a fused epilogue\"\n# kernelgate: problem=level1/19_ReLU\n# kernelgate: allow=excessive_speedup reason=\"three passes in one\"",
                CUDA,
            ),
        ),
        (
            "kernels/one_line.py",
            with("# kernelgate: problem=19_ReLU allow-file=KG101 reason=\"x\"", CPP),
        ),
        // `[kernels.mapping]`, then the path convention (file and directory forms).
        ("kernels/experimental/relu_fast.py", CUDA.to_string()),
        ("kernels/level1/19_ReLU.py", CPP.to_string()),
        ("kernels/level1/19_ReLU/triton_v2.py", TRITON.to_string()),
        // Backends: from the directive, from the source (each of the seven), from the default.
        ("kernels/level1/19_ReLU/declared.py", with("# kernelgate: backend=triton", CUDA)),
        ("kernels/level1/19_ReLU/hip.py", HIP.to_string()),
        ("kernels/level1/19_ReLU/cute.py", CUTE.to_string()),
        ("kernels/level1/19_ReLU/tilelang.py", TILELANG.to_string()),
        ("kernels/level1/19_ReLU/tk.py", THUNDERKITTENS.to_string()),
        ("kernels/level1/19_ReLU/default.py", NO_MARKER.to_string()),
        // Not kernels anywhere: helpers and hidden directories.
        ("kernels/level1/19_ReLU/__init__.py", CUDA.to_string()),
        ("kernels/.scratch/19_ReLU.py", CUDA.to_string()),
        // `*` of a mapping glob stays within one directory: this one is not mapped by it.
        ("kernels/experimental/deep/relu_x.py", CUDA.to_string()),
        // Errors every command must report alike.
        ("kernels/unmapped.py", CUDA.to_string()),
        ("kernels/bad_key.py", with("# kernelgate: problem=level1/19_ReLU level=1", CUDA)),
        ("kernels/bad_backend.py", with("# kernelgate: problem=19_ReLU backend=opencl", CUDA)),
        ("kernels/unknown.py", with("# kernelgate: problem=level1/99_Nope", CUDA)),
        ("kernels/ambiguous.py", with("# kernelgate: problem=3_Twice", CUDA)),
        (
            "kernels/unquoted_reason.py",
            with("# kernelgate: problem=19_ReLU allow=KG101 reason=two words", CUDA),
        ),
    ]
}

const CONFIG: &str = "[kernels.mapping]\n\"kernels/experimental/relu_*.py\" = \"level1/19_ReLU\"\n\n[defaults]\nbackend = \"hip\"\n";

/// A repository whose first commit holds the problems and whose second adds the kernels.
fn repo(config: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    for p in ["level1/19_ReLU", "level1/3_Twice", "level2/3_Twice"] {
        write(d, &format!("KernelBench/{p}.py"), RELU);
    }
    write(d, "kernelgate.toml", config);
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "problems"]);
    let base = git(d, &["rev-parse", "HEAD"]);
    for (path, source) in kernels() {
        write(d, path, &source);
    }
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "kernels"]);
    (dir, base)
}

fn kernelgate(repo: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .arg("--repo")
        .arg(repo)
        .args(args)
        .env_remove("GITHUB_EVENT_PATH")
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("kernelgate runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "kernelgate {args:?}: {e}\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Path → `Ok((problem, backend, precision))` or `Err(message)`.
type Mapping = BTreeMap<String, Result<(String, String, String), String>>;

fn mapped(kernels: &Value, errors: &Value, problem_field: &str) -> Mapping {
    let mut out = Mapping::new();
    for k in kernels.as_array().unwrap() {
        let s = |f: &str| k[f].as_str().unwrap_or_default().to_string();
        out.insert(
            s("path"),
            Ok((s(problem_field), s("backend"), s("precision"))),
        );
    }
    for e in errors.as_array().unwrap() {
        out.insert(
            e["path"].as_str().unwrap().to_string(),
            Err(e["message"].as_str().unwrap().to_string()),
        );
    }
    out
}

fn from_kernels(repo: &Path) -> Mapping {
    let v = kernelgate(repo, &["kernels", "--format", "json"]);
    mapped(&v["kernels"], &v["errors"], "problem_key")
}

fn from_pr_plan(repo: &Path, base: &str) -> Mapping {
    let v = kernelgate(repo, &["pr", "--plan", "--all", "--base", base]);
    let mut out = Mapping::new();
    for j in v["jobs"].as_array().unwrap() {
        let s = |f: &str| j[f].as_str().unwrap_or_default().to_string();
        let result = match j["mapping_error"].as_str() {
            Some(e) => Err(e.to_string()),
            None => Ok((s("problem"), s("backend"), s("precision"))),
        };
        out.insert(s("path"), result);
    }
    out
}

fn from_baseline_plan(repo: &Path) -> Mapping {
    let v = kernelgate(repo, &["baseline", "--kernels", "--plan"]);
    mapped(&v["kernels"], &v["errors"], "problem")
}

#[test]
fn kernels_pr_and_baseline_map_every_documented_form_alike() {
    let (dir, base) = repo(CONFIG);
    let kernels = from_kernels(dir.path());
    assert_eq!(kernels, from_pr_plan(dir.path(), &base));
    assert_eq!(kernels, from_baseline_plan(dir.path()));

    let ok = |path: &str, backend: &str, precision: &str| {
        assert_eq!(
            kernels[path],
            Ok((
                "level1/19_ReLU".to_string(),
                backend.to_string(),
                precision.to_string()
            )),
            "{path}"
        );
    };
    ok("kernels/full.py", "cuda", "fp32");
    ok("kernels/suffix.py", "cpp", "fp32");
    ok("kernels/short.py", "cuda", "fp32");
    ok("kernels/quoted.py", "cpp", "fp16");
    ok("kernels/with_allow.py", "cuda", "fp32");
    ok("kernels/one_line.py", "cpp", "fp32");
    ok("kernels/experimental/relu_fast.py", "cuda", "fp32");
    ok("kernels/level1/19_ReLU.py", "cpp", "fp32");
    ok("kernels/level1/19_ReLU/triton_v2.py", "triton", "fp32");
    ok("kernels/level1/19_ReLU/declared.py", "triton", "fp32");
    ok("kernels/level1/19_ReLU/hip.py", "hip", "fp32");
    ok("kernels/level1/19_ReLU/cute.py", "cute", "fp32");
    ok("kernels/level1/19_ReLU/tilelang.py", "tilelang", "fp32");
    ok("kernels/level1/19_ReLU/tk.py", "thunderkittens", "fp32");
    // No marker in the source: `[defaults] backend`, never a guess.
    ok("kernels/level1/19_ReLU/default.py", "hip", "fp32");

    let err = |path: &str, needle: &str| {
        let e = kernels[path].as_ref().expect_err(path);
        assert!(e.contains(path) && e.contains(needle), "{path}: {e}");
        assert!(
            e.contains("help:"),
            "{path}: every error says what to do: {e}"
        );
    };
    err("kernels/unmapped.py", "not mapped to any problem");
    err("kernels/bad_key.py", "unknown key `level`");
    err("kernels/bad_backend.py", "unknown backend `opencl`");
    err("kernels/unknown.py", "unknown problem `level1/99_Nope`");
    err("kernels/ambiguous.py", "ambiguous");
    err("kernels/unquoted_reason.py", "quote a reason");
    err(
        "kernels/experimental/deep/relu_x.py",
        "not mapped to any problem",
    );
    for helper in [
        "kernels/level1/19_ReLU/__init__.py",
        "kernels/.scratch/19_ReLU.py",
    ] {
        assert!(!kernels.contains_key(helper), "{helper} is not a kernel");
    }
}

#[test]
fn without_a_default_backend_an_unmarked_kernel_is_an_error_everywhere() {
    let (dir, base) = repo("");
    let kernels = from_kernels(dir.path());
    assert_eq!(kernels, from_pr_plan(dir.path(), &base));
    assert_eq!(kernels, from_baseline_plan(dir.path()));
    let e = kernels["kernels/level1/19_ReLU/default.py"]
        .as_ref()
        .expect_err("no backend to guess");
    assert!(e.contains("cannot tell the kernel's backend"), "{e}");
    assert!(e.contains("[defaults] backend"), "{e}");
}

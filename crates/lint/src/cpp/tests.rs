use super::*;
use crate::embedded::extract;
use crate::rule::Context;

/// (code, line, column) of every finding of the cpp rules on a .py source.
pub(crate) fn run(py: &str, precision: Precision) -> Vec<(Rule, u32, u32)> {
    let parsed = ruff_python_parser::parse_module(py).expect("valid python");
    let ctx = Context::new("t.py", py, precision, None);
    let mut v: Vec<_> = extract(parsed.syntax(), py)
        .iter()
        .flat_map(|e| check(e, &ctx))
        .map(|f| {
            let (l, c) = ctx.line_col(f.range.start);
            (f.code, l, c)
        })
        .collect();
    v.sort();
    v
}

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/lint/cpp")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn run_fixture(name: &str) -> Vec<(Rule, u32, u32)> {
    let py = fixture(name);
    let precision = if py.starts_with("# kernelgate: precision=fp16") {
        Precision::Fp16
    } else {
        Precision::Fp32
    };
    let parsed = ruff_python_parser::parse_module(&py).expect("valid python");
    let ctx = Context::new(name, &py, precision, None);
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/lint/cpp");
    let mut v: Vec<_> = crate::embedded::extract_in(parsed.syntax(), &py, Some(&dir))
        .iter()
        .flat_map(|e| check(e, &ctx))
        .map(|f| {
            let (l, c) = ctx.line_col(f.range.start);
            (f.code, l, c)
        })
        .collect();
    v.sort();
    v
}

/// Every hack fixture: its exact (rule, line, column) findings. Columns inside the CUDA strings
/// point at the offending token in the `.py`.
/// A fixture and its expected (rule, line, column) findings.
type Case = (&'static str, &'static [(Rule, u32, u32)]);

#[test]
fn hack_fixtures_report_exact_positions() {
    let table: &[Case] = &[
        (
            "hack_aten_op.py",
            &[(Rule::KG601, 17, 14), (Rule::KG601, 18, 14)],
        ),
        (
            "hack_cublas.py",
            &[
                (Rule::KG612, 6, 1),
                (Rule::KG602, 12, 5),
                (Rule::KG602, 13, 5),
                (Rule::KG602, 16, 5),
            ],
        ),
        (
            "hack_side_stream.py",
            &[(Rule::KG603, 17, 5), (Rule::KG603, 18, 44)],
        ),
        (
            "hack_stream_macro.py",
            &[
                (Rule::KG603, 9, 14),
                (Rule::KG603, 19, 5),
                (Rule::KG603, 20, 44),
                (Rule::KG604, 19, 5),
            ],
        ),
        ("hack_thread.py", &[(Rule::KG605, 19, 5)]),
        ("hack_static_cache.py", &[(Rule::KG606, 14, 55)]),
        (
            "hack_l2_persist.py",
            &[
                (Rule::KG607, 18, 10),
                (Rule::KG607, 19, 10),
                (Rule::KG607, 20, 5),
            ],
        ),
        ("hack_inplace_return.py", &[(Rule::KG608, 16, 12)]),
        ("hack_input_zeroing.py", &[(Rule::KG608, 21, 45)]),
        ("hack_unwritten_output.py", &[(Rule::KG609, 15, 16)]),
        (
            "hack_half_on_fp32.py",
            &[(Rule::KG610, 13, 9), (Rule::KG610, 14, 16)],
        ),
        (
            "hack_decoy_kernel.py",
            &[(Rule::KG601, 14, 14), (Rule::KG611, 8, 17)],
        ),
        (
            "hack_no_kernel.py",
            &[(Rule::KG601, 10, 12), (Rule::KG612, 6, 1)],
        ),
        (
            "hack_sandbox.py",
            &[(Rule::KG613, 16, 5), (Rule::KG613, 17, 15)],
        ),
        ("hack_timer_interpose.py", &[(Rule::KG614, 13, 24)]),
        ("hack_escaped_string.py", &[(Rule::KG601, 6, 124)]),
        (
            "hack_load_files.py",
            &[
                (Rule::KG602, 6, 40),
                (Rule::KG602, 6, 40),
                (Rule::KG602, 6, 40),
            ],
        ),
    ];
    for (name, want) in table {
        let mut want = want.to_vec();
        want.sort();
        assert_eq!(run_fixture(name), want, "{name}");
    }
}

#[test]
fn honest_fixtures_are_clean() {
    for name in [
        "honest_relu_streams_comments.py",
        "honest_cpu_cpp.py",
        "honest_tiled_matmul_fstring.py",
        "honest_half_fp16.py",
    ] {
        assert_eq!(run_fixture(name), vec![], "{name}");
    }
}

#[test]
fn half_kernel_is_flagged_when_the_problem_is_fp32() {
    let py = fixture("honest_half_fp16.py").replacen("# kernelgate: precision=fp16\n", "\n", 1);
    let found = run(&py, Precision::Fp32);
    assert!(found.iter().any(|f| f.0 == Rule::KG610), "{found:?}");
}

#[test]
fn stream_resolution_through_locals_macros_and_casts() {
    let body = |launch: &str| {
        format!(
            "from torch.utils.cpp_extension import load_inline\nsrc = '''\n#define CUR at::cuda::getCurrentCUDAStream()\n__global__ void k(float* y) {{ y[0] = 1.f; }}\ntorch::Tensor f(torch::Tensor x) {{\n  auto y = torch::empty_like(x);\n  auto s2 = c10::cuda::getCurrentCUDAStream();\n  cudaStream_t bad = (cudaStream_t)42;\n  {launch}\n  return y;\n}}\n'''\nm = load_inline('m', cpp_sources='', cuda_sources=src, functions=['f'])\n"
        )
    };
    for ok in [
        "k<<<1, 1, 0, CUR>>>(y.data_ptr<float>());",
        "k<<<1, 1, 0, s2.stream()>>>(y.data_ptr<float>());",
        "k<<<1, 1, 0, 0>>>(y.data_ptr<float>());",
        "k<<<1, 1>>>(y.data_ptr<float>());",
    ] {
        assert_eq!(run(&body(ok), Precision::Fp32), vec![], "{ok}");
    }
    assert_eq!(
        run(
            &body("k<<<1, 1, 0, bad>>>(y.data_ptr<float>());"),
            Precision::Fp32
        ),
        vec![(Rule::KG603, 9, 16)]
    );
    assert_eq!(
        run(
            &body("k<<<1, 1, 0, cudaStreamPerThread>>>(y.data_ptr<float>());"),
            Precision::Fp32
        ),
        vec![(Rule::KG603, 9, 16)]
    );
}

#[test]
fn kernels_launched_through_helpers_macros_and_cuda_launch_kernel_are_not_decoys() {
    let py = "from torch.utils.cpp_extension import load_inline\nsrc = r'''\n#define LAUNCH(name) name##_kernel<<<1, 1>>>\n__global__ void a_kernel(float* y) { y[0] = 1.f; }\n__global__ void b(float* y) { y[0] = 2.f; }\n__global__ void unused(float* y) { y[0] = 3.f; }\nstatic void helper(float* p) { void* args[] = {&p}; cudaLaunchKernel((void*)b, 1, 1, args, 0, 0); }\ntorch::Tensor f(torch::Tensor x) {\n  auto y = torch::empty_like(x);\n  LAUNCH(a)(y.data_ptr<float>());\n  helper(y.data_ptr<float>());\n  return y;\n}\n'''\nm = load_inline('m', cpp_sources='', cuda_sources=src, functions=['f'])\n";
    assert_eq!(run(py, Precision::Fp32), vec![(Rule::KG611, 6, 17)]);
}

#[test]
fn global_tensor_and_unqualified_ops_under_using_namespace() {
    let py = "from torch.utils.cpp_extension import load_inline\nsrc = '''\nusing namespace torch;\nTensor last;\n__global__ void k(float* y) { y[0] = 1.f; }\nTensor f(Tensor x) {\n  auto y = empty_like(x);\n  k<<<1, 1>>>(y.data_ptr<float>());\n  return matmul(y, x);\n}\n'''\nm = load_inline('m', cpp_sources='', cuda_sources=src, functions=['f'])\n";
    assert_eq!(
        run(py, Precision::Fp32),
        vec![(Rule::KG601, 9, 10), (Rule::KG606, 4, 8)]
    );
}

/// Truncated and garbled sources (unbalanced braces, half a launch, stray `##`) never panic.
#[test]
fn broken_sources_never_panic() {
    for name in [
        "hack_stream_macro.py",
        "honest_tiled_matmul_fstring.py",
        "hack_l2_persist.py",
    ] {
        let py = fixture(name);
        let parsed = ruff_python_parser::parse_module(&py).unwrap();
        let text = crate::embedded::extract(parsed.syntax(), &py)[0]
            .text
            .clone();
        let text = format!("{text}\n#define P(a) a##\nP(cuda)é<<<\"\\é\"");
        let ctx = Context::new("x.cu", &text, Precision::Fp32, None);
        let mut n = 0;
        for cut in (0..text.len())
            .step_by(5)
            .filter(|&c| text.is_char_boundary(c))
        {
            let src = crate::embedded::EmbeddedSource::from_cuda_text(&text[..cut]);
            n += check(&src, &ctx).len();
        }
        assert!(n > 0, "{name}: truncations still find things");
    }
}

#[test]
fn unresolved_and_missing_sources_are_warned_about() {
    let py = "import base64\nfrom torch.utils.cpp_extension import load_inline, load\nm = load_inline('m', cpp_sources='', cuda_sources=base64.b64decode(B).decode())\nn = load('n', sources=['nowhere.cu'])\n";
    let parsed = ruff_python_parser::parse_module(py).unwrap();
    let ctx = Context::new("t.py", py, Precision::Fp32, None);
    let dir = std::env::temp_dir();
    let mut found: Vec<_> = crate::embedded::extract_in(parsed.syntax(), py, Some(&dir))
        .iter()
        .flat_map(|e| check(e, &ctx))
        .map(|f| {
            let (l, c) = ctx.line_col(f.range.start);
            (f.code, l, c)
        })
        .collect();
    found.sort();
    assert_eq!(found, vec![(Rule::KG615, 4, 25), (Rule::KG616, 3, 51)]);
}

/// Patterns from honest kernels that must stay silent.
#[test]
fn honest_patterns_stay_silent() {
    let py = "from torch.utils.cpp_extension import load_inline\nsrc = '''\n#include <torch/extension.h>\n#define CUDA_CHECK(x) cudaCheck((x), __FILE__, __LINE__)\nstatic void cudaCheck(cudaError_t e, const char* f, int l) { TORCH_CHECK(e == cudaSuccess, f, l); }\nstatic std::unordered_map<int, cudaDeviceProp> props;\ntemplate <typename scalar_t>\n__global__ void k(const scalar_t* x, scalar_t* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }\ntorch::Tensor f(torch::Tensor x) {\n  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf, \"dtype\");\n  auto y = torch::empty_like(x);\n  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(), \"k\", ([&] {\n    k<scalar_t><<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), x.numel());\n  }));\n  CUDA_CHECK(cudaGetLastError());\n  unsigned n = std::thread::hardware_concurrency();\n  (void)n;\n  return torch::cat({y.view(-1)}, 0).view_as(x);\n}\n'''\nm = load_inline('m', cpp_sources='', cuda_sources=src, functions=['f'])\n";
    assert_eq!(run(py, Precision::Fp32), vec![]);
    let downgrade = py.replace(
        "auto y = torch::empty_like(x);",
        "auto y = torch::empty_like(x).to(at::kHalf);",
    );
    assert_eq!(
        run(&downgrade, Precision::Fp32),
        vec![(Rule::KG610, 11, 33)]
    );
}

#[test]
fn kernels_writing_through_input_pointers_are_input_mutation() {
    let py = "from torch.utils.cpp_extension import load_inline\nsrc = '''\n__global__ void k(const float* x, float* junk, float* y, int n) {\n  int i = threadIdx.x;\n  y[i] = x[i];\n  *(junk + i) = 0.f;\n}\ntorch::Tensor f(torch::Tensor x, torch::Tensor w) {\n  auto y = torch::empty_like(x);\n  float* wp = w.data_ptr<float>();\n  k<<<1, 256>>>(x.data_ptr<float>(), wp, y.data_ptr<float>(), x.numel());\n  return y;\n}\n'''\nm = load_inline('m', cpp_sources='', cuda_sources=src, functions=['f'])\n";
    assert_eq!(run(py, Precision::Fp32), vec![(Rule::KG608, 11, 38)]);
    // Reading the input and writing the fresh output is fine.
    let honest = py.replace("wp, y.data_ptr", "y.data_ptr<float>(), y.data_ptr");
    assert_eq!(run(&honest, Precision::Fp32), vec![]);
}

/// One CUDA extension with `kernel` and the host function `host`, as a `.py`.
fn out_param_case(kernel: &str, host: &str) -> Vec<(Rule, u32, u32)> {
    let py = format!(
        "from torch.utils.cpp_extension import load_inline\nsrc = \"\"\"\n{kernel}\n{host}\n\"\"\"\next = load_inline('e', cpp_sources='', cuda_sources=src, functions=['f'])\n"
    );
    run(&py, Precision::Fp32)
        .into_iter()
        .filter(|f| f.0 == Rule::KG608)
        .collect()
}

#[test]
fn returning_an_out_param_is_clean_only_when_its_kernels_just_store() {
    let store = "__global__ void k(const float* x, float* o, int n) { int i = threadIdx.x; if (i < n) o[i] = x[i]; }";
    let host = "torch::Tensor f(torch::Tensor x, torch::Tensor out) {\n  k<<<1, 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());\n  return out;\n}";
    assert_eq!(out_param_case(store, host), vec![]);
    // Through a local pointer, and `*p = v` stores count too.
    let deref = "__global__ void k(const float* x, float* o, int n) { *(o + threadIdx.x) = x[threadIdx.x]; }";
    let local = "torch::Tensor f(torch::Tensor x, torch::Tensor out) {\n  float* op = out.data_ptr<float>();\n  k<<<1, 32>>>(x.data_ptr<float>(), op, x.numel());\n  return out;\n}";
    assert_eq!(out_param_case(deref, local), vec![]);
    // `+=` reads the old contents: the returned tensor is an input that was modified.
    let acc =
        "__global__ void k(const float* x, float* o, int n) { o[threadIdx.x] += x[threadIdx.x]; }";
    assert_eq!(out_param_case(acc, host), vec![(Rule::KG608, 6, 10)]);
    // Read and written (in place), or passed where it is read.
    let inplace = "__global__ void k(const float* x, float* o, int n) { o[threadIdx.x] = o[threadIdx.x] * x[0]; }";
    assert_eq!(out_param_case(inplace, host), vec![(Rule::KG608, 6, 10)]);
    let swapped = "torch::Tensor f(torch::Tensor x, torch::Tensor out) {\n  k<<<1, 32>>>(out.data_ptr<float>(), x.data_ptr<float>(), x.numel());\n  return out;\n}";
    let found = out_param_case(store, swapped);
    assert!(found.contains(&(Rule::KG608, 6, 10)), "{found:?}");
    // Never given to a kernel, or given to one defined elsewhere: nothing shows it is written.
    let unlaunched = "torch::Tensor f(torch::Tensor x, torch::Tensor out) {\n  return out;\n}";
    assert_eq!(
        out_param_case(store, unlaunched),
        vec![(Rule::KG608, 5, 10)]
    );
    let external = "torch::Tensor f(torch::Tensor x, torch::Tensor out) {\n  other<<<1, 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());\n  return out;\n}";
    let found = out_param_case(store, external);
    assert!(found.contains(&(Rule::KG608, 6, 10)), "{found:?}");
    // The only tensor parameter is never an out-parameter.
    let single = "torch::Tensor f(torch::Tensor out) {\n  k<<<1, 32>>>(out.data_ptr<float>(), out.data_ptr<float>(), out.numel());\n  return out;\n}";
    let found = out_param_case(store, single);
    assert!(found.contains(&(Rule::KG608, 6, 10)), "{found:?}");
}

#[test]
fn string_literals_are_joined_before_ptx_is_read() {
    use crate::cpp::rules::precision::{joined_literals, mantissa_mask, ptx_reduced_precision};
    let mut macros = HashMap::default();
    macros.insert(
        "SHAPE".to_string(),
        Macro {
            params: None,
            body: "\".m16n8k8\" /* tile */".into(),
            body_at: 0,
        },
    );
    let joined = joined_literals(
        "\"mma.sync.aligned\" SHAPE \".row.col.f32.t\"\n  \"f32.t\" // a\n \"f32.f32 \" R\"x({%0})x\"",
        &macros,
    );
    assert_eq!(
        joined,
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0}"
    );
    assert_eq!(ptx_reduced_precision(&joined), Some("TF32"));
    assert_eq!(
        ptx_reduced_precision("cvt.rn.f16x2.f32 %0, %1, %2;"),
        Some("fp16")
    );
    assert_eq!(
        ptx_reduced_precision("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"),
        Some("bf16")
    );
    assert_eq!(
        ptx_reduced_precision("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
        Some("integer")
    );
    // fp32 and fp64 PTX, and byte loads outside an MMA, are full precision.
    assert_eq!(ptx_reduced_precision("fma.rn.f32 %0, %1, %2, %3;"), None);
    assert_eq!(
        ptx_reduced_precision("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"),
        None
    );
    assert_eq!(ptx_reduced_precision("ld.global.u8 %0, [%1];"), None);
    assert_eq!(ptx_reduced_precision("ld.global.f162 %0"), None);
    assert_eq!(mantissa_mask("0xFFFFE000u"), Some("TF32"));
    assert_eq!(mantissa_mask("0xfffff000"), None);
}

#[test]
fn mantissa_masks_are_reduced_precision_only_on_float_bits() {
    let case = |expr: &str| {
        let py = format!("from torch.utils.cpp_extension import load_inline\nsrc = '''\n__global__ void k(const float* x, float* y, unsigned* a) {{\n  unsigned b = __float_as_uint(x[0]);\n  y[0] = __uint_as_float({expr});\n}}\n'''\nm = load_inline('m', cpp_sources='', cuda_sources=src, functions=['f'])\n");
        run(&py, Precision::Fp32)
            .into_iter()
            .filter(|f| f.0 == Rule::KG610)
            .count()
    };
    assert_eq!(case("b & 0xffffe000"), 1);
    assert_eq!(case("__float_as_uint(x[1]) & 0xFFFF0000u"), 1);
    // An address or index mask is not a float's mantissa.
    assert_eq!(case("a[0] & 0xffffe000"), 0);
    assert_eq!(case("b & 0x7fffffff"), 0);
}

#[test]
fn hooks_into_pytorch_and_the_driver_are_kg617_own_namespaces_are_not() {
    let case = |body: &str| {
        let py = format!("from torch.utils.cpp_extension import load_inline\nsrc = r'''\n#include <torch/library.h>\n__global__ void k(float* y) {{ y[0] = 1.f; }}\ntorch::Tensor f(torch::Tensor x) {{\n  auto y = torch::empty_like(x);\n  k<<<1, 1>>>(y.data_ptr<float>());\n  return y;\n}}\n{body}\n'''\nm = load_inline('m', cpp_sources='', cuda_sources=src, functions=['f'])\n");
        run(&py, Precision::Fp32)
            .into_iter()
            .filter(|f| f.0 == Rule::KG617)
            .map(|f| (f.1, f.2))
            .collect::<Vec<_>>()
    };
    for hook in [
        "TORCH_LIBRARY_IMPL(_, Autograd, m) { m.fallback(torch::CppFunction::makeFallthrough()); }",
        "TORCH_LIBRARY_IMPL(aten, CompositeImplicitAutograd, m) { m.impl(\"mm\", f); }",
        "TORCH_LIBRARY_FRAGMENT(aten, m) { m.def(\"kg(Tensor x) -> Tensor\"); }",
        "TORCH_LIBRARY_IMPL(myops, CUDA, m) { m.impl(\"aten::mm\", f); }",
        "static auto r = c10::RegisterOperators().op(\"aten::relu\", &f);",
        "void h() { c10::Dispatcher::singleton().registerImpl(op, key, fn, {}, {}, \"\"); }",
        "void h() { at::addThreadLocalCallback(at::RecordFunctionCallback(cb)); }",
        "void h() { void* p; cuGetProcAddress(\"cuLaunchKernel\", &p, 12000, 0, nullptr); }",
        "void h() { void* p = dlsym(lib, \"cuEvent\" \"Record\"); }",
        "void h() { setenv(\"LD_PRELOAD\", \"/tmp/x.so\", 1); }",
        "void h() { c10::cuda::CUDACachingAllocator::attachOutOfMemoryObserver(obs); }",
    ] {
        assert_eq!(case(hook).len(), 1, "{hook}: {:?}", case(hook));
    }
    for honest in [
        "TORCH_LIBRARY(myops, m) { m.def(\"f(Tensor x) -> Tensor\"); }",
        "TORCH_LIBRARY_IMPL(myops, CUDA, m) { m.impl(\"f\", f); }",
        "TORCH_LIBRARY_FRAGMENT(myops, m) { m.def(\"myops::g(Tensor x) -> Tensor\"); }",
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"f\", &f, \"aten-like relu\"); }",
        "void h() { TORCH_CHECK(true, \"unlike aten::mm, this kernel needs contiguous inputs\"); }",
        "void h() { void* p = c10::cuda::CUDACachingAllocator::raw_alloc(64); c10::cuda::CUDACachingAllocator::raw_delete(p); }",
    ] {
        assert_eq!(case(honest), vec![], "{honest}");
    }
}

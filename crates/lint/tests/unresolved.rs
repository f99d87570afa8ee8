//! "Never" claims are errors only when every path resolved. Each test mutates one honest
//! candidate through one kind of indirection the analysis does not follow and asserts the
//! candidate passes with at most a warning that says what was not proven; then builds the real
//! cheat (custom code defined and truly never called, every path resolved) through the same
//! machinery and asserts it stays an error.

use kernelgate_lint::{lint_file, Finding, LintOptions, Severity};

/// A partial replacement: cuDNN keeps the convolution, the candidate's ReLU kernel runs after
/// it. `{module}` is module-level Python after the extension is built; `{init}` lines of
/// `__init__`; `{relu}` the expression `forward` applies to the convolution's output `y`.
const PARTIAL: &str = r#"import functools
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
TORCH_LIBRARY(kg_cpp, m) { m.def("relu(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(kg_cpp, CUDA, m) { m.impl("relu", &relu); }
"""
ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu"], verbose=False)


class _ExtRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return ext.relu(x.contiguous())


class _TorchRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.relu(x)
{module}

class ModelNew(nn.Module):
    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k)
{init}

    def forward(self, x):
        y = self.conv(x)
        return {relu}
"#;

fn partial(module: &str, init: &str, relu: &str) -> String {
    PARTIAL
        .replace("{module}", module)
        .replace(
            "{init}",
            if init.is_empty() {
                "        pass"
            } else {
                init
            },
        )
        .replace("{relu}", relu)
}

fn lint(src: &str) -> Vec<Finding> {
    lint_file("k.py", src, &LintOptions::default()).unwrap()
}

fn errors(found: &[Finding]) -> Vec<String> {
    found
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| format!("{} {}: {}", f.rule, f.line, f.message))
        .collect()
}

/// Passes with warnings only, and the torch op's warning says what was not resolved.
fn assert_unproven(label: &str, src: &str, says: &str) {
    let found = lint(src);
    assert!(errors(&found).is_empty(), "{label}: {:?}", errors(&found));
    let kg102 = found
        .iter()
        .find(|f| f.rule == "KG102")
        .unwrap_or_else(|| panic!("{label}: no KG102 in {found:?}"));
    assert_eq!(kg102.severity, Severity::Warning, "{label}");
    assert!(
        kg102.message.contains("not proven") && kg102.message.contains(says),
        "{label}: {}",
        kg102.message
    );
}

/// Blocks: the torch ops are errors because nothing custom runs on any path.
fn assert_cheat(label: &str, src: &str) {
    let found = lint(src);
    let errs = errors(&found);
    assert!(
        errs.iter()
            .any(|e| e.starts_with("KG101") || e.starts_with("KG102")),
        "{label}: {found:?}"
    );
    assert!(
        found.iter().all(|f| !f.message.contains("not proven")),
        "{label}: {found:?}"
    );
}

#[test]
fn resolved_paths_prove_custom_code_runs() {
    for (module, init, relu) in [
        ("", "", "ext.relu(y)"),
        // `apply` bound to a name, held by the module: followed to the Function's forward.
        ("relu_fn = _ExtRelu.apply\n", "        self.act = relu_fn", "self.act(y)"),
        // A decorator defined in the file: its wrapper and the function are both followed.
        (
            "def _logged(fn):\n    def inner(t):\n        return fn(t)\n    return inner\n@_logged\ndef relu_fn(t):\n    return ext.relu(t)\n",
            "",
            "relu_fn(y)",
        ),
    ] {
        let found = lint(&partial(module, init, relu));
        assert!(errors(&found).is_empty(), "{relu}: {found:?}");
        assert!(
            found.iter().all(|f| f.message.contains("partial replacement")),
            "{relu}: {found:?}"
        );
    }
}

#[test]
fn each_indirection_leaves_the_honest_kernel_a_warning() {
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        // (kind, module, init, relu, what the message names)
        (
            "apply through a factory",
            "def _make():\n    return _ExtRelu.apply\nrelu_fn = _make()\n",
            "",
            "relu_fn(y)",
            "a callable returned by a call",
        ),
        (
            "torch.ops of a C++ TORCH_LIBRARY",
            "",
            "",
            "torch.ops.kg_cpp.relu(y)",
            "`torch.ops` op",
        ),
        (
            "a container of extension functions",
            "ACTS = {'relu': ext.relu}\n",
            "",
            "ACTS['relu'](y)",
            "a callable taken from a container",
        ),
        (
            "a list filled at run time",
            "",
            "        self.fns = []\n        self.fns.append(ext.relu)",
            "[f(y) for f in self.fns][0]",
            "a callable taken from a container",
        ),
        (
            "a registry a decorator fills",
            "_OPS = {}\ndef register(name):\n    def deco(fn):\n        _OPS[name] = fn\n        return fn\n    return deco\n@register('relu')\ndef _relu(t):\n    return ext.relu(t)\n",
            "",
            "_OPS['relu'](y)",
            "a callable taken from a container",
        ),
        (
            "a wrapper's result",
            "def _wrap(fn):\n    return fn\nrelu_fn = _wrap(ext.relu)\n",
            "",
            "relu_fn(y)",
            "a callable returned by a call",
        ),
        (
            "a callback parameter",
            "def _apply(fn, t):\n    return fn(t)\n",
            "",
            "_apply(ext.relu, y)",
            "a callable passed in as a parameter",
        ),
        (
            "an alias of an extension function",
            "relu_fn = ext.relu\n",
            "",
            "relu_fn(y)",
            "a name bound to a callable",
        ),
        (
            "getattr in __init__",
            "",
            "        self.act = getattr(ext, 'relu')",
            "self.act(y)",
            "a callable returned by a call",
        ),
    ];
    for (kind, module, init, relu, says) in cases {
        assert_unproven(kind, &partial(module, init, relu), says);
    }
}

#[test]
fn the_same_machinery_with_every_path_resolved_keeps_the_cheat_an_error() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("a direct torch op", "", "", "torch.relu(y)"),
        (
            "apply bound to a module-level name",
            "relu_fn = _TorchRelu.apply\n",
            "",
            "relu_fn(y)",
        ),
        (
            "apply held by the module",
            "relu_fn = _TorchRelu.apply\n",
            "        self.act = relu_fn",
            "self.act(y)",
        ),
        (
            "torch.ops of the file's own registration",
            "@torch.library.custom_op('kg_py::relu', mutates_args=())\ndef relu_op(t: torch.Tensor) -> torch.Tensor:\n    return torch.relu(t)\n",
            "",
            "torch.ops.kg_py.relu(y)",
        ),
        (
            "a container whose elements resolve",
            "",
            "        self.acts = nn.ModuleList([nn.ReLU()])",
            "self.acts[0](y)",
        ),
        (
            "a loop over resolved modules",
            "",
            "        self.acts = nn.Sequential(nn.ReLU())",
            "[a(y) for a in self.acts][0]",
        ),
        (
            "a partial of a torch op",
            "relu_fn = functools.partial(torch.clamp, min=0)\n",
            "",
            "relu_fn(y)",
        ),
        (
            "a helper function",
            "def _relu(t):\n    return torch.relu(t)\n",
            "",
            "_relu(y)",
        ),
    ];
    for (kind, module, init, relu) in cases {
        assert_cheat(kind, &partial(module, init, relu));
    }
}

/// A Triton ReLU kernel and a `{module}` / `{forward}` around it.
const TRITON: &str = r#"import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def launch(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
{module}

class ModelNew(nn.Module):
    def forward(self, x):
        return {forward}
"#;

fn triton(module: &str, forward: &str) -> String {
    TRITON
        .replace("{module}", module)
        .replace("{forward}", forward)
}

fn kg620(src: &str) -> Option<Finding> {
    lint(src).into_iter().find(|f| f.rule == "KG620")
}

#[test]
fn a_triton_kernel_behind_torch_library_is_launched_or_not_proven_unlaunched() {
    // Registered in the file: followed through torch.ops to the launch.
    for module in [
        "@torch.library.custom_op('kg::relu', mutates_args=())\ndef relu_op(x: torch.Tensor) -> torch.Tensor:\n    return launch(x)\n",
        "torch.library.define('kg::relu', '(Tensor x) -> Tensor')\n@torch.library.impl('kg::relu', 'cuda')\ndef relu_impl(x):\n    return launch(x)\n",
        "lib = torch.library.Library('kg', 'DEF')\nlib.define('relu(Tensor x) -> Tensor')\ndef relu_impl(x):\n    return launch(x)\nlib.impl('relu', relu_impl, 'CUDA')\n",
    ] {
        let src = triton(module, "torch.ops.kg.relu.default(x)");
        assert_eq!(kg620(&src), None, "{module}");
        assert!(errors(&lint(&src)).is_empty(), "{module}");
    }
    // Registered where the analysis cannot see (another module loaded it): a warning.
    let src = triton("", "torch.ops.kg.relu(x)");
    let f = kg620(&src).expect("KG620");
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("not proven"), "{}", f.message);
    // A table of launchers the module fills at run time: a warning.
    let src = triton(
        "LAUNCHERS = {}\nLAUNCHERS.update(relu=launch)\n",
        "LAUNCHERS['relu'](x)",
    );
    assert_eq!(kg620(&src).map(|f| f.severity), Some(Severity::Warning));
    // Every path resolved and the kernel never launched: an error.
    let src = triton(
        "@torch.library.custom_op('kg::relu', mutates_args=())\ndef relu_op(x: torch.Tensor) -> torch.Tensor:\n    return torch.relu(x)\n",
        "torch.ops.kg.relu(x)",
    );
    let f = kg620(&src).expect("KG620");
    assert_eq!(f.severity, Severity::Error, "{}", f.message);
    let src = triton("", "torch.relu(x)");
    assert_eq!(kg620(&src).map(|f| f.severity), Some(Severity::Error));
}

/// A CUDA ReLU whose host function `{host}` launches (or not) `relu_kernel`.
const CUDA: &str = r#"import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
{helpers}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    {host}
    return y;
}
"""
ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k)

    def forward(self, x):
        return ext.relu(self.conv(x))
"#;

fn cuda(helpers: &str, host: &str) -> String {
    CUDA.replace("{helpers}", helpers).replace("{host}", host)
}

#[test]
fn a_cuda_kernel_handed_on_as_a_value_is_not_proven_unlaunched() {
    let launch = "<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, n)";
    let cases = [
        (
            "a function pointer",
            format!("using K = void (*)(const float*, float*, int64_t);\nstatic void go(K k, const float* xp, float* yp, int64_t n) {{ k{launch}; }}"),
            "go(relu_kernel, xp, yp, n);".to_string(),
        ),
        (
            "a template argument",
            format!("template <typename K> static void go(K k, const float* xp, float* yp, int64_t n) {{ k{launch}; }}"),
            "go(relu_kernel, xp, yp, n);".to_string(),
        ),
        (
            "a generic lambda",
            String::new(),
            format!("auto go = [&](auto k) {{ k{launch}; }};\n    go(relu_kernel);"),
        ),
        (
            "cudaLaunchKernel through a local",
            String::new(),
            "void* args[] = {&xp, &yp, &n};\n    const void* fn = reinterpret_cast<const void*>(relu_kernel);\n    cudaLaunchKernel(fn, dim3((n + 255) / 256), dim3(256), args, 0, at::cuda::getCurrentCUDAStream());".to_string(),
        ),
    ];
    for (kind, helpers, host) in &cases {
        let found = lint(&cuda(helpers, host));
        assert!(errors(&found).is_empty(), "{kind}: {found:?}");
        let kg611 = found.iter().find(|f| f.rule == "KG611");
        assert!(
            kg611.is_some_and(|f| f.message.contains("hands the kernel on as a value")),
            "{kind}: {found:?}"
        );
        // The kept convolution: not proven that no custom code runs, so a warning.
        assert!(
            found
                .iter()
                .any(|f| f.rule == "KG102" && f.severity == Severity::Warning),
            "{kind}: {found:?}"
        );
    }
    // Configured, never launched, every path resolved: the decoy and the torch op block.
    let found = lint(&cuda(
        "",
        "cudaFuncSetAttribute(relu_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 0);\n    y = torch::relu(x);",
    ));
    let errs = errors(&found);
    assert!(errs.iter().any(|e| e.starts_with("KG611")), "{found:?}");
    assert!(errs.iter().any(|e| e.starts_with("KG102")), "{found:?}");
}

/// An fp16 kernel and an fp32 kernel; `{test}` chooses the fp16 one.
const DISPATCH: &str = r#"import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>
__global__ void relu_f32(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
__global__ void relu_f16(const __half* x, __half* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hmax(x[i], __float2half(0.f));
}
static bool wants_half(const torch::Tensor& t) { return t.scalar_type() == at::kHalf; }
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    auto s = at::cuda::getCurrentCUDAStream();
    {decl}
    if ({test}) {
        relu_f16<<<(n + 255) / 256, 256, 0, s>>>((const __half*)x.data_ptr(), (__half*)y.data_ptr(), n);
    } else {
        relu_f32<<<(n + 255) / 256, 256, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    }
    return y;
}
"""
ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
"#;

fn kg610(decl: &str, test: &str) -> Vec<Severity> {
    let src = DISPATCH.replace("{decl}", decl).replace("{test}", test);
    lint(&src)
        .into_iter()
        .filter(|f| f.rule == "KG610")
        .map(|f| f.severity)
        .collect()
}

#[test]
fn reduced_precision_is_an_error_only_on_a_branch_proven_to_run_for_fp32() {
    // Proven dead on fp32: nothing.
    assert_eq!(kg610("", "x.scalar_type() == at::kHalf"), vec![]);
    // Undecided dtype tests: warnings.
    for (decl, test) in [
        ("", "wants_half(x)"),
        (
            "",
            "x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16",
        ),
        ("const bool two = x.element_size() == 2;", "two"),
        ("", "x.is_floating_point() && x.element_size() < 4"),
    ] {
        let got = kg610(decl, test);
        assert!(
            !got.is_empty() && got.iter().all(|s| *s == Severity::Warning),
            "{test}: {got:?}"
        );
    }
    // The branch fp32 inputs take, or no test at all: errors.
    for test in ["x.scalar_type() == at::kFloat", "true", "n > 0"] {
        let got = kg610("", test);
        assert!(got.contains(&Severity::Error), "{test}: {got:?}");
    }
}

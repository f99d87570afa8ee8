//! One test per rule family, in-crate: each lints a candidate with one hack planted and
//! asserts its rule fires, and lints an honest variant and asserts the family stays silent.
//! The fixture tests of the `kernelgate` binary (`tests/lint*.rs`) pin exact positions and
//! messages; these pin which family owns which hack.

use kernelgate_lint::{lint_file, Backend, LintOptions, Precision};

/// An honest CUDA candidate. `{module}` is module-level Python, `{forward}` the body of
/// `ModelNew.forward` (which must return), `{host}` C++ in the host function before its launch,
/// `{kernel}` CUDA inside the kernel, `{file}` C++ at file scope.
const TEMPLATE: &str = r#"import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
{file}
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    {kernel}
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    {host}
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="relu",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources=cuda_src,
    functions=["relu"],
)
{module}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{forward}
"#;

#[derive(Default)]
struct Plant<'s> {
    module: &'s str,
    forward: &'s str,
    host: &'s str,
    kernel: &'s str,
    file: &'s str,
}

const HONEST_FORWARD: &str = "        return ext.relu(x)";

fn candidate(p: &Plant) -> String {
    let forward = if p.forward.is_empty() {
        HONEST_FORWARD
    } else {
        p.forward
    };
    TEMPLATE
        .replace("{module}", p.module)
        .replace("{forward}", forward)
        .replace("{host}", p.host)
        .replace("{kernel}", p.kernel)
        .replace("{file}", p.file)
}

fn codes_with(source: &str, precision: Precision, backend: Option<Backend>) -> Vec<String> {
    let opts = LintOptions {
        precision,
        backend,
        ..Default::default()
    };
    lint_file("candidate.py", source, &opts)
        .expect("valid options")
        .into_iter()
        .map(|f| f.rule)
        .collect()
}

fn codes(source: &str) -> Vec<String> {
    codes_with(source, Precision::Fp32, None)
}

/// `plant` makes `code` fire; the honest candidate raises nothing at all.
#[track_caller]
fn assert_family(code: &str, plant: Plant) {
    let bad = codes(&candidate(&plant));
    assert!(bad.iter().any(|c| c == code), "{code} not raised: {bad:?}");
    let honest = codes(&candidate(&Plant::default()));
    assert!(honest.is_empty(), "the honest candidate raised {honest:?}");
}

/// `assert_forward(code, snippet)` and friends: `code` fires with one snippet planted in one
/// place of the honest candidate.
macro_rules! planters {
    ($($name:ident => $field:ident),* $(,)?) => {$(
        #[track_caller]
        fn $name(code: &str, $field: &str) {
            assert_family(code, Plant { $field, ..Default::default() });
        }
    )*};
}

planters!(
    assert_forward => forward,
    assert_module => module,
    assert_host => host,
    assert_kernel => kernel,
    assert_file => file,
);

#[test]
fn torch_fallback() {
    let cases = [
        ("KG101", "        return torch.relu(x)"),
        ("KG103", "        return ext.relu(x) @ x"),
        ("KG104", "        return ext.relu(x).sigmoid()"),
    ];
    for (code, forward) in cases {
        assert_forward(code, forward);
    }
    assert_family(
        "KG102",
        Plant {
            module: "fc = nn.Linear(4, 4)\n",
            forward: "        return fc(ext.relu(x))",
            ..Default::default()
        },
    );
}

#[test]
fn bypass() {
    let cases = [
        (
            "KG201",
            "        try:\n            return ext.relu(x)\n        except Exception:\n            return x",
        ),
        ("KG202", "        pass"),
        ("KG204", "        name = input()\n        return getattr(torch, name)(ext.relu(x))"),
    ];
    for (code, forward) in cases {
        assert_forward(code, forward);
    }
    assert_family(
        "KG203",
        Plant {
            module: "class Model(nn.Module):\n    pass\n",
            forward: "        return Model()(ext.relu(x))",
            ..Default::default()
        },
    );
}

#[test]
fn tampering() {
    let cases = [
        ("KG301", "torch.cuda.synchronize = lambda: None\n"),
        ("KG302", "torch.allclose = lambda *a, **k: True\n"),
        ("KG303", "torch.nn.functional.gelu = None\n"),
    ];
    for (code, module) in cases {
        assert_module(code, module);
    }
}

#[test]
fn sandbox() {
    let cases = [
        ("KG304", "import gc\n"),
        ("KG305", "print('{\"correct\": true}')\n"),
        ("KG306", "import subprocess\n"),
    ];
    for (code, module) in cases {
        assert_module(code, module);
    }
}

#[test]
fn output_cache() {
    assert_family(
        "KG401",
        Plant {
            module: "_cache = {}\n",
            forward: "        key = x.data_ptr()\n        if key in _cache:\n            return _cache[key]\n        return ext.relu(x)",
            ..Default::default()
        },
    );
}

#[test]
fn phase_detection() {
    assert_family(
        "KG402",
        Plant {
            module: "import os\n",
            forward: "        if os.environ.get(\"PHASE\") == \"timing\":\n            return x\n        return ext.relu(x)",
            ..Default::default()
        },
    );
}

#[test]
fn concurrency() {
    assert_forward("KG403", "        s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n            return ext.relu(x)");
    assert_module("KG404", "import threading\n");
}

#[test]
fn lazy_tensor() {
    assert_module("KG405", "class Lazy(torch.Tensor):\n    pass\n");
}

#[test]
fn memoized_forward() {
    assert_family(
        "KG406",
        Plant {
            module: "import functools\n\n@functools.lru_cache\ndef helper(n):\n    return Thing(n)\n\nclass Thing:\n    pass\n",
            forward: "        helper(1)\n        return ext.relu(x)",
            ..Default::default()
        },
    );
}

#[test]
fn input_mutation() {
    assert_forward("KG407", "        x.relu_()\n        return ext.relu(x)");
}

#[test]
fn precision() {
    assert_forward("KG501", "        return ext.relu(x.half())");
    assert_module("KG502", "torch.backends.cuda.matmul.allow_tf32 = True\n");
    // On an fp16 problem the same conversion is the problem's own precision.
    let fp16 = codes_with(
        &candidate(&Plant {
            forward: "        return ext.relu(x.half())",
            ..Default::default()
        }),
        Precision::Fp16,
        None,
    );
    assert!(!fp16.iter().any(|c| c == "KG501"), "{fp16:?}");
}

#[test]
fn structure() {
    assert_module("KG701", "batch_size = 16\n");
    let no_kernel = codes("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n");
    assert!(no_kernel.iter().any(|c| c == "KG702"), "{no_kernel:?}");
    let no_model = codes("import torch\n");
    assert!(no_model.iter().any(|c| c == "KG703"), "{no_model:?}");
}

#[test]
fn cpp_torch_op() {
    assert_host("KG601", "y = at::relu(x);");
    assert_host("KG602", "cublasHandle_t h; cublasCreate(&h);");
}

#[test]
fn cpp_concurrency() {
    assert_host("KG603", "auto s = at::cuda::getStreamFromPool();");
    assert_host("KG605", "std::thread t([]{}); t.join();");
}

#[test]
fn cpp_tampering() {
    assert_host("KG613", "system(\"ls\");");
    assert_kernel("KG614", "long long t0 = clock64();");
}

#[test]
fn cpp_caching() {
    assert_host("KG607", "cudaStreamAttrValue attr; cudaStreamSetAttribute(at::cuda::getCurrentCUDAStream(), cudaStreamAttributeAccessPolicyWindow, &attr);");
    assert_file("KG606", "static torch::Tensor cached;");
}

#[test]
fn cpp_input_mutation() {
    assert_host("KG608", "x.zero_();");
}

#[test]
fn cpp_precision() {
    assert_kernel("KG610", "__half h = __float2half(1.0f);");
}

#[test]
fn cpp_decoy() {
    assert_file(
        "KG611",
        "__global__ void unused_kernel(float* y) { y[0] = 1.f; }",
    );
}

#[test]
fn cpp_sources() {
    let missing = "import torch\nfrom torch.utils.cpp_extension import load\n\next = load(name=\"k\", sources=[\"missing_kernel.cu\"])\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.run(x)\n";
    assert!(
        codes(missing).iter().any(|c| c == "KG615"),
        "{:?}",
        codes(missing)
    );
    let unresolved = "import torch\nfrom torch.utils.cpp_extension import load_inline\n\next = load_inline(name=\"k\", cpp_sources=[open(\"k.cpp\").read()], functions=[\"run\"])\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.run(x)\n";
    assert!(
        codes(unresolved).iter().any(|c| c == "KG616"),
        "{:?}",
        codes(unresolved)
    );
}

#[test]
fn cpp_device_store() {
    let bad = codes(&candidate(&Plant {
        file: "__device__ float store_out[1 << 20];",
        kernel: "if (i < n && store_out[i] != 0.f) { y[i] = store_out[i]; return; }\n    if (i < n) store_out[i] = x[i];",
        ..Default::default()
    }));
    assert!(bad.iter().any(|c| c == "KG630"), "{bad:?}");
}

#[test]
fn triton() {
    let decoy = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, y_ptr):\n    tl.store(y_ptr, tl.load(x_ptr))\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";
    assert!(codes(decoy).iter().any(|c| c == "KG620"));
    let honest = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, y_ptr):\n    tl.store(y_ptr, tl.load(x_ptr))\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n        k[(1,)](x, y)\n        return y\n";
    assert_eq!(codes(honest), Vec::<String>::new());
    let no_kernel = codes_with(
        "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        Precision::Fp32,
        Some(Backend::Triton),
    );
    assert!(no_kernel.iter().any(|c| c == "KG622"), "{no_kernel:?}");
}

#[test]
fn file_rules() {
    assert!(codes("def (:\n").iter().any(|c| c == "KG000"));
    let src = candidate(&Plant {
        module:
            "y = 1  # kernelgate: allow=KG101\nz = 2  # kernelgate: allow=KG999 reason=\"typo\"\n",
        ..Default::default()
    });
    let found = codes(&src);
    assert!(found.iter().any(|c| c == "KG900"), "{found:?}");
    assert!(found.iter().any(|c| c == "KG901"), "{found:?}");
}

#[test]
fn every_rule_has_a_registry_entry_beside_it() {
    use kernelgate_lint::Rule;
    for rule in Rule::ALL {
        let meta = rule.meta();
        assert_eq!(meta.code, rule.code());
        assert_eq!(kernelgate_lint::rule(meta.code), Some(meta));
    }
}

//! The files a kernel is built from, linted: the sources `load(sources=...)` names however the
//! path is built (`_here`, pathlib), the local headers they include, read inside the repository
//! only; a finding in one names that file and its line.

use kernelgate_lint::{lint_file, LintOptions};
use std::path::{Path, PathBuf};

/// A repository in a fresh directory under the system's temporary one.
struct Repo(PathBuf);

impl Repo {
    fn new(name: &str) -> Repo {
        let dir =
            std::env::temp_dir().join(format!("kg-lint-sources-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Repo(dir)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn lint(&self, rel: &str) -> Vec<(String, String, u32, u32)> {
        let source = std::fs::read_to_string(self.0.join(rel)).unwrap();
        let opts = LintOptions {
            dir: self.0.join(rel).parent().map(Path::to_path_buf),
            root: Some(self.0.clone()),
            ..LintOptions::default()
        };
        lint_file(rel, &source, &opts)
            .unwrap()
            .into_iter()
            .filter(|f| f.rule.starts_with("KG6"))
            .map(|f| (f.rule, f.file, f.line, f.column))
            .collect()
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const MODEL_NEW: &str = "\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.scale(x)\n";

#[test]
fn sources_and_their_headers_are_checked_where_they_are() {
    let repo = Repo::new("found");
    repo.write(
        "kernels/level1/1_A/k.py",
        &format!("import torch\nfrom pathlib import Path\nfrom torch.utils.cpp_extension import load\n\nROOT = Path(__file__).resolve().parent.parent.parent.parent\next = load(name='k', sources=[str(ROOT / 'csrc' / 'scale.cu')], extra_include_paths=[str(ROOT / 'include')])\n{MODEL_NEW}"),
    );
    repo.write(
        "csrc/scale.cu",
        "#include <torch/extension.h>\n#include \"vendor.cuh\"\n\n__global__ void scale_kernel(float* y, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] *= 2.0f;\n}\n\ntorch::Tensor scale(torch::Tensor x) {\n    auto y = x.clone();\n    scale_kernel<<<1, 256>>>(y.data_ptr<float>(), y.numel());\n    vendor_scale(y);\n    return y;\n}\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"scale\", &scale); }\n",
    );
    // A shared header: the vendor call it hides is found at its own line; its other kernel,
    // launched by other kernels of the repository, is no decoy of this one.
    repo.write(
        "include/vendor.cuh",
        "#pragma once\n#include <cublas_v2.h>\n\n__global__ void used_elsewhere(float* y) { y[0] = 1.0f; }\n\ninline void vendor_scale(torch::Tensor y) {\n    cublasHandle_t h;\n    cublasCreate(&h);\n}\n",
    );
    let found = repo.lint("kernels/level1/1_A/k.py");
    assert!(
        found.contains(&("KG602".into(), "include/vendor.cuh".into(), 8, 5)),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .all(|(rule, ..)| rule != "KG611" && rule != "KG615"),
        "{found:?}"
    );
}

#[test]
fn a_source_outside_the_repository_is_not_read() {
    let repo = Repo::new("outside");
    let outside = Repo::new("outside-secret");
    outside.write("secret.cu", "cublasHandle_t h;\n");
    repo.write(
        "kernels/k.py",
        &format!("import os\nimport torch\nfrom torch.utils.cpp_extension import load\n\n_here = os.path.dirname(os.path.abspath(__file__))\next = load(name='k', sources=[os.path.join(_here, '..', '..', '{}', 'secret.cu')])\n{MODEL_NEW}",
            outside.0.file_name().unwrap().to_string_lossy()),
    );
    let found = repo.lint("kernels/k.py");
    // Named, not found inside the repository, so not read: KG615 at the path in the .py.
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].0.as_str(), found[0].1.as_str(), found[0].2),
        ("KG615", "kernels/k.py", 6)
    );
}

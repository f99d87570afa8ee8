//! A kernel's dependency set on real git repositories built in temp dirs: a change to any file a
//! kernel is built from (a `.cu` it loads, a header those include, a source under `csrc/`)
//! re-evaluates that kernel, through `kernelgate pr --plan` and `kernelgate kernels --changed`
//! alike; a path the analysis cannot resolve falls back to the kernel's directory, and says so.

use crate::common::{git, kernelgate_in, output_text, root, write};

use kernelgate::git::Git;
use kernelgate::pr::changes::detect;
use kernelgate::pr::layout::Layout;
use kernelgate::pr::plan::Plan;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const PROBLEM: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(16, 64)]\n\ndef get_init_inputs():\n    return []\n";

const MODEL_NEW: &str =
    "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)\n";

/// The kernel of the issue: its C++ in a sibling file, found through a module-level `_here`.
const SIB: &str = "import os\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load\n\n_here = os.path.dirname(os.path.abspath(__file__))\next = load(name=\"sib_relu\", sources=[os.path.join(_here, \"sib_relu.cpp\")], verbose=False)\n";

/// pathlib, a `.cu` beside it and the shared header found on an include path.
const A: &str = "from pathlib import Path\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load\n\nHERE = Path(__file__).parent\next = load(name=\"a\", sources=[HERE / \"a.cu\"], extra_include_paths=[str(HERE.parent.parent.parent / \"include\")])\n";

/// An f-string of `_here`, and the shared header by a relative `#include`.
const B: &str = "import os\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load\n\n_here = os.path.dirname(__file__)\next = load(name=\"b\", sources=[f\"{_here}/b.cu\"])\n";

/// Its source under `csrc/`, outside `kernels/`.
const D: &str = "import os\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load\n\nHERE = os.path.dirname(os.path.realpath(__file__))\next = load(name=\"d\", sources=[os.path.join(HERE, \"..\", \"..\", \"..\", \"csrc\", \"d.cu\")])\n";

/// A path chosen at run time: the analysis cannot resolve it.
const E: &str = "import os\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load\n\n_here = os.path.dirname(__file__)\next = load(name=\"e\", sources=[os.environ.get(\"E_SOURCE\", os.path.join(_here, \"e.cu\"))])\n";

/// Inline C++: no file beside it.
const F: &str = "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\next = load_inline(name=\"f\", cpp_sources=\"torch::Tensor relu(torch::Tensor x) { return x; }\", functions=[\"relu\"])\n";

/// main: six kernels and the files they are built from; then a branch `pr`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    for p in ["1_relu_small", "2_B", "3_C", "4_D", "5_E", "6_F"] {
        write(d, &format!("KernelBench/level1/{p}.py"), PROBLEM);
    }
    let kernel = |path: &str, head: &str| write(d, path, &format!("{head}{MODEL_NEW}"));
    kernel("kernels/level1/1_relu_small/sib.py", SIB);
    write(
        d,
        "kernels/level1/1_relu_small/sib_relu.cpp",
        "#include <torch/extension.h>\ntorch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }\n",
    );
    kernel("kernels/level1/2_B/a.py", A);
    write(
        d,
        "kernels/level1/2_B/a.cu",
        "#include \"shared.cuh\"\n__global__ void a() {}\n",
    );
    kernel("kernels/level1/3_C/b.py", B);
    write(
        d,
        "kernels/level1/3_C/b.cu",
        "#include \"../../../include/shared.cuh\"\n__global__ void b() {}\n",
    );
    write(
        d,
        "include/shared.cuh",
        "#pragma once\n#include \"detail/math.cuh\"\n",
    );
    write(
        d,
        "include/detail/math.cuh",
        "__device__ inline float relu(float v) { return v > 0 ? v : 0; }\n",
    );
    kernel("kernels/level1/4_D/d.py", D);
    write(d, "csrc/d.cu", "__global__ void d() {}\n");
    write(d, "csrc/unused.cu", "__global__ void u() {}\n");
    kernel("kernels/level1/5_E/e.py", E);
    write(d, "kernels/level1/5_E/e.cu", "__global__ void e() {}\n");
    kernel("kernels/level1/6_F/f.py", F);
    write(d, "README.md", "kernels\n");
    commit(d, "main");
    git(d, &["checkout", "-q", "-b", "pr"]);
    dir
}

fn commit(d: &Path, msg: &str) {
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", msg]);
}

/// Appends a line to `file` and commits it.
fn edit(d: &Path, file: &str, line: &str) {
    let old = std::fs::read_to_string(d.join(file)).unwrap_or_default();
    write(d, file, &format!("{old}{line}\n"));
    commit(d, &format!("edit {file}"));
}

fn json(d: &Path, args: &[&str]) -> Value {
    let out = kernelgate_in(d).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", output_text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(&out)))
}

/// `pr --plan`'s jobs by path; checks that `kernels --changed` lists the same kernels alike.
fn planned(d: &Path) -> BTreeMap<String, Value> {
    let plan = json(d, &["pr", "--plan", "--base", "main"]);
    let jobs: BTreeMap<String, Value> = plan["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["path"].as_str().unwrap().to_string(), j.clone()))
        .collect();
    let changed = json(d, &["kernels", "--changed", "main", "--format", "json"]);
    let listed: BTreeMap<String, (Value, Value)> = changed["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["path"].as_str().unwrap().to_string(),
                (k["status"].clone(), k["changed_sources"].clone()),
            )
        })
        .collect();
    let from_plan: BTreeMap<String, (Value, Value)> = jobs
        .iter()
        .map(|(p, j)| {
            (
                p.clone(),
                (j["status"].clone(), j["changed_sources"].clone()),
            )
        })
        .collect();
    assert_eq!(listed, from_plan, "kernels --changed and pr --plan agree");
    assert_eq!(changed["gate"].as_bool(), Some(!jobs.is_empty()));
    jobs
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[test]
fn a_cpp_only_edit_re_evaluates_its_kernel_at_head_and_at_base() {
    let dir = repo();
    let d = dir.path();
    edit(
        d,
        "kernels/level1/1_relu_small/sib_relu.cpp",
        "// a faster relu, or a cheat",
    );
    let jobs = planned(d);
    assert_eq!(
        jobs.keys().collect::<Vec<_>>(),
        ["kernels/level1/1_relu_small/sib.py"]
    );
    let job = &jobs["kernels/level1/1_relu_small/sib.py"];
    assert_eq!(job["status"], "sources_changed");
    assert_eq!(job["problem"], "level1/1_relu_small");
    assert_eq!(
        strings(&job["changed_sources"]),
        ["kernels/level1/1_relu_small/sib_relu.cpp"]
    );
    assert_eq!(
        strings(&job["sources"]),
        ["kernels/level1/1_relu_small/sib_relu.cpp"]
    );
    // Timed against its base version, which builds from the file as it was on main.
    assert_eq!(job["base_path"], "kernels/level1/1_relu_small/sib.py");
    assert!(strings(&job["unresolved_sources"]).is_empty());

    let git_repo = Git::open(d).unwrap();
    let layout = Layout::default();
    let cs = detect(&git_repo, &layout, "main", "HEAD", false).unwrap();
    let plan = Plan::build(&git_repo, &layout, cs, None).unwrap();
    let job = &plan.jobs[0];
    assert_eq!(
        job.sources,
        [d.join("kernels/level1/1_relu_small/sib_relu.cpp")]
    );
    let base_file = job.base_file.as_ref().unwrap();
    assert_eq!(job.base_sources.len(), 1);
    assert_eq!(
        job.base_sources[0].parent(),
        base_file.parent(),
        "the base's sibling beside the base's .py"
    );
    let base_cpp = std::fs::read_to_string(&job.base_sources[0]).unwrap();
    assert!(!base_cpp.contains("a faster relu"), "{base_cpp}");
    // The two builds are keyed apart: the .py is the same, the .cpp is not.
    let key = kernelgate_model::deps::build_key;
    let base_src = std::fs::read_to_string(base_file).unwrap();
    assert_eq!(base_src, job.source);
    assert_ne!(
        key(&job.kernel_file, &job.source, &job.sources),
        key(base_file, &base_src, &job.base_sources)
    );
}

#[test]
fn a_shared_header_edit_re_evaluates_every_kernel_that_includes_it() {
    let dir = repo();
    let d = dir.path();
    edit(d, "include/shared.cuh", "#define KG_SHARED 2");
    let jobs = planned(d);
    assert_eq!(
        jobs.keys().collect::<Vec<_>>(),
        ["kernels/level1/2_B/a.py", "kernels/level1/3_C/b.py"]
    );
    for job in jobs.values() {
        assert_eq!(job["status"], "sources_changed");
        assert_eq!(strings(&job["changed_sources"]), ["include/shared.cuh"]);
    }
    // Transitively: the header the shared one includes.
    git(d, &["reset", "-q", "--hard", "main"]);
    edit(d, "include/detail/math.cuh", "// tuned");
    let jobs = planned(d);
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert_eq!(
        strings(&jobs["kernels/level1/2_B/a.py"]["sources"]),
        [
            "include/detail/math.cuh",
            "include/shared.cuh",
            "kernels/level1/2_B/a.cu"
        ]
    );
}

#[test]
fn a_source_under_csrc_re_evaluates_its_kernel_and_starts_the_gate() {
    let dir = repo();
    let d = dir.path();
    edit(d, "csrc/d.cu", "// edited");
    let jobs = planned(d);
    assert_eq!(jobs.keys().collect::<Vec<_>>(), ["kernels/level1/4_D/d.py"]);
    assert_eq!(
        strings(&jobs["kernels/level1/4_D/d.py"]["changed_sources"]),
        ["csrc/d.cu"]
    );
    // A file under csrc/ that no kernel reads, and a README, give the gate nothing to judge.
    git(d, &["reset", "-q", "--hard", "main"]);
    edit(d, "csrc/unused.cu", "// edited");
    edit(d, "README.md", "more");
    assert!(planned(d).is_empty());
    let changed = json(d, &["kernels", "--changed", "main", "--format", "json"]);
    assert_eq!(changed["gate"], false);
    // The human form says which file brought the kernel in.
    git(d, &["reset", "-q", "--hard", "main"]);
    edit(d, "csrc/d.cu", "// edited again");
    let out = kernelgate_in(d)
        .args(["kernels", "--changed", "main"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kernels/level1/4_D/d.py")
            && text.contains("sources changed")
            && text.contains("csrc/d.cu"),
        "{text}"
    );
    assert!(text.contains("has something to judge"), "{text}");
}

#[test]
fn a_path_the_analysis_cannot_resolve_falls_back_to_the_kernels_directory() {
    let dir = repo();
    let d = dir.path();
    edit(d, "kernels/level1/5_E/e.cu", "// edited");
    let jobs = planned(d);
    assert_eq!(jobs.keys().collect::<Vec<_>>(), ["kernels/level1/5_E/e.py"]);
    let job = &jobs["kernels/level1/5_E/e.py"];
    assert_eq!(
        strings(&job["changed_sources"]),
        ["kernels/level1/5_E/e.cu"]
    );
    let why = strings(&job["unresolved_sources"]);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(
        why[0].starts_with("kernels/level1/5_E/e.py:6:")
            && why[0].contains("os.environ.get")
            && why[0].contains("any change under `kernels/level1/5_E/`")
            && why[0].contains("help:"),
        "{}",
        why[0]
    );
    // Any file under its directory, whatever it is; nothing outside it.
    git(d, &["reset", "-q", "--hard", "main"]);
    edit(d, "kernels/level1/5_E/notes.md", "why e is fast");
    assert_eq!(
        planned(d).keys().collect::<Vec<_>>(),
        ["kernels/level1/5_E/e.py"]
    );
    git(d, &["reset", "-q", "--hard", "main"]);
    edit(d, "csrc/d.cu", "// edited");
    assert!(!planned(d).contains_key("kernels/level1/5_E/e.py"));
}

#[test]
fn an_edited_kernel_says_which_of_its_sources_changed_with_it() {
    let dir = repo();
    let d = dir.path();
    edit(d, "kernels/level1/2_B/a.py", "# tuned");
    edit(d, "kernels/level1/2_B/a.cu", "// tuned");
    let jobs = planned(d);
    assert_eq!(jobs.keys().collect::<Vec<_>>(), ["kernels/level1/2_B/a.py"]);
    let job = &jobs["kernels/level1/2_B/a.py"];
    assert_eq!(job["status"], "modified");
    assert_eq!(
        strings(&job["changed_sources"]),
        ["kernels/level1/2_B/a.cu"]
    );
    // A kernel whose only source is inline is untouched by all of it.
    assert!(!jobs.contains_key("kernels/level1/6_F/f.py"));
}

/// The kernel end to end on the CPU: only its sibling `.cpp` changes, and the gate
/// builds and times the head from the edited file and the base from the file on main.
#[test]
fn a_cpp_only_edit_is_built_and_timed_at_head_and_at_base() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    let problem = std::fs::read_to_string(root().join("KernelBench/level1/3_ReLU.py"))
        .unwrap()
        .replace("batch_size = 4096", "batch_size = 16");
    write(d, "KernelBench/level1/3_ReLU.py", &problem);
    write(
        d,
        "kernelgate.toml",
        "[harness]\ntrials = 2\n\n[timing]\nbudget_s = 0.5\nwarmup = 1\nmin_samples = 10\nmax_samples = 30\nbaseline_max_cv_pct = 1000000.0\n",
    );
    let relu = |passes: u32| {
        format!(
            "#include <torch/extension.h>\n\ntorch::Tensor relu(torch::Tensor x) {{\n    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, \"contiguous float32\");\n    torch::Tensor out = torch::empty_like(x);\n    const float* in = x.data_ptr<float>();\n    volatile float* o = out.data_ptr<float>();\n    for (int p = 0; p < {passes}; ++p)\n        for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;\n    return out;\n}}\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def(\"relu\", &relu); }}\n"
        )
    };
    write(
        d,
        "kernels/level1/3_ReLU/sib.py",
        &format!("{SIB}{MODEL_NEW}"),
    );
    write(d, "kernels/level1/3_ReLU/sib_relu.cpp", &relu(4));
    commit(d, "main");
    git(d, &["checkout", "-q", "-b", "pr"]);
    write(d, "kernels/level1/3_ReLU/sib_relu.cpp", &relu(1));
    commit(d, "fewer passes");

    let out_dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ext = &store;
    let out = kernelgate_in(d)
        .args([
            "pr",
            "--base",
            "main",
            "--device",
            "cpu",
            "--publish",
            "files",
            "--quiet",
        ])
        .arg("--out")
        .arg(out_dir.path())
        .env("KERNELGATE_BUILD_STORE", ext.path())
        .output()
        .unwrap();
    let report: kernelgate_report::Report = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("report.json"))
            .unwrap_or_else(|e| panic!("{e}: {}", output_text(&out))),
    )
    .unwrap();
    assert_eq!(report.kernels.len(), 1, "{}", output_text(&out));
    let row = &report.kernels[0];
    assert_eq!(row.change, kernelgate_report::Change::SourcesChanged);
    assert_eq!(row.changed_sources, ["kernels/level1/3_ReLU/sib_relu.cpp"]);
    assert!(row.is_correct(), "{:?}\n{}", row.outcome, output_text(&out));
    // The base ran too, from its own build: the head and the base are two builds.
    let vs_base = row.vs_base.as_ref().expect("timed against its base");
    assert!(
        vs_base.ratio.is_finite()
            && vs_base.verdict != kernelgate_report::ComparisonVerdict::Invalid,
        "{row:?}"
    );
    // Two entries in the build store: one per dependency set.
    let builds = std::fs::read_dir(ext.path())
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(builds, 2, "one build per dependency set, found {builds}");
    let comment = std::fs::read_to_string(out_dir.path().join("comment.md")).unwrap();
    assert!(
        comment.contains("via `kernels/level1/3_ReLU/sib_relu.cpp`"),
        "{comment}"
    );
}

/// A committed symbolic link is no source: it could name any file of the runner, and the set's
/// files are granted to the sandboxed child. The kernel that names it is still re-evaluated.
#[test]
fn a_linked_source_is_re_evaluated_but_never_part_of_the_set() {
    let dir = repo();
    let d = dir.path();
    let cpp = d.join("kernels/level1/1_relu_small/sib_relu.cpp");
    std::fs::remove_file(&cpp).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", &cpp).unwrap();
    commit(d, "link");
    let jobs = planned(d);
    let job = &jobs["kernels/level1/1_relu_small/sib.py"];
    assert_eq!(
        strings(&job["changed_sources"]),
        ["kernels/level1/1_relu_small/sib_relu.cpp"]
    );
    assert!(strings(&job["sources"]).is_empty(), "{job}");
    let git_repo = Git::open(d).unwrap();
    let layout = Layout::default();
    let cs = detect(&git_repo, &layout, "main", "HEAD", false).unwrap();
    let plan = Plan::build(&git_repo, &layout, cs, None).unwrap();
    assert!(plan.jobs[0].sources.is_empty());
    // Its base built from the regular file it had on main.
    assert_eq!(plan.jobs[0].base_sources.len(), 1);
}

//! Helpers shared by the CLI integration tests: the checkout, its Python, and real git
//! repositories built in temp dirs. Each test binary uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The checkout (where `KernelBench/`, `kernels/` and `tests/fixtures/` live).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python that holds torch: `KERNELGATE_PYTHON`, else the checkout's `.venv`.
pub fn python() -> PathBuf {
    std::env::var_os("KERNELGATE_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"))
}

/// What a CI machine or a developer's shell may set that would change a run: a GitHub Actions
/// context, a GPU, a history store. Every `kernelgate` the tests start runs without them.
const AMBIENT: &[&str] = &[
    "GITHUB_EVENT_PATH",
    "GITHUB_REPOSITORY",
    "GITHUB_ACTIONS",
    "GITHUB_TOKEN",
    "GITHUB_STEP_SUMMARY",
    "CUDA_VISIBLE_DEVICES",
    "KERNELGATE_HISTORY",
];

/// `kernelgate --repo <repo>` as the tests run it: nothing ambient ([`AMBIENT`]), the
/// checkout's Python, one torch extensions cache and one build store under `target/` (each
/// C++ fixture compiles once per source).
pub fn kernelgate_in(repo: &Path) -> Command {
    let ext = test_extensions_dir();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kernelgate"));
    cmd.arg("--repo").arg(repo);
    for k in AMBIENT {
        cmd.env_remove(k);
    }
    cmd.env("KERNELGATE_PYTHON", python())
        .env("TORCH_EXTENSIONS_DIR", ext)
        .env("KERNELGATE_BUILD_STORE", test_build_store());
    cmd
}

/// The suite's build store for `pr` and `baseline` (created): each C++ fixture compiles once
/// per source across runs of the suite. Tests that count builds use a store of their own.
pub fn test_build_store() -> PathBuf {
    let store = root().join("target/kernelgate-test-build-store");
    std::fs::create_dir_all(&store).unwrap();
    store
}

/// The suite's torch extensions cache (created): each C++ fixture compiles once per source, and
/// the wheel test (scripts/test-wheel.sh) finds the demo's builds there.
pub fn test_extensions_dir() -> PathBuf {
    let ext = root().join("target/kernelgate-test-torch-extensions");
    std::fs::create_dir_all(&ext).unwrap();
    ext
}

/// Where the jobs of fixtures that build one and the same C++ extension share its build:
/// torch's own build directory (`ExtensionsDir::Torch`, the one a contributor's `python kernel.py`
/// leaves for a local eval), one per extension under the suite's cache. The first job compiles,
/// every later one loads that build as a `pr` eval loads its build job's: torch compares the
/// sources, flags and its version, and a job that finds another building waits on torch's lock.
/// The directory is named by the kernel's `load_inline(...)` call and the C++ it holds
/// (triple-quoted strings assigned to a name, with `torch::` or `#include`), so fixtures whose
/// extensions differ never build in one directory. A kernel without such a call, or whose extension names its source does
/// not state, gets the keyed cache (a build per source).
pub fn share_builds(spec: &mut kernelgate_eval::JobSpec) {
    let source = std::fs::read_to_string(&spec.kernel)
        .unwrap_or_else(|e| panic!("{}: {e}", spec.kernel.display()));
    let names = kernelgate_lint::embedded::extension_names(&source).filter(|n| !n.is_empty());
    spec.extensions_dir = match (extension_key(&source), &names) {
        (Some(key), Some(_)) => kernelgate_eval::ExtensionsDir::Torch {
            root: test_extensions_dir().join(format!("torch-{key:016x}")),
            exact: true,
        },
        _ => kernelgate_eval::ExtensionsDir::Keyed(test_extensions_dir()),
    };
    spec.extension_names = names;
}

/// What decides a fixture's extension build: its `load_inline(...)` call (name, flags, the
/// sources it names) and the C++ text of the triple-quoted strings it assigns; None without the
/// call.
fn extension_key(source: &str) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let start = source.find("load_inline(")?;
    let mut depth = 0usize;
    let mut end = None;
    for (i, c) in source[start..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(start + i);
                    break;
                }
            }
            _ => {}
        }
    }
    // A fixed hasher: the same fixture finds the same directory in every run.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    source[start..end?].hash(&mut h);
    // The strings assigned to a name (`CPP = r"""..."""`), not docstrings.
    let parts: Vec<&str> = source.split("\"\"\"").collect();
    for i in (1..parts.len()).step_by(2) {
        let assigned = parts[i - 1]
            .rsplit('\n')
            .next()
            .is_some_and(|line| line.contains('='));
        if assigned && (parts[i].contains("torch::") || parts[i].contains("#include")) {
            parts[i].hash(&mut h);
        }
    }
    Some(h.finish())
}

/// A finished command's status and both streams, for assertion messages.
pub fn output_text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs git in `dir` with a fixed identity, no signing and `main` as the first branch;
/// panics with git's stderr on failure, returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Writes `text` to `dir/path`, creating parent directories.
pub fn write(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Hack fixtures whose only errors were torch-op findings and that do run a working custom
/// kernel on the forward path (PyTorch does part of the work next to it). Statically that is
/// partial replacement, a warning; the runtime op audit (custom share of the GPU time) is the
/// defense for them. Every other hack fixture keeps at least one error (tests/it/lint.rs); each of
/// these still fails the gate as a whole (tests/it/audit.rs). Paths under `tests/fixtures/lint/`.
pub const AUDIT_DEFENDS: &[&str] = &[
    // A working C++/CUDA kernel, plus ATen ops inside the same extension.
    "cpp/hack_aten_op.py",
    "cpp/hack_dispatcher.py",
    "cpp/hack_escaped_string.py",
    "cpp/hack_namespace_alias.py",
    "cpp/hack_tensor_arithmetic.py",
    "cpp/hack_torch_nn_module.py",
    // The extension's real `relu` runs, PyTorch (or CuPy) computes around it.
    "hacks/cupy_library.py",
    "hacks/getattr_method.py",
    "hacks/indirect_attribute_access.py",
    "hacks/inplace_and_dunder_methods.py",
    "hacks/layer_subclass.py",
    "hacks/more_tensor_methods.py",
    "hacks/stored_op_wrappers.py",
    "hacks/tensor_method.py",
    "hacks/tensor_operators.py",
    "hacks/torch_dict_and_vf.py",
    "hacks/torch_op_alias.py",
    "hacks/torch_op_getattr.py",
    // The extension's `relu` runs through a table of stages the analysis does not follow: "no
    // custom code runs" is not proven, so the torch ops around it warn.
    "hacks/live_through_values.py",
];

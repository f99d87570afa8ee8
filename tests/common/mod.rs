//! Helpers shared by the CLI integration tests: the checkout, its Python, and real git
//! repositories built in temp dirs. Each test binary uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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

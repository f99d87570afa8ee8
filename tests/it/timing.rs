//! `kernelgate baseline` end to end on CPU: the real CLI, the real child process, the harness
//! extension's `kg_timing` and real torch. Needs `cargo build -p kernelgate-harness` first
//! (scripts/test.sh does it) and a Python with torch (`KERNELGATE_PYTHON` or `.venv`).

use crate::common::{python, root};

use kernelgate_timing::baseline::{BASELINES_FILE, KB_EAGER_FILE, KERNELS_FILE};
use kernelgate_timing::{BaselineFile, KbFile, Variant};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch copy of the fixture repository (baselines are written into it).
fn scratch_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = root().join("tests/fixtures/timing/repo");
    for entry in walk(&src) {
        let rel = entry.strip_prefix(&src).unwrap();
        let dst = dir.path().join(rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &dst).unwrap();
    }
    dir
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn baseline(repo: &Path, args: &[&str]) -> Output {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"));
    let lib = exe.parent().unwrap().join("libkernelgate_harness.so");
    assert!(
        lib.is_file() || std::env::var_os("KERNELGATE_HARNESS").is_some(),
        "{} is missing: run `cargo build -p kernelgate-harness` before these tests",
        lib.display()
    );
    Command::new(exe)
        .env("KERNELGATE_PYTHON", python())
        .arg("--repo")
        .arg(repo)
        .args(["baseline", "--device", "cpu", "--hardware", "TEST_CPU"])
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn baseline_writes_both_formats_and_recognises_its_own_baseline() {
    let repo = scratch_repo();
    let out = baseline(repo.path(), &["--problem", "level1/1_Tiny_add"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let dir = repo.path().join("results/timing/TEST_CPU");

    // KernelBench format: level -> file name -> mean/std/min/max/num_trials/hardware/device.
    let kb = KbFile::load(&dir.join(KB_EAGER_FILE)).unwrap();
    let e = kb
        .get("level1", "1_Tiny_add.py")
        .expect("entry for 1_Tiny_add.py");
    assert!(e.min > 0.0 && e.min <= e.mean && e.mean <= e.max, "{e:?}");
    assert!(
        e.num_trials >= 30,
        "at least min_samples (30 for baselines): {e:?}"
    );
    assert_eq!(e.device, "cpu");
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(KB_EAGER_FILE)).unwrap()).unwrap();
    let keys: Vec<&String> = raw["level1"]["1_Tiny_add.py"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys.len(), 7, "exactly KernelBench's fields: {keys:?}");

    // Ours: keyed by hardware and the problem's sha256, with the samples.
    let ours = BaselineFile::load(&dir.join(BASELINES_FILE)).unwrap();
    assert_eq!(ours.entries.len(), 1);
    let b = &ours.entries[0];
    assert_eq!(b.problem, "level1/1_Tiny_add");
    assert_eq!(b.variant, Variant::Eager);
    assert_eq!(b.problem_sha256.len(), 64);
    assert_eq!(b.samples_ms.len(), b.stats.n);
    assert!(!b.hardware.torch.is_empty());
    assert_eq!(b.hardware.precision, kernelgate_model::Precision::Fp32);
    assert!(
        (b.stats.mean - e.mean).abs() <= e.mean * 0.01,
        "KernelBench mean is ours rounded to 3 digits"
    );

    // A second run finds the stored entry (same key, same hash) and says how it compares.
    let again = baseline(repo.path(), &["--problem", "1_Tiny_add"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let t = text(&again);
    assert!(
        t.contains("agrees with the stored baseline") || t.contains("replaces a baseline"),
        "{t}"
    );
    assert_eq!(
        BaselineFile::load(&dir.join(BASELINES_FILE))
            .unwrap()
            .entries
            .len(),
        1,
        "replaced, not appended"
    );

    // Editing the problem changes its hash: the tool says so instead of comparing.
    let p = repo.path().join("KernelBench/level1/1_Tiny_add.py");
    let src = std::fs::read_to_string(&p)
        .unwrap()
        .replace("N = 4096", "N = 2048");
    std::fs::write(&p, src).unwrap();
    let changed = baseline(repo.path(), &["--problem", "1_Tiny_add"]);
    assert!(
        text(&changed).contains("problem changed since the stored baseline"),
        "{}",
        text(&changed)
    );
}

#[test]
fn accepted_kernels_are_recorded_under_the_reference_key() {
    let repo = scratch_repo();
    let out = baseline(repo.path(), &["--problem", "1_Tiny_add", "--kernels"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let dir = repo.path().join("results/timing/TEST_CPU");
    let refs = BaselineFile::load(&dir.join(BASELINES_FILE)).unwrap();
    let kernels = BaselineFile::load(&dir.join(KERNELS_FILE)).unwrap();
    assert_eq!(kernels.entries.len(), 1, "{kernels:?}");
    let k = &kernels.entries[0];
    assert_eq!(k.variant, Variant::Kernel);
    assert_eq!(
        k.kernel.as_deref(),
        Some("kernels/level1/1_Tiny_add/python.py")
    );
    assert_eq!(k.kernel_sha256.as_ref().map(String::len), Some(64));
    assert_eq!(
        k.hardware, refs.entries[0].hardware,
        "kernels share the reference's hardware key"
    );
    assert_eq!(k.problem_sha256, refs.entries[0].problem_sha256);
    assert!(k.stats.n >= 10 && k.stats.median > 0.0);
}

#[test]
fn broken_reference_is_reported_and_others_are_kept() {
    let repo = scratch_repo();
    let out = baseline(repo.path(), &["--level", "1"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("FAILED: RuntimeError: this reference is broken on purpose"),
        "{t}"
    );
    let kb = KbFile::load(
        &repo
            .path()
            .join("results/timing/TEST_CPU")
            .join(KB_EAGER_FILE),
    )
    .unwrap();
    assert!(kb.get("level1", "1_Tiny_add.py").is_some());
    assert!(kb.get("level1", "2_Broken.py").is_none());
}

#[test]
fn usage_errors_name_the_fix() {
    let repo = scratch_repo();
    let out = baseline(repo.path(), &["--problem", "level9/77_Nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("--problem level9/77_Nope"),
        "{}",
        text(&out)
    );

    // A corrupt baseline file is named, with what to do, and is not overwritten.
    let dir = repo.path().join("results/timing/TEST_CPU");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(BASELINES_FILE), "{ truncated").unwrap();
    let out = baseline(repo.path(), &["--problem", "1_Tiny_add"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains(BASELINES_FILE) && t.contains("kernelgate baseline"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join(BASELINES_FILE)).unwrap(),
        "{ truncated"
    );
}

//! `kernelgate problems` and `kernelgate kernels` on the bundled tree and on small repositories
//! built per test: every mapping rule, every mapping error, config errors, dataset exports.

use crate::common::{root, write};

use kernelgate_model::hash;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn kernelgate(repo: &Path, args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .arg("--repo")
        .arg(repo)
        .args(args)
        .output()
        .expect("run kernelgate");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json(out: &Out) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", out.stdout, out.stderr))
}

const CPP_KERNEL: &str = "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='m', cpp_sources='', functions=['f'])\n";
const CUDA_KERNEL: &str = "from torch.utils.cpp_extension import load_inline\nsrc = '__global__ void k() {}'\nm = load_inline(name='m', cpp_sources='', cuda_sources=src)\n";

/// A repository with three problems and no kernels yet.
fn small_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "KernelBench/level1/3_ReLU.py",
        "import torch\nx = 1\n",
    );
    write(
        dir.path(),
        "KernelBench/level1/5_Sigmoid.py",
        "import torch\nx = 2\n",
    );
    write(
        dir.path(),
        "KernelBench/level2/1_Matmul_ReLU_Add.py",
        "import torch\nx = 3\n",
    );
    dir
}

#[test]
fn problems_json_lists_the_bundled_set_with_hashes() {
    let out = kernelgate(&root(), &["problems", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = json(&out);
    let list = v.as_array().unwrap();
    assert!(list.len() >= 12, "{} problems", list.len());
    let levels: std::collections::BTreeSet<u64> =
        list.iter().map(|p| p["level"].as_u64().unwrap()).collect();
    assert_eq!(levels, [1, 2, 3].into());
    let relu = list.iter().find(|p| p["key"] == "level1/3_ReLU").unwrap();
    let source = std::fs::read_to_string(root().join("KernelBench/level1/3_ReLU.py")).unwrap();
    let (sha, md5) = hash::hashes(&source);
    assert_eq!(relu["sha256"], sha.as_str());
    assert_eq!(relu["md5"], md5.as_str());
    assert_eq!(
        (relu["id"].as_u64(), relu["name"].as_str()),
        (Some(3), Some("ReLU"))
    );
    assert!(relu["path"]
        .as_str()
        .unwrap()
        .ends_with("KernelBench/level1/3_ReLU.py"));
}

#[test]
fn problems_table_filters_by_level() {
    let out = kernelgate(&root(), &["problems", "--level", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = out.stdout.lines().next().unwrap();
    assert!(first.starts_with("PROBLEM") && first.contains("SHA256") && first.contains("MD5"));
    assert!(out.stdout.contains("level2/1_Matmul_ReLU_Add"));
    assert!(!out.stdout.contains("level1/"));
    assert!(out.stdout.contains("problems from"), "{}", out.stdout);
}

#[test]
fn kernels_on_the_bundled_tree_are_all_mapped() {
    let out = kernelgate(&root(), &["kernels", "--format", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let v = json(&out);
    assert_eq!(v["errors"].as_array().unwrap().len(), 0);
    let kernels = v["kernels"].as_array().unwrap();
    let mut backends = std::collections::BTreeMap::new();
    for k in kernels {
        let path = k["path"].as_str().unwrap();
        let file = Path::new(path).file_stem().unwrap().to_str().unwrap();
        // Bundled kernels are named after their backend.
        assert_eq!(k["backend"], file, "{path}");
        assert_eq!(k["mapped_by"], "path");
        assert_eq!(k["precision"], "fp32");
        let dir = Path::new(path).parent().unwrap();
        assert!(dir.ends_with(k["problem_key"].as_str().unwrap()), "{path}");
        *backends.entry(file.to_string()).or_insert(0) += 1;
    }
    assert!(backends["cpp"] >= 4, "{backends:?}");
    assert!(backends["cuda"] >= 5, "{backends:?}");
    assert!(backends["triton"] >= 2, "{backends:?}");

    let table = kernelgate(&root(), &["kernels"]);
    assert_eq!(table.code, 0);
    assert!(table.stdout.starts_with("KERNEL"));
    assert!(table
        .stdout
        .lines()
        .any(|l| l.starts_with("kernels/level1/3_ReLU/cuda.py")
            && l.contains("level1/3_ReLU")
            && l.contains("cuda")));
}

#[test]
fn every_mapping_rule() {
    let repo = small_repo();
    let d = repo.path();
    // Directive wins over the path, and sets backend and precision.
    write(
        d,
        "kernels/level1/3_ReLU/odd.py",
        &format!(
            "# kernelgate: problem=level1/5_Sigmoid backend=triton precision=bf16\n{CPP_KERNEL}"
        ),
    );
    // Directive with a short problem name.
    write(
        d,
        "kernels/misc/short.py",
        &format!("# kernelgate: problem=5_Sigmoid\n{CUDA_KERNEL}"),
    );
    // Config mapping.
    write(d, "kernels/fused/mm.py", CUDA_KERNEL);
    // Path conventions: directory and file.
    write(d, "kernels/level1/3_ReLU/cpp.py", CPP_KERNEL);
    write(d, "kernels/level2/1_Matmul_ReLU_Add.py", CUDA_KERNEL);
    // Outside the globs: ignored.
    write(d, "scratch/level1/3_ReLU.py", CUDA_KERNEL);
    write(
        d,
        "kernelgate.toml",
        "[kernels.mapping]\n\"kernels/fused/*.py\" = \"level2/1_Matmul_ReLU_Add\"\n",
    );
    let out = kernelgate(d, &["kernels", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = json(&out);
    let got: Vec<(String, String, String, String, String)> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let s = |f: &str| k[f].as_str().unwrap().to_string();
            (
                s("path"),
                s("problem_key"),
                s("backend"),
                s("precision"),
                s("mapped_by"),
            )
        })
        .collect();
    let want = [
        (
            "kernels/fused/mm.py",
            "level2/1_Matmul_ReLU_Add",
            "cuda",
            "fp32",
            "config",
        ),
        (
            "kernels/level1/3_ReLU/cpp.py",
            "level1/3_ReLU",
            "cpp",
            "fp32",
            "path",
        ),
        (
            "kernels/level1/3_ReLU/odd.py",
            "level1/5_Sigmoid",
            "triton",
            "bf16",
            "directive",
        ),
        (
            "kernels/level2/1_Matmul_ReLU_Add.py",
            "level2/1_Matmul_ReLU_Add",
            "cuda",
            "fp32",
            "path",
        ),
        (
            "kernels/misc/short.py",
            "level1/5_Sigmoid",
            "cuda",
            "fp32",
            "directive",
        ),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(a, b, c, d, e)| {
            (
                a.to_string(),
                b.to_string(),
                c.to_string(),
                d.to_string(),
                e.to_string(),
            )
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn every_mapping_error_names_the_file_and_keeps_the_others() {
    let repo = small_repo();
    let d = repo.path();
    write(d, "kernels/level1/3_ReLU/good.py", CPP_KERNEL);
    write(d, "kernels/unmapped.py", CPP_KERNEL);
    write(d, "kernels/both/x.py", CPP_KERNEL);
    write(d, "kernels/level1/3_Relu/typo.py", CPP_KERNEL);
    write(
        d,
        "kernels/typo_directive.py",
        &format!("\n# kernelgate: problem=level1/5_Sigmod\n{CPP_KERNEL}"),
    );
    write(
        d,
        "kernels/bad_directive.py",
        &format!("# kernelgate: problem=level1/3_ReLU backend=opencl\n{CPP_KERNEL}"),
    );
    write(d, "kernels/level1/3_ReLU/nobackend.py", "import torch\n");
    write(
        d,
        "kernelgate.toml",
        "[kernels.mapping]\n\"kernels/both/*.py\" = \"level1/3_ReLU\"\n\"kernels/*/x.py\" = \"level1/5_Sigmoid\"\n",
    );
    let out = kernelgate(d, &["kernels"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("kernels/level1/3_ReLU/good.py"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("1 kernel, 6 errors"), "{}", out.stdout);
    let err = &out.stderr;
    let expect = [
        "error: kernels/unmapped.py: not mapped to any problem",
        "error: kernels/both/x.py: [kernels.mapping] globs",
        "error: kernels/level1/3_Relu/typo.py: unknown problem `level1/3_Relu` (did you mean `level1/3_ReLU`?) (mapped by path)",
        "error: kernels/typo_directive.py:2: unknown problem `level1/5_Sigmod` (did you mean `level1/5_Sigmoid`?) (mapped by directive)",
        "error: kernels/bad_directive.py:1:",
        "error: kernels/level1/3_ReLU/nobackend.py: cannot tell the kernel's backend",
    ];
    for e in expect {
        assert!(err.contains(e), "missing `{e}` in:\n{err}");
    }
    assert!(err.contains("unknown backend `opencl`"), "{err}");
    assert!(err.contains("level1/3_ReLU, level1/5_Sigmoid"), "{err}");
    assert_eq!(err.matches("help: ").count(), 6, "{err}");

    let v = json(&kernelgate(d, &["kernels", "--format", "json"]));
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 6);
    let bad = errors
        .iter()
        .find(|e| e["path"] == "kernels/bad_directive.py")
        .unwrap();
    assert_eq!(bad["line"], 1);
}

#[test]
fn config_errors_name_the_key_and_its_place() {
    let repo = small_repo();
    write(
        repo.path(),
        "kernelgate.toml",
        "[timing]\nthreshold_pct = 2.0\ntreshold = 3\n",
    );
    let out = kernelgate(repo.path(), &["problems"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("kernelgate.toml:3:1: unknown field `treshold`"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("help: "), "{}", out.stderr);

    write(
        repo.path(),
        "kernelgate.toml",
        "[defaults]\nprecision = \"fp8\"\n",
    );
    let out = kernelgate(repo.path(), &["kernels"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("kernelgate.toml:2:13: unknown precision `fp8`"),
        "{}",
        out.stderr
    );

    let missing = repo.path().join("nope.toml");
    let out = kernelgate(
        repo.path(),
        &["--config", missing.to_str().unwrap(), "problems"],
    );
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("nope.toml"), "{}", out.stderr);
}

#[test]
fn dataset_root_from_config_and_errors() {
    let repo = small_repo();
    std::fs::rename(
        repo.path().join("KernelBench"),
        repo.path().join("problems"),
    )
    .unwrap();
    let out = kernelgate(repo.path(), &["problems"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("KernelBench does not exist"),
        "{}",
        out.stderr
    );
    write(
        repo.path(),
        "kernelgate.toml",
        "[dataset]\nroot = \"problems\"\n",
    );
    let out = kernelgate(repo.path(), &["problems", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(json(&out).as_array().unwrap().len(), 3);
}

#[test]
fn jsonl_dataset_gives_the_same_problems_and_hashes_as_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for entry in [
        "level1/3_ReLU.py",
        "level1/7_Softmax.py",
        "level2/1_Matmul_ReLU_Add.py",
    ] {
        let code = std::fs::read_to_string(root().join("KernelBench").join(entry)).unwrap();
        let (level, name) = entry.split_once('/').unwrap();
        let level: u32 = level.trim_start_matches("level").parse().unwrap();
        let id: u32 = name.split('_').next().unwrap().parse().unwrap();
        lines.push(
            serde_json::json!({"code": code, "level": level, "name": name, "problem_id": id})
                .to_string(),
        );
    }
    let file = dir.path().join("kb.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let from_rows = json(&kernelgate(
        &root(),
        &[
            "problems",
            "--format",
            "json",
            "--dataset",
            file.to_str().unwrap(),
        ],
    ));
    let from_files = json(&kernelgate(&root(), &["problems", "--format", "json"]));
    let rows = from_rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let file = from_files
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["key"] == row["key"])
            .unwrap();
        assert_eq!(row["sha256"], file["sha256"]);
        assert_eq!(row["md5"], file["md5"]);
    }
    let out = kernelgate(&root(), &["problems", "--dataset", "hf:not-a-dataset"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("hf:<owner>/<name>"), "{}", out.stderr);
}

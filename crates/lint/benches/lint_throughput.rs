//! Throughput of `lint_file` on one core: 1,000 generated KernelBench-size candidates (variants
//! of the lint fixtures and the bundled kernels), printed as a table. Run with
//! `scripts/bench-lint.sh` or `cargo bench -p kernelgate-lint --bench lint_throughput`.

use kernelgate_lint::{lint_file, LintOptions};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn py_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            py_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "py") {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut templates = Vec::new();
    for d in [
        "kernels",
        "tests/fixtures/lint/honest",
        "tests/fixtures/lint/hacks",
        "tests/fixtures/lint/cpp",
    ] {
        py_files(&root.join(d), &mut templates);
    }
    let templates: Vec<String> = templates
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    assert!(
        !templates.is_empty(),
        "no template kernels found under {}",
        root.display()
    );
    // 1,000 distinct files: rename identifiers and append a varying helper so no two are equal.
    let files: Vec<String> = (0..1000)
        .map(|i| {
            let t = &templates[i % templates.len()];
            format!(
                "{}\n\ndef _helper_{i}(x, n={i}):\n    # variant {i}\n    return x.view(-1)[: n // 2]\n",
                t.replace("relu", &format!("relu{}", i % 7))
            )
        })
        .collect();
    let bytes: usize = files.iter().map(String::len).sum();
    let opts = LintOptions::default();
    // Warm-up (page in, allocate), then the timed pass; best of 3.
    let mut findings = 0;
    for f in files.iter().take(50) {
        findings += lint_file("bench.py", f, &opts).unwrap().len();
    }
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        findings = 0;
        for (i, f) in files.iter().enumerate() {
            findings += lint_file(&format!("bench/{i}.py"), f, &opts).unwrap().len();
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let mb = bytes as f64 / 1e6;
    println!("| files | MB    | seconds | MB/s  | files/s | findings |");
    println!("|-------|-------|---------|-------|---------|----------|");
    println!(
        "| {:5} | {:5.2} | {:7.3} | {:5.1} | {:7.0} | {:8} |",
        files.len(),
        mb,
        best,
        mb / best,
        files.len() as f64 / best,
        findings
    );
}

//! Throughput of `lint_file` on one core: 1,000 generated KernelBench-size candidates (variants
//! of the lint fixtures and the bundled kernels), printed as a table. Run with
//! `scripts/bench-lint.sh` or `cargo bench -p kernelgate-lint --bench lint_throughput`;
//! `scripts/bench-lint.sh REV` compares with the linter at git revision REV in the same run.

use kernelgate_lint::{lint_file, Context, LintOptions, Precision};
use std::path::{Path, PathBuf};
use std::time::Instant;

// The allocator `kernelgate` itself uses (src/main.rs), so the figure is the shipped binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    // KG_BENCH_ROOT: lint the templates of another checkout (the A/B run of
    // `scripts/bench-lint.sh REV` builds REV's linter and feeds both the same files).
    let root = std::env::var_os("KG_BENCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    // Every lint fixture and bundled kernel; the hack fixtures are minimal (a mechanism each).
    let templates = read_templates(
        &root,
        &[
            "kernels",
            "tests/fixtures/lint/honest",
            "tests/fixtures/lint/hacks",
            "tests/fixtures/lint/cpp",
        ],
    );
    // Complete candidates only (the bundled kernels and the honest fixtures): the size of a
    // real KernelBench submission, about 2 KB with its CUDA source.
    let candidates = read_templates(&root, &["kernels", "tests/fixtures/lint/honest"]);
    let files = generate(&templates);
    let candidate_files = generate(&candidates);
    let bytes: usize = files.iter().map(String::len).sum();
    let opts = LintOptions::default();
    let mb = bytes as f64 / 1e6;
    println!("| pass                          | files | MB    | cpu s | wall s | MB/s (cpu) | findings |");
    println!("|-------------------------------|-------|-------|-------|--------|------------|----------|");
    let full = |i: usize, f: &String| lint_file(&format!("bench/{i}.py"), f, &opts).unwrap().len();
    let python_only = |i: usize, f: &String| {
        // ruff parse + the Python rules, without embedded C++/CUDA (tree-sitter) and Triton.
        let path = format!("bench/{i}.py");
        let ctx = Context::new(&path, f, Precision::Fp32, None);
        match ruff_python_parser::parse_module(f) {
            Ok(parsed) => kernelgate_lint::python::check(parsed.syntax(), &ctx).len(),
            Err(_) => 1,
        }
    };
    row("lint_file (everything)", &files, mb, &full);
    let candidate_mb = candidate_files.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    row(
        "lint_file (full candidates)",
        &candidate_files,
        candidate_mb,
        &|i, f| {
            lint_file(&format!("bench/c{i}.py"), f, &opts)
                .unwrap()
                .len()
        },
    );
    row("Python parse + Python rules", &files, mb, &python_only);
    // Phases of the embedded C++/CUDA part, on sources extracted once up front.
    let extracted: Vec<Vec<kernelgate_lint::embedded::EmbeddedSource>> = files
        .iter()
        .map(|f| match ruff_python_parser::parse_module(f) {
            Ok(p) => kernelgate_lint::embedded::extract(p.syntax(), f),
            Err(_) => Vec::new(),
        })
        .collect();
    let cpp_bytes: usize = extracted.iter().flatten().map(|e| e.text.len()).sum();
    println!(
        "(embedded C++/CUDA: {:.2} MB in {} sources)",
        cpp_bytes as f64 / 1e6,
        extracted.iter().flatten().count()
    );
    let extract = |_i: usize, f: &String| match ruff_python_parser::parse_module(f) {
        Ok(p) => kernelgate_lint::embedded::extract(p.syntax(), f).len(),
        Err(_) => 0,
    };
    let ts_parse = |i: usize, _f: &String| {
        extracted[i]
            .iter()
            .filter_map(|e| kernelgate_lint::cpp::parse(&e.text))
            .count()
    };
    let cpp_rules = |i: usize, f: &String| {
        let path = format!("bench/{i}.py");
        let ctx = Context::new(&path, f, Precision::Fp32, None);
        extracted[i]
            .iter()
            .map(|e| kernelgate_lint::cpp::check(e, &ctx).len())
            .sum()
    };
    row("ruff parse + embedded extract", &files, mb, &extract);
    row("tree-sitter parse (extracted)", &files, mb, &ts_parse);
    row("C++ rules incl. parse (extr.)", &files, mb, &cpp_rules);
}

fn read_templates(root: &Path, dirs: &[&str]) -> Vec<String> {
    let mut paths = Vec::new();
    for d in dirs {
        py_files(&root.join(d), &mut paths);
    }
    let templates: Vec<String> = paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    assert!(
        !templates.is_empty(),
        "no template kernels found under {}",
        root.display()
    );
    templates
}

/// 1,000 distinct files: rename identifiers and append a varying helper so no two are equal.
fn generate(templates: &[String]) -> Vec<String> {
    (0..1000)
        .map(|i| {
            let t = &templates[i % templates.len()];
            format!(
                "{}\n\ndef _helper_{i}(x, n={i}):\n    # variant {i}\n    return x.view(-1)[: n // 2]\n",
                t.replace("relu", &format!("relu{}", i % 7))
            )
        })
        .collect()
}

fn row(name: &str, files: &[String], mb: f64, f: &dyn Fn(usize, &String) -> usize) {
    // KG_BENCH_ONLY=lint_file: only the rows whose name starts so (for a profiler).
    if let Ok(only) = std::env::var("KG_BENCH_ONLY") {
        if !name.starts_with(&only) {
            return;
        }
    }
    // One untimed pass warms caches and the allocator's pages.
    for (i, s) in files.iter().enumerate() {
        f(i, s);
    }
    // Best of 5; CPU time of this thread, so other processes on the machine do not count (their
    // cache and memory-bandwidth pressure still does on a shared machine, hence the best).
    let (mut best_cpu, mut best_wall, mut findings) = (f64::INFINITY, f64::INFINITY, 0);
    for _ in 0..5 {
        let (c0, w0) = (thread_cpu(), Instant::now());
        findings = files.iter().enumerate().map(|(i, s)| f(i, s)).sum();
        best_cpu = best_cpu.min(thread_cpu() - c0);
        best_wall = best_wall.min(w0.elapsed().as_secs_f64());
    }
    println!(
        "| {:29} | {:5} | {:5.2} | {:5.3} | {:6.3} | {:10.1} | {:8} |",
        name,
        files.len(),
        mb,
        best_cpu,
        best_wall,
        mb / best_cpu,
        findings
    );
}

fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

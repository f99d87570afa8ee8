"""Times another static checker on the same 1,000 files as crates/lint/benches/lint_throughput.rs
(same templates, same generation), so `scripts/bench-lint.sh` can print both figures from one run
on one machine. The checker is not part of kernelgate: pass its file, e.g. KernelBench's
`src/kernelbench/kernel_static_checker.py` (it must define `validate_kernel_static(code, backend,
precision)`).

    python3 scripts/bench-lint-reference.py PATH/kernel_static_checker.py [ROOT]
"""
import importlib.util
import os
import sys
import time


def py_files(d, out):
    """Recursively, in sorted order per directory: the bench's own walk."""
    try:
        entries = sorted(os.listdir(d))
    except OSError:
        return
    for name in entries:
        p = os.path.join(d, name)
        if os.path.isdir(p):
            py_files(p, out)
        elif name.endswith(".py"):
            out.append(p)


def generate(templates):
    return [
        templates[i % len(templates)].replace("relu", f"relu{i % 7}")
        + f"\n\ndef _helper_{i}(x, n={i}):\n    # variant {i}\n    return x.view(-1)[: n // 2]\n"
        for i in range(1000)
    ]


def main():
    checker_path = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..")
    spec = importlib.util.spec_from_file_location("reference_checker", checker_path)
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    paths = []
    for d in ["kernels", "tests/fixtures/lint/honest", "tests/fixtures/lint/hacks", "tests/fixtures/lint/cpp"]:
        py_files(os.path.join(root, d), paths)
    templates = [open(p, encoding="utf-8").read() for p in paths]
    files = generate(templates)
    mb = sum(len(f.encode()) for f in files) / 1e6
    for f in files:  # warm-up pass
        checker.validate_kernel_static(f, backend="cuda", precision="fp32")
    best = float("inf")
    for _ in range(5):
        t0 = time.thread_time()
        for f in files:
            checker.validate_kernel_static(f, backend="cuda", precision="fp32")
        best = min(best, time.thread_time() - t0)
    name = os.path.basename(checker_path)[:29]
    print(f"| {name:29} | {len(files):5} | {mb:5.2f} | {best:5.3f} | {'':6} | {mb / best:10.1f} | {'':8} |")


if __name__ == "__main__":
    main()

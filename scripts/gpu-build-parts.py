"""Where an extension build's time goes (issue 29): one bundled kernel built cold by torch's
`load_inline` as kernelgate's build stage runs it (MAX_JOBS=2, TORCH_CUDA_ARCH_LIST of the GPU),
then each of its ninja commands timed alone on an idle machine, then the variants that could cut
it: nvcc's own phase split (`--time`), the host translation unit against a precompiled
`torch/extension.h` (found first through CPATH), and the device translation unit with the torch
headers replaced by the CUDA runtime's (the floor a kernel that includes only what it uses gets).

A benchmark, not a test: run it on the GPU machine.
Usage:   python scripts/gpu-build-parts.py [kernels/level1/3_ReLU/cuda.py ...]
Prints one table per kernel; every figure is seconds of wall time.
"""

import csv
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, cwd, env=None):
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True, text=True)
    return time.perf_counter() - t, p


def ninja_commands(build_dir):
    out = subprocess.run(["ninja", "-C", build_dir, "-t", "commands"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


def kind(cmd):
    if "nvcc" in cmd.split()[0] or " nvcc " in cmd[:200]:
        return "device TU (nvcc, cuda.cu)"
    if " -c " in cmd:
        return "host TU (c++, main.cpp)"
    return "link"


def build_cold(path, ext_dir):
    """Imports the kernel file as the build stage does; returns the wall time."""
    env_before = dict(os.environ)
    os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
    os.environ.setdefault("MAX_JOBS", "2")
    t = time.perf_counter()
    spec = importlib.util.spec_from_file_location(f"kg_parts_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    wall = time.perf_counter() - t
    os.environ.clear()
    os.environ.update(env_before)
    return wall


def main(paths):
    import torch

    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if not arch and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}.{minor}"
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    print(f"# torch {torch.__version__} cuda {torch.version.cuda} arch {arch} cores {os.cpu_count()}")
    torch_include = os.path.join(os.path.dirname(torch.__file__), "include")
    for path in paths:
        print(f"\n== {os.path.relpath(path, ROOT)}")
        work = tempfile.mkdtemp(prefix="kg-parts-")
        ext = os.path.join(work, "ext")
        wall = build_cold(path, ext)
        print(f"{'cold load_inline build (MAX_JOBS=2)':52} {wall:7.1f}")
        dirs = [os.path.join(ext, d) for d in os.listdir(ext) if os.path.isfile(os.path.join(ext, d, "build.ninja"))]
        for build_dir in dirs:
            cmds = ninja_commands(build_dir)
            host_cmd = None
            for cmd in cmds:
                what = kind(cmd)
                csv_path = os.path.join(work, "nvcc-time.csv")
                # nvcc's own phase split rides on the one timed run of the device TU.
                timed_cmd = cmd + f" --time {csv_path}" if what.startswith("device") else cmd
                secs, p = timed(timed_cmd, build_dir)
                print(f"{what + ' alone':52} {secs:7.1f}{'' if p.returncode == 0 else '  (failed)'}")
                if what.startswith("device"):
                    if p.returncode == 0 and os.path.exists(csv_path):
                        phases = {}
                        with open(csv_path) as f:
                            for row in csv.DictReader(f):
                                name = (row.get("phase name") or row.get("phase") or "?").strip()
                                ms = float((row.get("metric") or row.get("time(ms)") or "0").strip() or 0)
                                phases[name] = phases.get(name, 0.0) + ms / 1000
                        for name, s in sorted(phases.items(), key=lambda kv: -kv[1])[:8]:
                            print(f"{'  nvcc phase ' + name:52} {s:7.1f}")
                    # The same translation unit with the torch headers swapped for CUDA's runtime.
                    src = re.search(r"-c (\S+\.cu)", cmd)
                    if src:
                        text = open(os.path.join(build_dir, src.group(1)) if not os.path.isabs(src.group(1)) else src.group(1)).read()
                        slim = re.sub(r"#include <(torch|ATen|c10)/[^>]+>", "", text)
                        slim_path = os.path.join(work, "slim.cu")
                        open(slim_path, "w").write("#include <cuda_runtime.h>\n#include <cstdint>\n" + slim.split("torch::Tensor")[0])
                        slim_cmd = cmd.replace(src.group(1), slim_path).replace(" -o ", " -o " + work + "/slim_")
                        slim_cmd = re.sub(r"-o \S+", f"-o {work}/slim.o", slim_cmd)
                        secs, p = timed(slim_cmd, build_dir)
                        print(f"{'device TU, kernels only (no torch headers)':52} {secs:7.1f}{'' if p.returncode == 0 else '  (failed: ' + p.stderr.strip().splitlines()[-1][:60] + ')'}")
                elif what.startswith("host"):
                    host_cmd = cmd
            if host_cmd:
                # A precompiled torch/extension.h, built once with the TU's own flags, found
                # before torch's own headers through CPATH (searched like -I, ahead of -isystem).
                pch_dir = os.path.join(work, "pch", "torch")
                os.makedirs(pch_dir, exist_ok=True)
                flags = re.sub(r"-MMD -MF \S+", "", host_cmd)
                flags = re.sub(r"-c \S+", "", flags)
                flags = re.sub(r"-o \S+", "", flags)
                pch_cmd = f"{flags} -x c++-header {shlex.quote(os.path.join(torch_include, 'torch', 'extension.h'))} -o {shlex.quote(os.path.join(pch_dir, 'extension.h.gch'))}"
                secs, p = timed(pch_cmd, build_dir)
                print(f"{'precompile torch/extension.h (once per flags)':52} {secs:7.1f}{'' if p.returncode == 0 else '  (failed)'}")
                env = dict(os.environ, CPATH=os.path.join(work, "pch"))
                secs, p = timed(host_cmd + " -Winvalid-pch", build_dir, env=env)
                used = "invalid" not in (p.stderr or "")
                print(f"{'host TU with the precompiled header':52} {secs:7.1f}{'' if used else '  (PCH not used)'}")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:] or [
        os.path.join(ROOT, "kernels/level1/3_ReLU/cuda.py"),
        os.path.join(ROOT, "kernels/level1/3_ReLU/cpp.py"),
    ]
    main([os.path.abspath(a) for a in args])

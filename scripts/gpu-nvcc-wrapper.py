"""kg_nvcc against nvcc itself on one bundled kernel's CUDA source (issue 29): the command
ninja would run, through the wrapper and then through nvcc, each timed; what the wrapper said
(a fallback names its reason), its steps (`<object>.kg_nvcc.json`), and whether the two
objects define the same symbols once the module id is put aside.

A benchmark, not a test: run it on the GPU machine.
Usage:   python scripts/gpu-nvcc-wrapper.py [kernels/level1/3_ReLU/cuda.py]
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
trajectory = __import__("gpu-nvcc-trajectory")
WRAPPER = os.path.join(ROOT, "crates", "harness", "python", "kg_nvcc.py")


def without_module_id(symbol):
    """The symbol with each anonymous namespace's mangled name (`<length>_GLOBAL__N_...`, which
    holds the module id) replaced by `<anon>`."""
    out, at = [], 0
    for m in re.finditer(r"(\d+)_GLOBAL__N_", symbol):
        digits, start = m.group(1), m.start(1)
        # The length's digits follow a name's own (`3__439_GLOBAL...`): the shortest length
        # whose name ends before a next component (a length) or the end of a nesting (`E`).
        for k in range(len(digits)):
            n, name_at = int(digits[k:]), start + len(digits)
            end = name_at + n
            if end <= len(symbol) and (end == len(symbol) or symbol[end].isdigit() or symbol[end] == "E"):
                out.append(symbol[at:start + k] + "<anon>")
                at = end
                break
    return "".join(out) + symbol[at:]


def compile_with(cmd, build, obj):
    if os.path.exists(os.path.join(build, obj)):
        os.remove(os.path.join(build, obj))
    t = time.perf_counter()
    p = subprocess.run(["bash", "-c", cmd], cwd=build, capture_output=True, text=True)
    return time.perf_counter() - t, p


def main(path):
    import torch

    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    work = tempfile.mkdtemp(prefix="kg-wrap-")
    build = trajectory.write_build_dir(path, os.path.join(work, "ext"))
    cmds = subprocess.run(["ninja", "-C", build, "-t", "commands"], capture_output=True, text=True, check=True).stdout
    nvcc_cmd = next(c for c in cmds.splitlines() if "nvcc" in c.split()[0])
    obj = re.search(r"-o (\S+\.o)", nvcc_cmd).group(1)
    wrapped = f"{sys.executable} {WRAPPER} {nvcc_cmd}"
    listing = subprocess.run(["bash", "-c", nvcc_cmd + " -dryrun"], cwd=build, capture_output=True, text=True)
    lines = [x[3:] for x in (listing.stdout + listing.stderr).splitlines() if x.startswith("#$ ")]
    steps = [x for x in lines if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", x)]
    print("  nvcc -dryrun (with torch's flags):")
    for s in steps:
        print("   ", s[:220])
    for round_ in range(1, int(os.environ.get("ROUNDS", "1")) + 1):
        secs, p = compile_with(wrapped, build, obj)
        print(f"wrapper, round {round_}: {secs:.1f} s, exit {p.returncode}")
        for line in (p.stdout + p.stderr).splitlines()[-6:]:
            print("   |", line[:300])
        times = os.path.join(build, obj + ".kg_nvcc.json")
        if os.path.exists(times):
            with open(times) as f:
                t = json.load(f)
            print("   steps:", ", ".join(f"{s['chain']} {s['tool']} {s['start_s']:.1f}-{s['end_s']:.1f}" for s in sorted(t["steps"], key=lambda s: s["start_s"])))
            os.remove(times)
        else:
            print("   (no kg_nvcc.json: the wrapper did not finish side by side)")
        side = sorted(map(without_module_id, trajectory.symbols(obj, build)))
        secs, p = compile_with(nvcc_cmd, build, obj)
        print(f"nvcc itself, round {round_}: {secs:.1f} s, exit {p.returncode}")
        serial = sorted(map(without_module_id, trajectory.symbols(obj, build)))
        print(f"   same defined symbols: {side == serial}; only nvcc's: {sorted(set(serial) - set(side))[:4]}; only the wrapper's: {sorted(set(side) - set(serial))[:4]}")


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "kernels/level1/3_ReLU/cuda.py")))

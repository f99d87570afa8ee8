"""Where nvcc's time goes on a CUDA extension's device translation unit, and whether its steps
can run side by side (issue 29). The torch headers make this one command 45-60 s of a CUDA
kernel's build: the front end parses them for the device side (cicc) and again for the host
side (cudafe++), then the host compiler compiles the result.

1. torch's `load_inline` writes the build directory of one bundled kernel (ninja not run);
2. the nvcc command as ninja would run it: its `-dryrun` steps replayed one after another, each
   timed (the serial trajectory);
3. the same steps with the host front end (preprocess, cudafe++) beside the device chain
   (preprocess, cicc, ptxas, fatbinary), the module id made first, then the host compile; and
   whether its object has the serial one's symbols.
(`nvcc --threads` runs the steps of several architectures side by side, not these.)

A benchmark, not a test: run it on the GPU machine.
Usage:   python scripts/gpu-nvcc-trajectory.py [kernels/level1/3_ReLU/cuda.py]
"""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_build_dir(path, ext_dir):
    """Imports the kernel with ninja stubbed out: torch writes sources and build.ninja only."""
    import torch.utils.cpp_extension as ce

    os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
    real = ce._run_ninja_build
    ce._run_ninja_build = lambda *a, **k: None
    try:
        spec = importlib.util.spec_from_file_location("kg_traj", path)
        try:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        except Exception:
            pass  # the missing .so: expected
    finally:
        ce._run_ninja_build = real
    for d in os.listdir(ext_dir):
        if os.path.isfile(os.path.join(ext_dir, d, "build.ninja")):
            return os.path.join(ext_dir, d)
    raise SystemExit(f"no build.ninja under {ext_dir}")


def sh(cmd, cwd):
    t = time.perf_counter()
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t, p


def tool(step):
    first = shlex.split(step)[0] if step.strip() else ""
    return os.path.basename(first)


def symbols(obj, cwd):
    p = subprocess.run(["nm", "-g", "--defined-only", obj], cwd=cwd, capture_output=True, text=True)
    return sorted(line.split()[-1] for line in p.stdout.splitlines() if line.strip())


def main(path):
    import torch

    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    print(f"# torch {torch.__version__} cuda {torch.version.cuda} arch {os.environ.get('TORCH_CUDA_ARCH_LIST')} cores {os.cpu_count()}")
    work = tempfile.mkdtemp(prefix="kg-traj-")
    build = write_build_dir(path, os.path.join(work, "ext"))
    cmds = subprocess.run(["ninja", "-C", build, "-t", "commands"], capture_output=True, text=True, check=True).stdout
    nvcc = next(c for c in cmds.splitlines() if "nvcc" in c.split()[0])
    # torch asks nvcc for a dependency file: where in the steps it is made.
    full = subprocess.run(["bash", "-c", f"{nvcc} -dryrun"], cwd=build, capture_output=True, text=True)
    for line in (full.stdout + full.stderr).splitlines():
        if line.startswith("#$ ") and (".d " in line or ".d\"" in line or " -M" in line):
            print(f"  dependency step: {line[3:][:400]}")
    nvcc = re.sub(r"-MD -MF \S+", "", nvcc)
    print(f"# {os.path.relpath(path, ROOT)}: {nvcc[:160]}...")

    out = subprocess.run(["bash", "-c", f"{nvcc} -dryrun"], cwd=build, capture_output=True, text=True)
    lines = [line[3:] for line in (out.stdout + out.stderr).splitlines() if line.startswith("#$ ")]
    env = [line for line in lines if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line)]
    steps = [line for line in lines if line not in env and not line.startswith("rm ")]
    prelude = "\n".join(f"export {e}" for e in env)
    print("  dryrun steps:", " -> ".join(tool(s) for s in steps))
    for s in steps:
        if "module_id" in s:
            print(f"  {tool(s)} module id: {'writes' if '--gen_module_id_file' in s else 'reads'}")

    # 2. Serial replay, each step timed.
    serial = []
    total = 0.0
    for s in steps:
        secs, p = sh(f"{prelude}\n{s}", build)
        total += secs
        serial.append((tool(s), secs, p.returncode))
    for name, secs, rc in serial:
        print(f"  {'serial: ' + name:44} {secs:6.1f}{'' if rc == 0 else '  (failed)'}")
    print(f"{'serial replay, total':46} {total:6.1f}")
    obj = re.search(r"-o (\S+\.o)", nvcc).group(1)
    serial_syms = symbols(obj, build)

    # 4. Side by side. nvcc's chain: host preprocess -> cudafe++ (writes the module id) ->
    # device preprocess -> cicc (reads it) -> ptxas -> fatbinary -> host compile (includes the
    # fatbinary). The module id is all the device side needs of the host front end: made first
    # by cudafe++ on an empty translation unit, both sides then read it and run side by side.
    def is_device(s):
        t = tool(s)
        return t in ("cicc", "ptxas", "fatbinary", "nvlink") or ("-E" in s.split() and "-D__CUDA_ARCH__=" in s)

    writer = next((s for s in steps if "--gen_module_id_file" in s), None)
    host_front = [s for s in steps[:-1] if not is_device(s)]
    device = [s for s in steps[:-1] if is_device(s)]
    if writer is None:
        print("  (no step writes a module id: the steps are not the chain this script knows)")
        return
    empty = os.path.join(work, "empty.ii")
    open(empty, "w").write("\n")
    last_input = shlex.split(writer)[-1]
    id_only = writer.replace(shlex.quote(last_input), shlex.quote(empty)).replace(f'"{last_input}"', shlex.quote(empty))
    id_only = re.sub(r'--gen_c_file_name "?[^" ]+"?', f"--gen_c_file_name {work}/id.cpp", id_only)
    id_only = re.sub(r'--stub_file_name "?[^" ]+"?', f"--stub_file_name {work}/id.stub.c", id_only)
    reader = writer.replace("--gen_module_id_file", "")
    host_front = [reader if s is writer else s for s in host_front]
    script = [prelude, id_only]
    script.append("( " + " && ".join(host_front) + " ) & H=$!")
    script.append(" && ".join(device or ["true"]) + " ; D=$?")
    script.append("wait $H; HS=$?")
    script.append('[ $D = 0 ] && [ $HS = 0 ] || { echo "device $D host $HS" >&2; exit 1; }')
    script.append(steps[-1])
    if os.path.exists(os.path.join(build, obj)):
        os.remove(os.path.join(build, obj))
    id_path = re.search(r'--module_id_file_name "?([^" ]+)"?', writer).group(1)
    id_path = id_path if os.path.isabs(id_path) else os.path.join(build, id_path)
    serial_id = open(id_path).read().strip() if os.path.exists(id_path) else ""
    secs, p = sh("\n".join(script), build)
    side_id = open(id_path).read().strip() if os.path.exists(id_path) else ""
    side_syms = symbols(obj, build) if p.returncode == 0 else []
    same = p.returncode == 0 and side_syms == serial_syms
    print(f"{'side by side (module id first)':46} {secs:6.1f}{'' if p.returncode == 0 else '  (failed: ' + p.stderr.strip()[-160:] + ')'}{'  same symbols' if same else '  symbols differ'}")
    # What differs: the module id names static device entities and the registration; with the
    # ids put back to one placeholder, the rest must match.
    print(f"  module id: serial {serial_id!r}, side by side {side_id!r}")
    only_serial = sorted(set(serial_syms) - set(side_syms))[:8]
    only_side = sorted(set(side_syms) - set(serial_syms))[:8]
    print(f"  symbols only in serial: {only_serial}")
    print(f"  symbols only side by side: {only_side}")
    if serial_id and side_id:
        def norm(syms, i):
            return sorted(x.replace(i, "<id>") for x in syms)

        print(f"  same symbols but the module id: {norm(serial_syms, serial_id) == norm(side_syms, side_id)}")


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "kernels/level1/3_ReLU/cuda.py")))

"""How long the profiler's first start takes in a fresh process on the GPU (issue 29): torch.profiler
with CPU+CUDA, CUDA only, CPU only, twice, with EAGER module loading, and the autograd profiler
the op audit uses (kg_audit.gpu_profiler). A benchmark: python3 scripts/gpu-profiler-start.py"""
import os, sys, time, subprocess
mode = sys.argv[1] if len(sys.argv) > 1 else None
if mode is None:
    for m in ["default", "cuda_only", "cpu_only", "default_twice", "kineto_env", "lazy_eager", "autograd_kineto"]:
        env = dict(os.environ)
        if m == "kineto_env":
            env["KINETO_LOG_LEVEL"] = "5"; env["TORCH_CUPTI_RANGE_PROFILER"] = "0"
        if m == "lazy_eager":
            env["CUDA_MODULE_LOADING"] = "EAGER"
        out = subprocess.run([sys.executable, __file__, m], env=env, capture_output=True, text=True)
        print(m, out.stdout.strip().replace("\n", " | "), out.stderr.strip()[-300:] if out.returncode else "")
    sys.exit(0)
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
x = torch.randn(4096, 4096, device="cuda"); y = x @ x; torch.cuda.synchronize()
t2 = time.perf_counter()
from torch.profiler import ProfilerActivity, profile
t3 = time.perf_counter()
acts = {"cuda_only": [ProfilerActivity.CUDA], "cpu_only": [ProfilerActivity.CPU]}.get(mode, [ProfilerActivity.CPU, ProfilerActivity.CUDA])
def once():
    a = time.perf_counter()
    if mode == "autograd_kineto":
        p = torch.autograd.profiler.profile(use_cpu=True, use_device="cuda", use_kineto=True)
    else:
        p = profile(activities=acts)
    p.__enter__()
    b = time.perf_counter()
    y = x @ x; torch.cuda.synchronize()
    p.__exit__(None, None, None)
    c = time.perf_counter()
    events = p.function_events if mode == "autograd_kineto" else p.events()
    n = len([e for e in events if e.device_type.name == "CUDA"])
    n = f"{n} (attached to CPU ops: {sum(len(getattr(e, 'kernels', []) or []) for e in events)})"
    return b - a, c - b, n
r1 = once()
r2 = once() if mode == "default_twice" else None
print(f"import_torch={t1-t0:.2f} cuda_init+mm={t2-t1:.2f} import_profiler={t3-t2:.2f} enter={r1[0]:.2f} run+exit={r1[1]:.2f} cuda_events={r1[2]}" + (f" second: enter={r2[0]:.2f} exit={r2[1]:.2f}" if r2 else ""))

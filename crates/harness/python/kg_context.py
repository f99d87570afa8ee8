"""The judge's evaluation state, shared by the runner's units (kg_trials, kg_precision, kg_timed).

A `Context` holds what every unit of one job reads: the job, torch and its captured functions
(`capture`), the device, the precision's dtype and tolerance, the timer, the findings and the
phases, the reference model and the shared buffers the workers read. Its methods are the small
operations every unit needs (seeding, synchronising, a reference call, poisoning freed memory,
the outcome of a compile or runtime error). `Stop` ends the job early with an outcome.

A worker (`kg_worker.py`) makes a Context of its own for the same helpers. Loaded by the harness
as a private module, before any candidate code exists, and given to the runner as
`runner.kg_context`.
"""

import os
import time
import traceback

# Captured before any candidate code exists in the process.
_perf = time.perf_counter
_listdir = os.listdir
_format_exc = traceback.format_exc
_isinstance = isinstance
_type = type

TAIL = 4000


class Stop(Exception):
    """Ends the job early with `self.outcome`."""

    def __init__(self, outcome):
        super().__init__(outcome.get("kind"))
        self.outcome = outcome


def tail(text, n=TAIL):
    text = str(text)
    return text if len(text) <= n else "..." + text[-n:]


def native_threads():
    try:
        return len(_listdir("/proc/self/task"))
    except OSError:
        return None


class Context:
    """One job's shared evaluation state. The runner sets `torch`, `T`, `dev`, `dtype`, `tol`,
    `gen_inputs`, `ref_model`, `shared`, `shared_seeds` and `job_json` as the job reaches them."""

    def __init__(self, job, kg_timing, timer):
        self.job = job
        self.kg_timing = kg_timing
        self.timer = timer
        self.phases = []
        self.findings = []
        self._t = _perf()

    # ---- bookkeeping -------------------------------------------------------------------------
    def phase(self, name):
        now = _perf()
        self.phases.append([name, (now - self._t) * 1000.0])
        self._t = now

    def restart_phase(self):
        """The next phase starts now (after phases recorded by their own totals)."""
        self._t = _perf()

    def mark(self, phase):
        """Tells the CLI which limit applies now (compile or run); not trusted for results."""
        path = self.job.progress_path
        if not path:
            return
        try:
            with open(path, "w") as f:
                f.write(phase)
        except OSError:
            pass

    def finding(self, rule, severity, message):
        self.findings.append({"rule": rule, "severity": severity, "message": message})

    def has_finding(self, rule):
        return any(f["rule"] == rule for f in self.findings)

    # ---- helpers -----------------------------------------------------------------------------
    def free_gpu_bytes(self):
        """GPU memory this process can still take: the device's free memory and what torch's
        allocator holds unused."""
        torch = self.torch
        free, _total = torch.cuda.mem_get_info()
        return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()

    def capture(self, torch):
        class T:
            pass

        T.Tensor = torch.Tensor
        T.allclose = torch.allclose
        T.isclose = torch.isclose
        T.equal = torch.equal
        T.isfinite = torch.isfinite
        T.zeros_like = torch.zeros_like
        T.full = torch.full
        T.clone = torch.Tensor.clone
        T.data_ptr = torch.Tensor.data_ptr
        T.storage = torch.Tensor.untyped_storage
        T.no_grad = torch.no_grad
        T.cuda_sync = torch.cuda.synchronize
        return T

    def set_seed(self, s):
        self.torch.manual_seed(s)
        if self.dev.type == "cuda":
            self.torch.cuda.manual_seed(s)

    def sync(self):
        if self.dev.type == "cuda":
            self.T.cuda_sync()

    def as_list(self, out):
        if _isinstance(out, (tuple, list)):
            return list(out)
        return [out]

    def reference(self, model, inputs, s):
        with self.torch.no_grad():
            self.set_seed(s)
            out = model(*inputs)
        self.sync()
        refs = self.as_list(out)
        for r in refs:
            if not _isinstance(r, self.T.Tensor):
                raise Stop({"kind": "harness_error", "message": f"the reference Model returned {_type(r).__name__}, not tensors"})
        return refs

    def poison(self, shapes=None):
        """Fill freed allocator memory with NaN so an output that is never written cannot pass."""
        torch = self.torch
        nan = float("nan")
        if self.dev.type == "cuda":
            try:
                snap = torch.cuda.memory_snapshot()
            except Exception:
                return
            sizes = [b["size"] for seg in snap for b in seg.get("blocks", []) if b.get("state") == "inactive"]
            hold = []
            for size in sorted(sizes, reverse=True):
                n = size // 4
                if n <= 0:
                    continue
                try:
                    t = torch.empty(n, dtype=torch.float32, device=self.dev)
                    t.fill_(nan)
                    hold.append(t)
                except RuntimeError:
                    break
            self.sync()
            del hold
        elif shapes:
            # glibc hands the most recently freed chunk of a size back first: leave NaN there.
            hold = [self.T.full(sh, nan, dtype=dt) for sh, dt in shapes for _ in range(2)]
            del hold

    def compile_error(self, e):
        msg = str(e)
        if _isinstance(e, SystemExit):
            msg = f"the module called sys.exit({e.code}) while being imported"
        return {
            "kind": "compile_error",
            "message": f"importing {self.job.kernel} failed ({_type(e).__name__}): {tail(msg.splitlines()[0] if msg else '', 300)}",
            "log_tail": tail(msg + "\n" + _format_exc()),
        }

    def runtime_error(self, e, where, trial=None):
        msg = str(e)
        tb = tail(_format_exc())
        if "illegal memory access" in msg or "illegal address" in msg or "unspecified launch failure" in msg:
            return {"kind": "crash", "reason": f"CUDA error while {where}: {tail(msg, 500)}", "traceback": tb}
        out = {
            "kind": "runtime_error",
            "message": f"{_type(e).__name__} while {where}: {tail(msg, 1000)}",
            "traceback": tb,
        }
        if _isinstance(e, MemoryError) or "can't allocate memory" in msg or "out of memory" in msg:
            out["message"] = f"memory limit exceeded while {where}: {tail(msg, 500)}"
            out["memory_limit"] = True
        if trial is not None:
            out["trial"] = trial
        return out

    def deny_from_candidate(self, policy):
        """Denies the job's `denied_from_candidate` syscalls on every thread, for good, before the
        candidate's import (a seccomp filter stacked on the launcher's): torch's start-up needed
        them, the candidate does not (`sandbox::DENIED_FROM_CANDIDATE`)."""
        numbers = sorted(policy.denied_from_candidate.values())
        if not numbers or str(policy.level) == "off":  # `[sandbox] enabled = false`: debugging
            return
        try:
            import kernelgate_harness

            kernelgate_harness.deny_syscalls(numbers)
        except Exception as e:
            names = ", ".join(sorted(policy.denied_from_candidate))
            self.finding("sandbox-incomplete", "warning", f"the candidate may call {names}: {e}")

"""The judge's side of a worker: starts it, shares buffers with it, asks it for outputs and reads
them back. The judge (`runner.py`) never imports a model's code that is not the reference's:
the candidate, the base version and the timed reference each run in a worker of their own
(`kg_worker.py`). What the judge keeps (every input drawn, the reference's outputs, the
comparison, the clock, the result) lives only in its own memory.

Each call: the judge writes the call's inputs into the shared buffers of one input set, flushes
the GPU's L2 from its own context, reads its clock, sends the call, and reads its clock again
when the reply has arrived; the worker ran the model, timed it with its own events, copied the
outputs into the shared output buffers and synchronised. Right after a timed call's reply the
judge probes the GPU for work the worker left running and stops the worker until its next call
(`GapWatch`). The judge decides after the reply whether it reads and checks those outputs: the
worker cannot tell."""

import math
import os
import signal
import socket
import subprocess
import sys
import time

kg_wire = None  # set by the harness
_perf_ns = time.perf_counter_ns

# Findings a worker may report: what it observes in its own process (the sandbox's audit hook,
# what the import changed in PyTorch). Every other rule is the judge's to raise.
WORKER_RULES = ("sandbox-denied", "sandbox-incomplete", "torch-patched", "harness-hooked", "torch-settings-changed")
# Outcomes a worker may report for its own failure; anything else it sends is its runtime error.
_WORKER_KINDS = ("compile_error", "runtime_error", "crash")
_TEXT_FIELDS = ("message", "reason", "log_tail", "traceback", "where")

# Worker clock against the judge's (`clock_findings`): the candidate's gap between the judge's
# time and its own reported time may exceed the reference worker's (the same path, trusted code)
# by this much, in ms, plus this share of the candidate's own time. On an H100 (round 11) the
# candidate's and the base's workers, running the reference's own kernel, had round trips up to
# 0.27 ms longer than the reference worker's for a whole eval (p = 2e-5 in the rank test below);
# at 0.03 ms that failed 6 of 37 A/A evals and two honest CUDA kernels of a pull request. Work
# hidden below this is not told apart (docs/security.md).
CLOCK_SLACK_MS = {"cuda": 0.35, "cpu": 1.0}
CLOCK_SLACK_SHARE = {"cuda": 0.25, "cpu": 1.0}
# Which gap of a series is compared. On the GPU the judge's round trip is steady: the median. On
# the CPU the judge and its workers share a few cores with everything else on the machine, and a
# wake-up can wait a time slice or more (seen on a loaded two-core machine: honest gaps of 2.5 ms
# at the 10th percentile and 6 to 9 ms at the median, the same for the reference and the
# candidate). Scheduling only ever adds time, so the low quantile is the path's own cost; work a
# worker hides in every call, or in more than three calls in four, stays in it. Hiding it in
# fewer calls than that leaves most of the calls' own times honest, and the median the verdict
# uses with them.
CLOCK_GAP_QUANTILE = {"cuda": 0.5, "cpu": 0.25}
# The slack also grows with the reference's own scatter (its gaps' interquartile range, the
# trusted worker's: a candidate cannot widen it). In a `pr` CPU lane on a loaded two-core machine
# an honest candidate's 25th-percentile gap was seen 3.8 ms above the reference's, with a scatter
# of 4 to 5 ms; on an H100 running the 13-kernel pull request (nvcc builds and CPU lanes on every
# core) honest CUDA kernels' median gaps were 0.15 to 0.21 ms above the reference's, against a
# fixed slack of 0.04 ms. A quiet machine keeps the check tight; a loaded one tells apart only
# hidden work larger than its noise. (On the GPU a disagreement also puts the judge's times in
# place of the worker's, `judge_the_times`: with the fixed slack alone, that turned the loaded
# honest ReLU's 0.049 ms into 0.26 ms.)
CLOCK_SLACK_SPREAD = {"cuda": 1.0, "cpu": 1.0}
# And the series' gaps must sit above the reference's as a whole, not by the luck of a median:
# a one-sided rank test (Mann-Whitney) of the two series of gaps, at this level. Work hidden in
# every call shifts every gap (10 calls against 10, all apart, give p = 8e-5; 20 against 20,
# 2e-8). Honest workers' round trips differ by more than chance, though: in A/A evals on an H100
# one worker's gaps sat 0.1 to 0.17 ms above the reference worker's for a whole eval (p = 6e-4
# and 2.5e-4; results/gpu-proof/h100-round10-call3-aa-off), which at 1e-3 failed one honest eval
# and, through `judge_the_times`, put "faster" on another. At 1e-4 all six recorded off-verdict
# evals replay to their true verdicts; the ReLU profile-hook cheat (0.3 ms hidden per call) then
# went without this finding once, failed on `timing/input-reuse-speedup` with its times raised
# to the judge's (0.10x). The scale of honest inter-worker offsets wants a second trusted worker.
CLOCK_SHIFT_P = 1e-4
# Past this excess over the noise (`CLOCK_SLACK_MS`, which holds the largest honest inter-worker
# offset seen) a series' times are raised (`judge_the_times`) without the rank test, so work
# hidden in only some calls (a median gap, but no shift of the whole series) still buys nothing.
CLOCK_RAISE_ALWAYS_MS = {"cuda": 0.2, "cpu": 2.0}
# The judge's probes after a worker's timed call (`GapWatch`). A jump of the probe kernel's
# clock longer than WATCH_GAP_US is another context's turn on the GPU. Between probes the GPU is
# left idle WATCH_WINDOW_US, so a context with work queued takes its turn; a probe that starts
# within WATCH_CLEAN_US proves none did (on an H100 an idle GPU's start takes 8-10 us, at most 48
# in 200, and a switch from another context 150-190 us: round 12). Past WATCH_CAP_MS of the
# worker's work after its reply the call fails.
WATCH_GAP_US = 4.0
WATCH_WINDOW_US = 100.0
WATCH_CLEAN_US = 80.0
WATCH_CAP_MS = 2000.0
# The first probe's wait (a context switch, plus work left running) is charged beyond the
# reference worker's median by more than this many times its p90 - median, plus this many us.
WATCH_FIRST_SPREAD = 3.0
WATCH_FIRST_SLACK_US = 10.0
# A series whose median charge exceeds this share of its median time, and WATCH_FINDING_MS, did
# work on the GPU after its replies: a finding (`work-after-reply`), besides the charge.
WATCH_FINDING_SHARE = 0.02
WATCH_FINDING_MS = 0.002

# A disagreement is an error on either device, and the judge's figures then replace the
# worker's (`judge_the_times`): a failed row still shows what the judge waited, never the
# speedup the worker claimed (on the CPU they carry the machine's scheduling too).
CLOCK_SEVERITY = {"cuda": "error", "cpu": "error"}


class WorkerFailed(Exception):
    """The worker reported a failure of the model's code or died: `outcome` is the verdict."""

    def __init__(self, outcome):
        super().__init__(outcome.get("message") or outcome.get("reason"))
        self.outcome = outcome


def _sanitised(outcome, fallback_where):
    """A worker's failure report, kept to the kinds and fields a failure may have: a worker
    cannot report `passed`, or anything the judge has not observed."""
    if not isinstance(outcome, dict):
        outcome = {}
    kind = outcome.get("kind") if outcome.get("kind") in _WORKER_KINDS else "runtime_error"
    out = {"kind": kind}
    for field in _TEXT_FIELDS:
        value = outcome.get(field)
        if isinstance(value, str):
            out[field] = value[:4000]
    if kind == "runtime_error":
        out.setdefault("message", f"the model failed while {fallback_where}")
        if outcome.get("memory_limit") is True:
            out["memory_limit"] = True
    if kind == "crash":
        out.setdefault("reason", f"the model crashed while {fallback_where}")
    if kind == "compile_error":
        out.setdefault("message", "the kernel failed to import")
        out.setdefault("log_tail", "")
    return out


def _foreign(type_name):
    """Stands in the judge for an output the worker says is not a tensor (named as it said)."""
    name = type_name if isinstance(type_name, str) and type_name.isidentifier() else "object"
    return type(name, (), {})()


class Worker:
    """One worker process and its requests. `role`: "candidate", "base" or "reference"."""

    def __init__(self, job_json, role, device, findings, started=None, nested=True):
        """A worker for `role`: one `prestart` started (`started`, a (process, socket) pair),
        or a new one, confined below the judge (its own Landlock domain nested in the judge's,
        where the judge itself was not confined by its own ruleset: the sandbox off, a kernel
        without Landlock)."""
        self.role = role
        self.device = device
        self.findings = findings  # the judge's finding(rule, severity, message)
        self.judge_ms = None
        self.paused = False
        self.proc, self.sock = started if started is not None else _spawn(None, nested)
        kg_wire.send(self.sock, {"role": role, "job": job_json, "device": str(device)})
        self.request(None, "starting")
        self.loaded = self.request(None, "importing and constructing the model")
        self.extensions = self.loaded.get("extensions") if isinstance(self.loaded.get("extensions"), list) else []
        # The precompiled-header entry on the worker's CPATH when it imported the model's code.
        pch = self.loaded.get("precompiled_header")
        self.precompiled_header = pch if isinstance(pch, str) else None

    # ---- the wire ------------------------------------------------------------------------------
    def died(self, where):
        outcome = self._death(where)
        outcome["phase"] = "compile" if where.startswith(("importing", "starting")) else "run"
        return outcome

    def _death(self, where):
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill(self.proc)
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                return {"kind": "crash", "reason": f"the {self.role}'s process stopped answering while {where}"}
        if code < 0:
            import signal

            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return {"kind": "crash", "signal": -code, "reason": f"the {self.role}'s process was killed by {name} while {where}"}
        return {
            "kind": "crash",
            "reason": f"the {self.role}'s process exited with status {code} while {where}: the model's code "
            "ended the process (os._exit, sys.exit from a thread, abort)",
        }

    def pause(self):
        """Stops the worker's process (every thread of it) between its timed calls: it can queue
        no GPU work while others are timed or the judge watches. Returns once it has stopped
        (or ended); False where the judge may not signal it."""
        try:
            os.kill(self.proc.pid, signal.SIGSTOP)
        except OSError:
            return False
        self.paused = True
        try:
            # WNOWAIT: an exit stays for `proc.wait` to collect.
            os.waitid(os.P_PID, self.proc.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        return True

    def resume(self):
        if self.paused:
            self.paused = False
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass

    def request(self, message, where, fds=()):
        """Sends `message` (None: only read the load's reply) and returns the reply; a failure
        the worker reports or its death raises `WorkerFailed`."""
        self.resume()
        try:
            if message is not None:
                kg_wire.send(self.sock, message, fds)
            reply = kg_wire.recv(self.sock)
        except (kg_wire.WireError, OSError):
            raise WorkerFailed(self.died(where)) from None
        findings = reply.get("findings")
        for f in findings[:100] if isinstance(findings, list) else []:
            if isinstance(f, dict) and f.get("rule") in WORKER_RULES and f.get("severity") in ("error", "warning"):
                self.findings(f["rule"], f["severity"], str(f.get("message", ""))[:2000])
        if reply.get("ok") is not True:
            raise WorkerFailed(_sanitised(reply.get("outcome"), where))
        return reply

    def ask_to_stop(self):
        """Asks the worker to end and closes the pair: a worker ends when its pair closes
        (woken first, if it was stopped); whatever is left ends with the job's process group."""
        self.resume()
        try:
            kg_wire.send(self.sock, {"op": "stop"})
        except OSError:
            pass
        self.sock.close()

    def wait_stopped(self):
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _kill(self.proc)


def stop_all(workers):
    """Ends every worker of the job: all are asked first, so they end side by side (each takes
    a few hundred milliseconds to exit), then each is waited for."""
    for worker in workers:
        worker.ask_to_stop()
    for worker in workers:
        worker.wait_stopped()


def worker_environment(env, ruleset_fd, nested=True):
    """`env` (a mapping, changed in place and returned) made a worker's: without the judge's
    Landlock descriptors, saying whether the worker nests a domain of its own
    (`kg_worker.confine`) and which ruleset it enforces first (`kernelgate_harness.worker`).
    New workers and forked ones alike."""
    env.pop("KERNELGATE_LANDLOCK_FDS", None)
    env["KERNELGATE_WORKER_NESTED"] = "1" if nested else "0"
    # Spinning OpenMP threads take the CPUs the judge wakes up on (`kernelgate_harness.main`).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if ruleset_fd is not None:
        env["KERNELGATE_WORKER_RULESET"] = str(ruleset_fd)
    return env


def _spawn(ruleset_fd, nested=True):
    """A worker process and the judge's end of its socket pair. With `ruleset_fd`, the worker
    enforces that Landlock ruleset first thing (`kernelgate_harness.worker`); without, it makes
    a Landlock domain of its own nested in the judge's, unless `nested` is false (the sandbox
    switched off, for debugging: nothing confines the job, the worker included)."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = child.fileno()
    keep = [fd] if ruleset_fd is None else [fd, ruleset_fd]
    env = worker_environment(dict(os.environ), ruleset_fd, nested)
    cmd = [sys.executable, "-c", f"import kernelgate_harness as h; h.worker({fd})"]
    proc = subprocess.Popen(cmd, pass_fds=keep, stdin=subprocess.DEVNULL, close_fds=True, env=env)
    child.close()
    return proc, parent


def _kill(proc):
    try:
        proc.kill()
    except OSError:
        pass  # already gone, or refused: the job's end kills it


def prestart(ruleset_fds):
    """The job's workers, started before the judge confines itself (one per ruleset the CLI
    gave for them), waiting for their role: a list of (process, socket) pairs, which the runner
    hands out in the order it needs workers. New processes: where the harness could fork them
    (`kernelgate_harness.main`, before the job exists here), `adopt` takes them instead."""
    return [_spawn(fd) for fd in ruleset_fds]


class Forked:
    """A worker the harness forked from this process (this process's child), with the part of
    `subprocess.Popen` the judge uses: `pid`, `poll`, `wait`, `kill`."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Reaped elsewhere (as `subprocess.Popen` takes it): gone.
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.returncode

    def kill(self):
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def adopt(forked):
    """The workers `kernelgate_harness.main` forked, as `prestart`'s pairs: (pid, the judge's
    end of the socket pair) each."""
    return [(Forked(pid), socket.socket(fileno=fd)) for pid, fd in forked]


class GapWatch:
    """What the judge sees of the GPU right after a worker's timed call replied
    (`kernelgate_harness.GpuWatch`, a kernel of the judge's own that reads the GPU's clock).

    Contexts of different processes take turns on the GPU; a switch between them costs about
    0.15-0.19 ms on an H100, and a context with work keeps the GPU for a time slice (about 2 ms)
    while another waits (round 12, `scripts/gpu-watch.py`). Right after the reply the judge
    launches a probe: it starts once the GPU is the judge's, after whatever the worker left
    running (`first_wait_ms`: a context switch, plus that work). The judge then stops the worker
    (`Worker.pause`: no thread of it can queue more), leaves the GPU idle for WATCH_WINDOW_US, so
    whatever the worker had queued gets its turn, and probes again: a probe that starts as fast as
    on an idle GPU proves nobody else ran in between; one that waited is charged and the judge
    looks again. Each call's sample gets `after_reply_ms` (the later probes' waits) and
    `first_wait_ms`; `charge_work_after_reply` then charges the first wait beyond the reference
    worker's (the same path, trusted code) to the call's `ms` and `judge_ms`."""

    def __init__(self, gpu_watch, window_us=None, clean_us=None, cap_ms=None):
        self.gpu = gpu_watch
        self.window_s = (WATCH_WINDOW_US if window_us is None else window_us) / 1e6
        self.clean_ms = (WATCH_CLEAN_US if clean_us is None else clean_us) / 1e3
        self.cap_s = (WATCH_CAP_MS if cap_ms is None else cap_ms) / 1e3
        self.pending = None  # the last call's observation, until `measure` makes its sample
        starts = sorted(self._probe()[0] for _ in range(41))
        self.idle_start_ms = starts[len(starts) // 2]

    @classmethod
    def for_device(cls, device):
        """A watch for a CUDA device; elsewhere only the pause (`PauseBetweenCalls`: on the CPU a
        worker's left-over work races the judge's copy of its outputs, `kg_trials.check_trials`)."""
        if getattr(device, "type", None) != "cuda":
            return PauseBetweenCalls()
        import kernelgate_harness

        index = getattr(device, "index", None)
        return cls(kernelgate_harness.GpuWatch(f"cuda:{index or 0}", gap_us=WATCH_GAP_US))

    def _probe(self):
        """One probe: (its start delay, GPU time others took while it ran), both in ms."""
        self.gpu.start(quiet_us=0.0)
        self.gpu.worker_stopped()
        stolen, _jumps, start_ms, _watched, _pace, _state = self.gpu.stop()
        return start_ms, stolen

    def after_reply(self, worker):
        """Right after `worker`'s timed call replied: probes until the GPU is provably idle of
        its work, the worker stopped from the first probe on."""
        first, stolen = self._probe()
        _pause(worker)
        charge = stolen
        probes = 1
        deadline = _perf_ns() + int(self.cap_s * 1e9)
        while True:
            until = _perf_ns() + int(self.window_s * 1e9)
            while _perf_ns() < until:
                pass  # the GPU idle: a context with work queued takes its turn now
            start_ms, stolen = self._probe()
            probes += 1
            if start_ms < self.clean_ms and stolen == 0.0:
                break
            charge += max(0.0, start_ms - self.idle_start_ms) + stolen
            if _perf_ns() > deadline:
                raise WorkerFailed(
                    {
                        "kind": "runtime_error",
                        "message": f"the {worker.role}'s GPU work went on for more than {self.cap_s:.0f} s after "
                        "its call replied: a kernel must finish its work before it returns",
                        "phase": "timing",
                    }
                )
        self.pending = {"after_reply_ms": charge, "first_wait_ms": first, "watch_probes": probes}

    def take_sample(self, sample):
        """The watched call's sample: its observation goes there."""
        if self.pending is not None:
            sample.update(self.pending)
            self.pending = None


class PauseBetweenCalls:
    """`GapWatch`'s part on a CPU: the worker stopped after each timed call's reply, so none of
    its threads runs while another model is timed or the judge checks its outputs."""

    def after_reply(self, worker):
        _pause(worker)

    def take_sample(self, sample):
        pass


def _pause(worker):
    if not worker.pause():
        raise WorkerFailed(
            {
                "kind": "harness_error",
                "message": f"the judge could not stop the {worker.role}'s worker between its timed calls "
                "(a signal refused), so work it leaves running would not be charged to it",
            }
        )


def charge_work_after_reply(samples, reference="reference"):
    """Charges each timed call's GPU work after its reply to its `ms` and `judge_ms`: the later
    probes' waits (`after_reply_ms`, as observed) plus the first probe's wait beyond the reference
    worker's median by more than its own scatter (WATCH_FIRST_SPREAD times p90 - median, plus
    WATCH_FIRST_SLACK_US). `after_reply_ms` becomes the whole charge. Samples the watch did not
    observe are left alone."""
    firsts = sorted(s["first_wait_ms"] for s in samples.get(reference) or [] if _number(s.get("first_wait_ms")) is not None)
    if firsts:
        med = firsts[len(firsts) // 2]
        allowed = med + WATCH_FIRST_SPREAD * (firsts[int(0.9 * (len(firsts) - 1))] - med) + WATCH_FIRST_SLACK_US / 1e3
    else:
        allowed = None
    for series in samples.values():
        for s in series if isinstance(series, list) else []:
            if not isinstance(s, dict) or _number(s.get("after_reply_ms")) is None:
                continue
            charge = s["after_reply_ms"]
            first = _number(s.get("first_wait_ms"))
            if allowed is not None and first is not None and first > allowed:
                charge += first - allowed
            s["after_reply_ms"] = charge
            if charge > 0:
                for key in ("ms", "judge_ms"):
                    if _number(s.get(key)) is not None:
                        s[key] += charge


def work_after_reply(samples, judged=("candidate", "base", "candidate_repeated")):
    """`(rule, severity, message)` for each judged series whose calls left GPU work running
    after their replies (`GapWatch`, `charge_work_after_reply`): the median charge over
    WATCH_FINDING_SHARE of the median time and WATCH_FINDING_MS. The times already carry the
    charge; this says why."""
    out = []
    for name in judged:
        series = samples.get(name) or []
        charges = [s["after_reply_ms"] for s in series if _number(s.get("after_reply_ms")) is not None]
        times = [s["ms"] for s in series if _number(s.get("ms")) is not None]
        if not charges or not times:
            continue
        c, t = _median(charges), _median(times)
        if c > WATCH_FINDING_MS and c > WATCH_FINDING_SHARE * t:
            out.append(
                (
                    "work-after-reply",
                    "error",
                    f"the {name}'s GPU work went on after its calls returned: a median {c:.4f} ms per call "
                    f"ran after the reply (of {t:.4f} ms timed with it); the timings include it. A kernel must "
                    "finish its work (or have it ordered on the stream it was called on) before the call returns",
                )
            )
    return out


class SharedSets:
    """The input sets and output buffers every worker of a job maps: the only memory the judge
    shares. Each set is refilled by the judge right before the call that uses it."""

    def __init__(self, torch, device, sets, outputs_like):
        self.torch = torch
        self.alloc = kg_wire.SharedAllocator(torch, device)
        self.fds = []
        self.sets = []
        self.specs = []
        for args in sets:
            shared, specs = [], []
            for a in args:
                if isinstance(a, torch.Tensor):
                    t, fd = self.alloc.like(a)
                    specs.append(kg_wire.tensor_spec(torch, t, self._fd(fd)))
                    shared.append(t)
                else:
                    specs.append({"value": a})
                    shared.append(a)
            self.sets.append(shared)
            self.specs.append(specs)
        self.outputs = []
        self.output_specs = []
        for r in outputs_like:
            t, fd = self.alloc.empty(tuple(r.shape), r.dtype)
            self.outputs.append(t)
            self.output_specs.append(kg_wire.tensor_spec(torch, t, self._fd(fd)))
        if device.type == "cuda":
            torch.cuda.synchronize()

    def _fd(self, fd):
        if fd is None:
            return None
        self.fds.append(fd)
        return len(self.fds) - 1

    def bind(self, worker):
        worker.request({"op": "bind", "sets": self.specs, "outputs": self.output_specs}, "mapping the inputs", self.fds)


class RemoteModel:
    """The judge's handle on a model in a worker, called like the model: `run` for a checked
    call on the judge's inputs, `timed_call` inside `kg_timing.measure`."""

    def __init__(self, worker, shared, seeds, flush):
        self.worker = worker
        self.shared = shared
        self.seeds = seeds
        self.flush = flush  # the judge's L2 flush (GPU), before every call alike
        self.calls = 0
        self.watch = None  # a `GapWatch` while the judge times this model on a GPU
        shared.bind(worker)

    def _call(self, i, seed, where):
        self.flush()
        self.worker.resume()  # stopped since its last timed call: woken before the clock starts
        t0 = _perf_ns()
        reply = self.worker.request({"op": "call", "set": i, "seed": int(seed), "where": where}, where)
        judge_ms = (_perf_ns() - t0) / 1e6
        return reply, judge_ms

    def read_outputs(self, reply):
        """The judge's own copies of the outputs the reply describes, taken now."""
        torch = self.shared.torch
        outs = []
        meta = reply.get("outputs")
        if not isinstance(meta, list):
            meta = []
        for k, m in enumerate(meta[:64]):
            if not isinstance(m, dict) or m.get("type") != "Tensor":
                outs.append(_foreign(m.get("type") if isinstance(m, dict) else None))
                continue
            if m.get("copied") is True and k < len(self.shared.outputs):
                outs.append(self.shared.outputs[k].clone())
                continue
            # Not the reference's shape or dtype: a stand-in of what it said, for the checks to name.
            dtype = getattr(torch, m.get("dtype"), None) if m.get("dtype") in kg_wire.DTYPES else None
            shape = m.get("shape")
            if dtype is None or not isinstance(shape, list) or not all(isinstance(s, int) and 0 <= s < 2**40 for s in shape):
                outs.append(_foreign("tensor_of_unknown_dtype"))
                continue
            like = self.shared.outputs[k] if k < len(self.shared.outputs) else None
            device = like.device if like is not None else "cpu"
            outs.append(
                torch.empty(0, dtype=dtype, device=device).new_full(shape[:8], float("nan"))
                if dtype.is_floating_point
                else torch.zeros(shape[:8], dtype=dtype, device=device)
            )
        return outs

    def run(self, args, seed, where):
        """One checked call on `args` (the judge's tensors): written into the next input set,
        called, and the set read back into `args` (a kernel that writes its inputs shows in the
        judge's own comparison). Returns the judge's copies of the outputs."""
        sets = self.shared.sets
        i = self.calls % len(sets)
        self.calls += 1
        shared = sets[i]
        torch = self.shared.torch
        for a, b in zip(args, shared):
            if isinstance(a, torch.Tensor):
                if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                    raise WorkerFailed(
                        {
                            "kind": "harness_error",
                            "message": "the problem's inputs change shape between draws: "
                            "kernelgate's judge shares buffers of one shape per input",
                        }
                    )
                b.copy_(a)
        if shared and isinstance(shared[0], torch.Tensor) and shared[0].is_cuda:
            torch.cuda.synchronize()
        reply, self.worker.judge_ms = self._call(i, seed, where)
        outs = self.read_outputs(reply)
        # The worker's own observation (the judge sees only copies): an output that is one of
        # the inputs it was given. Writing the input shows in the judge's comparison anyway.
        for k, m in enumerate(reply.get("outputs") if isinstance(reply.get("outputs"), list) else []):
            j = m.get("aliases_input") if isinstance(m, dict) else None
            if isinstance(j, int) and not isinstance(j, bool) and 0 <= j < len(args):
                raise WorkerFailed(
                    {
                        "kind": "output_aliased",
                        "output": k,
                        "message": f"output {k} shares memory with input {j}: compute into a new tensor "
                        "instead of writing the input in place",
                    }
                )
        for a, b in zip(args, shared):
            if isinstance(a, torch.Tensor):
                a.copy_(b)
        return outs

    def timed_call(self, i, timer):
        """`kg_timing.measure`'s timed call: (ms, trailing, wall, judge_ms, reply). The inputs
        were filled by the judge (`FreshInputs.fill`) before this."""
        torch = self.shared.torch
        if self.shared.sets and any(isinstance(b, torch.Tensor) and b.is_cuda for b in self.shared.sets[i]):
            torch.cuda.synchronize()
        reply, judge_ms = self._call(i, self.seeds[i % len(self.seeds)], "being timed")
        # A worker can reply before its GPU work ends (work launched after its synchronise, from
        # another thread or stream): the judge looks at the GPU before anything else, and stops
        # the worker until its next call (`GapWatch`, `PauseBetweenCalls`).
        if self.watch is not None:
            self.watch.after_reply(self.worker)
        ms = _finite(reply.get("ms"))
        trailing = _finite(reply.get("trailing_sync_ms"))
        wall = _finite(reply.get("wall_ms"))
        return ms, trailing, wall, judge_ms, reply

    def take_sample(self, sample):
        """`kg_timing.measure`'s sample of the timed call that just returned (what the watch saw)."""
        if self.watch is not None:
            self.watch.take_sample(sample)

    def audit(self, seed):
        """The op audit, run in the worker: an observation, never a verdict."""
        return self.worker.request({"op": "audit", "set": 0, "seed": int(seed)}, "the op audit")


def _finite(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return x if x == x and abs(x) != float("inf") else float("nan")


def _number(x):
    """A finite int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return x


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _quantile(xs, q):
    """The q-quantile of xs (nearest rank below; the median for q = 0.5), None when empty."""
    if q == 0.5:
        return _median(xs)
    xs = sorted(xs)
    return xs[int(q * (len(xs) - 1))] if xs else None


def _shift_p(higher, lower):
    """One-sided p-value that `higher` is not stochastically larger than `lower` (Mann-Whitney
    U, normal approximation with the tie correction; no continuity correction)."""
    n, m = len(higher), len(lower)
    if n == 0 or m == 0:
        return 1.0
    pooled = sorted([(x, 0) for x in higher] + [(y, 1) for y in lower])
    ranks_higher = 0.0
    ties = 0.0
    k = 0
    while k < len(pooled):
        j = k
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[k][0]:
            j += 1
        rank = (k + j) / 2.0 + 1.0
        t = j - k + 1
        ties += t**3 - t
        ranks_higher += rank * sum(1 for q in range(k, j + 1) if pooled[q][1] == 0)
        k = j + 1
    u = ranks_higher - n * (n + 1) / 2.0
    total = n + m
    var = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    if var <= 0:
        return 1.0 if u <= n * m / 2.0 else 0.0
    z = (u - n * m / 2.0) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _quantile_name(q):
    return "median" if q == 0.5 else f"{round(q * 100)}th percentile"


def _gaps(samples, name):
    return [s["judge_ms"] - s["ms"] for s in samples.get(name, []) if s.get("judge_ms") is not None and s["ms"] == s["ms"]]


def _reference_gap(samples, kind, reference="reference"):
    """The reference worker's gap to the judge's clock on the same path (its `CLOCK_GAP_QUANTILE`)
    and that gap's interquartile range: (gap, spread), (None, 0.0) without one."""
    gaps = _gaps(samples, reference)
    if not gaps:
        return None, 0.0
    return _quantile(gaps, CLOCK_GAP_QUANTILE[kind]), _quantile(gaps, 0.75) - _quantile(gaps, 0.25)


def _noise(kind, spread):
    """How far a series' gap may exceed the reference path's for the machine's noise alone: the
    fixed slack and the reference's own scatter (the finding adds a share of the series' time)."""
    return CLOCK_SLACK_MS[kind] + CLOCK_SLACK_SPREAD[kind] * spread


def _raise(sample, ms):
    """The judge's figure in place of the worker's, which stays beside it as `worker_ms`."""
    if sample["ms"] == sample["ms"]:
        sample.setdefault("worker_ms", sample["ms"])
    sample["ms"] = ms


def judge_the_times(samples, device_type="cuda", disagreed=False, judged=("candidate", "base", "candidate_repeated")):
    """The judge's clock bounds every worker's times, finding or not. A series whose gaps to the
    judge's clock sit above the reference path's as a whole (the rank test of `clock_findings`)
    and whose gap exceeds the reference path's by more than the machine's noise (the fixed
    slack and the reference's scatter, never a share of the worker's own time: a timer that
    reports a fraction of each call gains nothing) has its times raised by that excess, so what
    the speedup rests on is what the judge waited. An honest series, inside the noise, keeps its
    figures exactly. Where the clocks disagreed (`clock_findings` raised an error), on either
    device, each call's time becomes at least what the judge waited minus the reference's gap,
    with no allowance."""
    kind = "cpu" if device_type == "cpu" else "cuda"
    ref_gap, spread = _reference_gap(samples, kind)
    if ref_gap is None:
        return
    if disagreed:
        for name in judged:
            for s in samples.get(name, []):
                if s.get("judge_ms") is not None:
                    floor = s["judge_ms"] - ref_gap
                    if not (s["ms"] == s["ms"]) or s["ms"] < floor:
                        _raise(s, max(floor, 0.0))
        return
    allowance = _noise(kind, spread)
    ref_gaps = _gaps(samples, "reference")
    for name in judged:
        series = [s for s in samples.get(name, []) if s.get("judge_ms") is not None and s["ms"] == s["ms"]]
        if not series:
            continue
        excess = _quantile([s["judge_ms"] - s["ms"] for s in series], CLOCK_GAP_QUANTILE[kind]) - ref_gap - allowance
        # A shift of the whole series (`CLOCK_SHIFT_P`) or an excess no honest worker showed
        # (`CLOCK_RAISE_ALWAYS_MS`), not where a dozen round trips' median fell: raising honest
        # times by that put 4 false verdicts in 12 A/A evals of a 0.064 ms matmul on an H100
        # (the worker's 0.064 ms became 0.073 to 0.18 ms).
        if excess > CLOCK_RAISE_ALWAYS_MS[kind] or (excess > 0 and _shift_p(_gaps(samples, name), ref_gaps) < CLOCK_SHIFT_P):
            for s in series:
                _raise(s, min(s["ms"] + excess, s["judge_ms"]))


def clock_findings(samples, device_type="cuda", reference="reference", judged=("candidate", "base", "candidate_repeated")):
    """The workers' own times against the judge's clock: [(rule, severity, message)]. A worker
    cannot report a call faster than the judge waited for it, and its gap to the judge's clock
    (the round trip, the output copy) is the reference worker's, on the same path, give or
    take `CLOCK_SLACK_*`. A gap wider than that is time the worker spent outside its own
    timed window (a hook after the timer, a patched timer) or a clock it rewrote."""
    kind = "cpu" if device_type == "cpu" else "cuda"
    q = CLOCK_GAP_QUANTILE[kind]
    ref_gap, spread = _reference_gap(samples, kind, reference)
    ref_gaps = _gaps(samples, reference)
    out = []
    for name in judged:
        if out:
            break  # one finding says it; the other series only repeat it
        series = [s for s in samples.get(name, []) if s.get("judge_ms") is not None]
        if not series or ref_gap is None:
            continue
        bad = [s for s in series if not (s["ms"] == s["ms"]) or s["ms"] < 0 or s["ms"] > s["judge_ms"] + 0.01]
        if len(bad) * 10 > len(series):
            out.append(
                (
                    "clock-disagrees",
                    CLOCK_SEVERITY[kind],
                    f"the {name}'s process reported times the judge's clock cannot have seen ({len(bad)} of "
                    f"{len(series)} calls shorter than zero, missing or longer than the judge waited): its timer "
                    "was tampered with",
                )
            )
            continue
        gap = _quantile([s["judge_ms"] - s["ms"] for s in series], q)
        own = _median([s["ms"] for s in series])
        allowed = ref_gap + _noise(kind, spread) + CLOCK_SLACK_SHARE[kind] * own
        if gap > allowed and _shift_p(_gaps(samples, name), ref_gaps) < CLOCK_SHIFT_P:
            out.append(
                (
                    "clock-disagrees",
                    CLOCK_SEVERITY[kind],
                    f"the judge waited {gap + own:.4f} ms per {name} call ({_quantile_name(q)}) but the {name}'s process "
                    f"reported {own:.4f} ms: {gap - ref_gap:.4f} ms more than the reference's process on the "
                    f"same path (allowed {allowed - ref_gap:.4f} ms). Work ran outside the timed window "
                    "(a hook after the timer returns, deferred work) or the timer was rewritten",
                )
            )
    return out


__all__ = ["Worker", "SharedSets", "RemoteModel", "WorkerFailed", "clock_findings", "judge_the_times", "prestart", "stop_all"]

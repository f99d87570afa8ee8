"""The judge's timing phase, beside `kg_timing` (the timer, the fresh draws' pool and the
measurement loop, which this drives).

`Timed(ctx, trials, precision, start_worker)` measures, before any candidate code exists, what
the plausibility floor needs (`count_work`, `measure_bandwidth`), gives the timed calls' buffers
their fresh draws (`fresh_draws`) and times the reference alone in a worker of its own
(`time_reference_alone`, `time_alone`). Then `run_timing` times the reference, the candidate and
the base side by side on the judge's clock, verifies the calls the judge picks after each call
(`kg_trials`'s checks, `kg_precision`'s timed audit), cross-checks the workers' clocks
(`kg_judge.clock_findings`) and times the reference alone again. `work`, `bandwidth_gbs` and
`samples` are the result's `work`, `bandwidth_gbs` and `timing`.

Loaded by the harness as a private module and given to the runner as `runner.kg_timed`; the
runner gives it `kg_context`, `kg_checks`, `kg_work` and `kg_judge`.
"""

import os
import traceback
from random import Random as _Random
from dataclasses import asdict as _asdict

# Captured before any candidate code exists in the process.
_format_exc = traceback.format_exc
_isinstance = isinstance
_type = type
_urandom = os.urandom

# The fresh draws' share of GPU memory has this ceiling: 30% of an H200 held 66 GiB of draws
# for a 1M-element ReLU, where a few hundred draws already outlast any run of rounds.
DRAWS_MAX_GPU_BYTES = 16 << 30
# Verified timed calls of the candidate that also go through the precision audit (float64), drawn
# among all the verified ones. A kernel that computes in lower precision on a share of its calls
# must do so on most of them to move the median it is timed by: with 4 audits, one narrowed on
# 60% of its calls escapes with probability 0.4^4 = 2.6% (with 2, 16%).
TIMED_PRECISION_AUDITS = 4
# The audited calls' outputs and references are held until the timing ends, up to this much
# memory (and this share of the GPU's free memory); past it (a KernelBench-size ReLU's 6 GiB
# outputs) the first verified calls are audited as they come, where the float64 audit fits at all.
TIMED_AUDIT_HOLD_BYTES = 2 << 30
TIMED_AUDIT_HOLD_SHARE = 0.1

# Set by the runner (`runner._link`).
kg_context = None
kg_checks = None
kg_work = None
kg_judge = None


class Timed:
    def __init__(self, ctx, trials, precision, start_worker):
        self.ctx = ctx
        self.trials = trials
        self.precision = precision
        # `start_worker(role, where)`: a worker for the role's code (the runner's).
        self.start_worker = start_worker
        self.work = None
        self.bandwidth_gbs = None
        # The result's `timing`: every series, the judge's clock.
        self.samples = None
        # (shared buffers, their seeds, `kg_timing.FreshInputs`), once the draws are made.
        self.timing_inputs = None
        self.reference_alone = None
        self.ref_remote = None

    # ---- before the candidate ----------------------------------------------------------------
    def count_work(self, ref_model, inputs, refs, s):
        """Bytes every input read once and every output written once (free: from the shapes)
        and, when the job asks (`count_flops`: GPU jobs, where a floor is computed), the
        reference's FLOPs (one extra reference call on one input set). Any failure leaves the
        field unset: counting must never fail a kernel."""
        ctx = self.ctx
        try:
            self.work = {
                "input_bytes": kg_work.nbytes(ctx.T, inputs),
                "output_bytes": kg_work.nbytes(ctx.T, refs),
                "flops": None,
            }
        except Exception:
            self.work = None
            return
        if not ctx.job.count_flops:
            return
        try:
            ctx.set_seed(s)
            self.work["flops"] = kg_work.count_flops(ctx.torch, ref_model, inputs)
            ctx.sync()
            return
        except Exception:
            pass
        if ctx.kg_timing is None:
            return
        try:
            # torch's own counter also handles higher-order ops, at the price of the import.
            ctx.set_seed(s)
            _, _, flops = ctx.kg_timing.work(ref_model, inputs, refs)
            ctx.sync()
            self.work["flops"] = int(flops)
        except Exception:
            pass

    def measure_bandwidth(self):
        """On CUDA, the device's copy bandwidth (GB/s) through the Rust timer, which the timing
        then reuses. None on CPU, on a warm-L2 timer or on any failure (timing makes its own)."""
        ctx = self.ctx
        if ctx.kg_timing is None or ctx.dev.type != "cuda":
            return
        try:
            timer = ctx.timer if ctx.timer is not None else ctx.kg_timing.make_timer(self.timing_cfg())
            bw = timer.bandwidth_gbs()
            ctx.timer = timer
            self.bandwidth_gbs = kg_checks.finite_or_none(bw) if bw is not None else None
        except Exception:
            self.bandwidth_gbs = None

    def timing_cfg(self):
        ctx = self.ctx
        cfg = _asdict(ctx.job.timing)
        cfg["device"] = "cuda" if ctx.dev.type == "cuda" else "cpu"
        return cfg

    def time_reference_alone(self, ref_model, trials):
        """Before any candidate code exists: gives the timed calls' buffers (the first trials'
        inputs) their fresh content (`kg_timing.FreshInputs`) and times the reference alone on
        them. The interleaved
        reference series is compared with this one (`timing/reference-tampered`): a candidate
        that slows the reference's op at import shows there."""
        ctx = self.ctx
        self.timing_inputs = None
        self.reference_alone = None
        if ctx.kg_timing is None:
            return
        # The shared buffers the workers read: the first trials' inputs, copied.
        sets = ctx.shared.sets
        seeds = ctx.shared_seeds
        if ctx.timer is None:
            ctx.timer = ctx.kg_timing.make_timer(self.timing_cfg())
        fresh = ctx.kg_timing.FreshInputs(ctx.torch, sets, self.fresh_draws(sets), ctx.timer.copy)
        self.timing_inputs = (sets, seeds, fresh)
        ctx.phase("fresh_draws")
        # The reference is timed in a worker of its own, on the candidate's path: the judge's
        # clock, the round trip and the output copy are the same for both.
        self.ref_remote = self.start_worker("reference", "starting the reference's worker")
        ctx.phase("reference_worker")
        try:
            self.reference_alone = self.time_alone(ref_model, sets, fresh)
        except BaseException as e:
            raise kg_context.Stop(
                {
                    "kind": "harness_error",
                    "message": f"timing the reference before the candidate failed: {e!r}",
                    "traceback": kg_context.tail(_format_exc()),
                }
            )
        ctx.phase("reference_alone_timing")

    def fresh_draws(self, sets):
        """New draws of the problem's `get_inputs()` for the timed calls (on the device, like the
        trials' own), made now, before any candidate code exists: as many as a full run of
        rounds can use, within 30% of the free GPU memory and at most 16 GiB (2 GiB of host
        memory on the CPU), and two seconds."""
        ctx = self.ctx
        input_bytes = kg_work.nbytes(ctx.T, sets[0])
        if ctx.dev.type == "cuda":
            max_bytes = min(0.3 * ctx.free_gpu_bytes(), float(DRAWS_MAX_GPU_BYTES))
            planned = self.trials.draw_bytes()
            if planned is not None:
                # What the memory plan (`kg_checks.plan_memory`) left for them.
                max_bytes = min(max_bytes, float(planned))
        else:
            max_bytes = float(2 << 30)
        t = ctx.job.timing
        calls = 3 * (int(t.warmup) + 2 * int(t.max_samples) + 4)
        draws = ctx.kg_timing.draw_pool(
            lambda: ctx.gen_inputs(int.from_bytes(_urandom(4), "little")),
            min(ctx.kg_timing.MAX_DRAWS, calls),
            input_bytes,
            max_bytes,
            2.0,
        )
        ctx.sync()
        return draws

    def time_alone(self, ref_model, sets, fresh):
        """The reference timed alone on the timing buffers; then the buffers' original content is
        put back. A witness needs enough calls for a rank test, not a 1%
        interval: a quarter of the budget."""
        ctx = self.ctx
        cfg = self.timing_cfg()
        budget = float(cfg["budget_s"])
        cfg["budget_s"] = min(budget, max(1.0, budget / 4.0))
        if ctx.timer is None:
            ctx.timer = ctx.kg_timing.make_timer(cfg)

        # No control series (a copy timed beside it): it would run in the judge while the
        # reference runs in its worker, so it would not carry the reference's machine state.
        callables = {"reference": self.ref_remote}
        try:
            alone = ctx.kg_timing.measure(callables, len(sets), ctx.timer, cfg, None, fresh)
        except kg_judge.WorkerFailed as failed:
            raise RuntimeError(f"the reference's worker failed: {failed.outcome}")
        fresh.restore()
        ctx.sync()
        return alone["reference"]

    # ---- the candidate timed -----------------------------------------------------------------
    def run_timing(self, ref_model, cand, base, trials):
        ctx = self.ctx
        Stop = kg_context.Stop
        if ctx.kg_timing is None or self.timing_inputs is None:
            ctx.finding("timing-unavailable", "warning", "this harness build has no timing module; timing skipped")
            return
        T = ctx.T
        sets, seeds, fresh = self.timing_inputs
        n_sets = len(sets)

        def caller(model):
            def f(i):
                with ctx.torch.no_grad():
                    return model(*sets[i])

            return f

        callables = {"reference": self.ref_remote, "candidate": cand if _isinstance(cand, kg_judge.RemoteModel) else caller(cand)}
        if base is not None:
            callables["base"] = base

        # Outputs of checked calls stay referenced, so the allocator cannot hand their memory out
        # again: a later output in the same memory was kept and returned by the candidate.
        kept = {name: {} for name in callables}
        # Models in workers: their outputs come as the judge's own copies (`read_outputs`).
        remote = {name for name, fn in callables.items() if _isinstance(fn, kg_judge.RemoteModel)}
        # A checked call's outputs are copied here by the harness the moment the call returns
        # (`capture`), before any PyTorch operation that candidate code could hook into.
        snap_bufs = {
            name: [T.zeros_like(r) for r in trials[0][2]]
            for name in ("candidate", "base")
            if name in callables and name not in remote
        }
        ctx.sync()
        harness_copy = ctx.timer.copy

        def capture(name, out):
            if name in remote:
                # The judge's copies, read from the shared output buffers right after the reply.
                return callables[name].read_outputs(out), None
            outs = ctx.as_list(out)
            bufs = snap_bufs.get(name)
            if bufs is None:
                return outs, None
            snaps = []
            for k, o in enumerate(outs):
                b = bufs[k] if k < len(bufs) else None
                # The exact type first: a subclass's properties would run candidate code.
                if (
                    b is not None
                    and _type(o) is T.Tensor
                    and o.dtype == b.dtype
                    and o.shape == b.shape
                    and o.device == b.device
                    and o.is_contiguous()
                ):
                    harness_copy(T.data_ptr(b), T.data_ptr(o), b.numel() * b.element_size(), True)
                    snaps.append(b)
                else:
                    snaps.append(None)
            return outs, snaps

        def inputs_needed(outs, refs):
            return kg_checks.first_mismatch(T, ctx.torch, ctx.tol, outs, refs) is not None

        checks = self.trials

        def verify(name, i, captured, token):
            if name == "reference":
                return
            outs, snaps = captured
            # The reference on the call's own content, computed after the call: the candidate
            # cannot tell from a reference run that this call is checked.
            refs = ctx.reference(ref_model, fresh.materialize(token), seeds[i])
            earlier = [t for j, ts in kept[name].items() for t in ts]
            compared = [sn if sn is not None else o for o, sn in zip(outs, snaps)] if snaps else outs
            bad = checks.structural(outs, refs, sets[i], earlier, i)
            if not bad and checks.mismatch(
                compared, refs, fresh.materialize(token) if inputs_needed(compared, refs) else None, seeds[i]
            ):
                bad = {"kind": "incorrect"}
            if bad:
                aliased = bad.get("kind") == "output_aliased"
                raise Stop(
                    {
                        "kind": "output_aliased" if aliased else "incorrect",
                        "message": f"a timed call of {name} on input set {i} returned "
                        + ("memory it returned from an earlier timed call (a cached result)" if aliased else "a wrong result")
                        + ": the kernel behaves differently while being timed",
                        "trials": [],
                        "phase": "timing",
                    }
                )
            tensors = [o for o in outs if _isinstance(o, T.Tensor)]
            # The judge's copies of a worker's outputs alias nothing a later call returns: none kept.
            if name not in remote:
                kept[name][i] = tensors
            if name == "candidate":
                held = kg_work.nbytes(T, list(refs)) + kg_work.nbytes(T, tensors)
                if held * TIMED_PRECISION_AUDITS <= hold_budget:
                    # A uniform sample of every verified call (reservoir): a candidate that keeps
                    # full precision for its first N calls, any N, is audited after them as likely.
                    audit_pool[0] += 1
                    call = (i, token, refs, outs)
                    if len(audit_pool[1]) < TIMED_PRECISION_AUDITS:
                        audit_pool[1].append(call)
                    else:
                        slot = audit_rng.randrange(audit_pool[0])
                        if slot < TIMED_PRECISION_AUDITS:
                            audit_pool[1][slot] = call
                elif audits_now[0] < TIMED_PRECISION_AUDITS:
                    # Outputs too large to hold several of until the end: audited as they come.
                    audits_now[0] += 1
                    self.precision.audit_timed(ref_model, seeds[i], fresh.materialize(token), refs, outs)

        # Timed calls the judge puts through the precision audit, picked among the verified ones
        # (the worker cannot tell which), audited once the timing ends.
        audit_pool = [0, []]
        audit_rng = _Random(_urandom(16))
        audits_now = [0]
        hold_budget = TIMED_AUDIT_HOLD_BYTES
        if ctx.dev.type == "cuda":
            hold_budget = min(hold_budget, int(TIMED_AUDIT_HOLD_SHARE * ctx.free_gpu_bytes()))
        # The judge looks at the GPU right after each worker's timed call and stops the worker
        # until its next (`kg_judge.GapWatch`): work it leaves running is charged to its call.
        try:
            watch = kg_judge.GapWatch.for_device(ctx.dev) if remote else None
            for name in remote:
                callables[name].watch = watch
            samples = ctx.kg_timing.measure(
                callables, n_sets, ctx.timer, self.timing_cfg(), verify, fresh, ["candidate"], capture
            )
        except Stop:
            raise
        except kg_judge.WorkerFailed as failed:
            raise Stop(failed.outcome)
        except BaseException as e:
            raise Stop(ctx.runtime_error(e, "timing"))
        finally:
            for name in remote:
                callables[name].watch = None
        kg_judge.charge_work_after_reply(samples)
        for rule, severity, message in kg_judge.work_after_reply(samples):
            ctx.finding(rule, severity, message)
        for i, token, refs, outs in audit_pool[1]:
            self.precision.audit_timed(ref_model, seeds[i], fresh.materialize(token), refs, outs)
        audit_pool[1] = []
        # The judge's clock beside every worker's (docs/timing.md, "Whose clock").
        clock = kg_judge.clock_findings(samples, ctx.dev.type)
        for rule, severity, message in clock:
            ctx.finding(rule, severity, message)
        kg_judge.judge_the_times(samples, ctx.dev.type, any(severity == "error" for _, severity, _ in clock))
        if self.reference_alone:
            samples["reference_before_import"] = self.reference_alone
        self.samples = samples
        ctx.phase("timing")
        # Alone again after the candidate's calls (GPU): a reference slower only between those
        # calls (a short, launch-bound one) is told apart from one the candidate's code slows.
        if self.reference_alone and ctx.dev.type == "cuda":
            try:
                after = self.time_alone(ref_model, sets, fresh)
            except BaseException as e:
                raise Stop(ctx.runtime_error(e, "timing"))
            samples["reference_after_calls"] = after
            ctx.phase("reference_after_calls")

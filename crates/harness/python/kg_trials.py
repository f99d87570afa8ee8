"""The correctness trials: the judge's side of checking the candidate's outputs.

`Trials(ctx, precision)` makes the trials before any candidate code exists (`make_trials`: each
trial's inputs and the reference's outputs, within the GPU memory plan, `fit_memory`), the
shifted sets (`shifted_sets`) and the trivial-output warning; then runs the candidate on them
(`check_trials`): structural checks, the comparison (`mismatch`, with the float64 fallback of
`kg_precision`), inputs unchanged, outputs settled, the determinism call and the shifted sets.
The comparisons' pure parts are `kg_checks`'s. Timing verifies its checked calls with the same
`structural` and `mismatch` (`kg_timed`).

Loaded by the harness as a private module and given to the runner as `runner.kg_trials`; the
runner gives it `kg_context`, `kg_checks`, `kg_work` and `kg_judge`.
"""

import threading
import time

# Captured before any candidate code exists in the process.
_perf = time.perf_counter
_sleep = time.sleep
_active_count = threading.active_count
_isinstance = isinstance

# Set by the runner (`runner._link`).
kg_context = None
kg_checks = None
kg_work = None
kg_judge = None


class Trials:
    def __init__(self, ctx, precision):
        self.ctx = ctx
        self.precision = precision
        # The result's `trials_run` and `memory.budget` (the GPU memory plan, `fit_memory`).
        self.trials_run = 0
        self.memory_budget = None

    # ---- before the candidate ----------------------------------------------------------------
    def make_trials(self, ref_model, trial_seeds):
        """Each trial's inputs and the reference's outputs on them, before any candidate code
        exists; on a GPU, sized on the first set so copies are dropped before they are made.
        Returns the trials, (seed, pristine inputs, reference outputs), and the seeds kept."""
        ctx = self.ctx
        t_gen = 0.0
        t_ref = 0.0
        trials = []
        for s in list(trial_seeds):
            if len(trials) >= len(trial_seeds):
                break
            t0 = _perf()
            inputs = ctx.gen_inputs(s)
            ctx.sync()
            t1 = _perf()
            refs = ctx.reference(ref_model, inputs, s)
            t_gen += t1 - t0
            t_ref += _perf() - t1
            trials.append((s, inputs, refs))
            if len(trials) == 1 and ctx.dev.type == "cuda":
                trial_seeds = trial_seeds[: self.fit_memory(inputs, refs, len(trial_seeds))]
        ctx.phases.append(["input_generation", t_gen * 1000.0])
        ctx.phases.append(["reference", t_ref * 1000.0])
        ctx.restart_phase()
        return trials, trial_seeds

    def fit_memory(self, inputs, refs, trials):
        """The harness's GPU memory budget: from the first input set's size, the copies it keeps
        (correctness trials, the shifted set, timing's input sets and their fresh-content pool,
        outputs, the workers' own) must fit in 90% of what is free;
        when they do not, keep fewer (timing sets, then the shifted set, then trials), say so in
        a warning, and return how many trials to keep."""
        ctx = self.ctx
        T = ctx.T
        job = ctx.job
        input_bytes = kg_work.nbytes(T, inputs)
        set_bytes = input_bytes + kg_work.nbytes(T, refs)
        free = ctx.free_gpu_bytes()
        # The workers that will hold outputs of their own: the candidate's, and with timing the
        # reference's and the base version's.
        workers = 1 + (1 if job.timing else 0) + (1 if job.timing and job.base_kernel else 0)
        plan = kg_checks.plan_memory(
            set_bytes=set_bytes,
            input_bytes=input_bytes,
            available=free + set_bytes,  # the first set is already held
            trials=trials,
            shifted=job.shifted_trials,
            input_sets=job.timing.input_sets if job.timing else 1,
            workers=workers,
            draws=2 if job.timing else 0,
        )
        self.memory_budget = plan
        over = plan["need_bytes"] > plan["budget_bytes"]
        if plan["reduced"] or over:
            job.shifted_trials = plan["shifted"]
            if job.timing:
                job.timing.input_sets = plan["input_sets"]
            kept = ("kept " + ", ".join(plan["reduced"]) + " so the harness's own copies fit") if plan["reduced"] else ""
            if over:
                kept += (", and " if kept else "") + (
                    f"even so they need {plan['need_bytes'] / 2**30:.1f} GiB of the "
                    f"{plan['budget_bytes'] / 2**30:.1f} GiB planned for: the eval may run out of GPU memory"
                )
            ctx.finding(
                "memory-budget",
                "warning",
                f"the problem's inputs and outputs take {set_bytes / 2**30:.2f} GiB per set and "
                f"{plan['available'] / 2**30:.1f} GiB of GPU memory is available: " + kept,
            )
        return plan["trials"]

    def shifted_sets(self, ref_model, inputs, s):
        """Signed, scaled copies of the first trial's inputs where the reference stays finite."""
        ctx = self.ctx
        T = ctx.T
        budget = ctx.job.shifted_trials
        out = []
        if budget <= 0:
            return out
        variants = [
            ("centred and scaled (x - mean) * 2", lambda x: (x - x.float().mean().to(x.dtype)) * 2),
            ("negated", lambda x: -x),
        ][:budget]
        for label, fn in variants:
            shifted = [fn(x) if _isinstance(x, T.Tensor) and x.is_floating_point() else x for x in inputs]
            if all(T.equal(a, b) for a, b in zip(shifted, inputs) if _isinstance(a, T.Tensor)):
                continue
            try:
                refs = ctx.reference(ref_model, shifted, s)
            except kg_context.Stop:
                raise
            except Exception:
                continue
            if all(bool(T.isfinite(r).all()) for r in refs if r.is_floating_point()):
                out.append((label, s, shifted, refs))
        return out

    def trivial_output_warning(self, inputs, refs):
        ctx = self.ctx
        T = ctx.T
        tol = ctx.tol
        ref = refs[0]
        if not ref.is_floating_point() or ref.numel() == 0:
            return
        if bool(T.allclose(T.zeros_like(ref), ref, atol=tol, rtol=tol)):
            ctx.finding(
                "trivial-output-passes",
                "warning",
                f"an all-zeros output already passes this problem's tolerance ({tol}): "
                "correctness here proves little; consider larger inputs or a tighter check",
            )
        for x in inputs:
            if (
                _isinstance(x, T.Tensor)
                and x.shape == ref.shape
                and x.dtype == ref.dtype
                and bool(T.allclose(x, ref, atol=tol, rtol=tol))
            ):
                ctx.finding(
                    "trivial-output-passes",
                    "warning",
                    "returning the input unchanged already passes this problem's tolerance on its benchmark inputs",
                )
                break

    # ---- the checks --------------------------------------------------------------------------
    def call(self, cand, args, s, where):
        ctx = self.ctx
        if _isinstance(cand, kg_judge.RemoteModel):
            try:
                return cand.run(args, s, where)
            except kg_judge.WorkerFailed as failed:
                raise kg_context.Stop(failed.outcome)
        try:
            with ctx.torch.no_grad():
                ctx.set_seed(s)
                out = cand(*args)
            ctx.sync()
        except BaseException as e:
            if _isinstance(e, SystemExit):
                e = RuntimeError(f"the candidate called sys.exit({e.code})")
            raise kg_context.Stop(ctx.runtime_error(e, where))
        return out

    def structural(self, outs, refs, args, keep, trial):
        """Type, shape, dtype, device and aliasing checks. Returns an outcome or None."""
        return kg_checks.structural(self.ctx.T, outs, refs, args, keep, trial)

    def mismatch(self, outs, refs, inputs=None, s=None):
        """None when all outputs are within tolerance, else the detail of the first bad output.
        With the call's `inputs` (and seed), outputs that miss the reference are measured
        against the float64 result too (`kg_checks.within_truth`): no further from it than the
        reference is, plus the tolerance, passes."""
        ctx = self.ctx
        detail = kg_checks.first_mismatch(ctx.T, ctx.torch, ctx.tol, outs, refs)
        if detail is None or inputs is None:
            return detail
        exact = self.precision.float64_outputs(inputs, s, refs)
        if exact is not None and kg_checks.within_truth(ctx.T, ctx.torch, ctx.tol, outs, refs, exact):
            if not ctx.has_finding("reference-less-accurate"):
                ctx.finding(
                    "reference-less-accurate",
                    "warning",
                    f"the candidate's outputs miss the reference's by more than atol = rtol = {ctx.tol} but are no "
                    "further from a float64 evaluation of the reference than the reference itself is (plus the "
                    "tolerance): the reference is the less accurate of the two; passed",
                )
            return None
        return detail

    def snapshot(self, outs):
        return [self.ctx.T.clone(o) for o in outs]

    def draw_bytes(self):
        """The GPU memory timing's fresh draws may take, by the memory plan (None: no plan)."""
        return self.memory_budget["draw_bytes"] if self.memory_budget else None

    def assert_inputs_unchanged(self, args, inputs, i):
        T = self.ctx.T
        for j, (a, x) in enumerate(zip(args, inputs)):
            if _isinstance(a, T.Tensor) and not T.equal(a, x):
                raise kg_context.Stop(
                    {
                        "kind": "input_mutated",
                        "trial": i,
                        "input": j,
                        "message": f"ModelNew.forward changed input {j} (trial {i}); kernels must not write "
                        "their inputs: allocate the output instead",
                    }
                )

    def assert_outputs_settled(self, outs, snap, i, failures, n_trials):
        """The outputs, a moment after forward returned, are what they were when it returned
        (`snap`: taken then; from a worker, the shared buffers as they are now)."""
        T = self.ctx.T
        for k, (o, sn) in enumerate(zip(outs, snap)):
            if not _isinstance(o, T.Tensor) or not _isinstance(sn, T.Tensor) or o.shape != sn.shape or o.dtype != sn.dtype:
                continue
            if not T.equal(o, sn) and not (o.is_floating_point() and bool(o.isnan().any())):
                raise kg_context.Stop(
                    {
                        "kind": "incorrect",
                        "message": f"output {k} changed after ModelNew.forward returned (trial {i}): work "
                        "continues in the background (a thread or an unsynchronised stream)",
                        "trials": failures,
                        "passed_trials": max(0, i + 1 - len(failures)),
                        "total_trials": n_trials,
                    }
                )

    def check_trials(self, cand, trials, extra, threads_py, threads_native):
        """The candidate on every trial, then on trial 0 again (fresh buffers), then on the
        shifted sets. Returns the first trial's outputs (a snapshot), for the precision audit."""
        ctx = self.ctx
        T = ctx.T
        tol = ctx.tol
        Stop = kg_context.Stop
        native_threads = kg_context.native_threads
        t_calls = 0.0
        t0_all = _perf()
        first_inputs = trials[0][1]
        # One set of argument buffers, refilled per trial: the same pointers with new contents
        # expose caches keyed by data_ptr; fresh pointers are used for the determinism call.
        bufs = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in first_inputs]
        ref_bytes = sum(r.numel() * r.element_size() for _, _, refs in trials for r in refs)
        keep_all = ctx.dev.type == "cpu" or ref_bytes < (8 << 30)
        keep = [r for _, _, refs in trials for r in refs]  # outputs must never alias the reference's
        previous = []
        failures = []
        first_snapshot = None
        # A worker's outputs reach the judge as copies taken at the reply (`RemoteModel.read_outputs`):
        # the copy is the snapshot, nothing the worker holds can alias it, and what settles late
        # shows in the shared output buffers, compared with the copy a moment later.
        remote = _isinstance(cand, kg_judge.RemoteModel)
        for i, (s, inputs, refs) in enumerate(trials):
            same_shapes = all(
                (not _isinstance(b, T.Tensor)) or (b.shape == x.shape and b.dtype == x.dtype) for b, x in zip(bufs, inputs)
            )
            if not same_shapes:
                bufs = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in inputs]
            else:
                for b, x in zip(bufs, inputs):
                    if _isinstance(b, T.Tensor):
                        b.copy_(x)
            args = bufs
            ctx.sync()
            ctx.poison([(r.shape, r.dtype) for r in refs])
            n_before = native_threads()
            t0 = _perf()
            out = self.call(cand, args, s, f"running ModelNew.forward (trial {i})")
            t_calls += _perf() - t0
            self.trials_run = i + 1
            outs = ctx.as_list(out)
            bad = self.structural(outs, refs, args, keep + previous, i)
            if bad:
                raise Stop(bad)
            self.assert_inputs_unchanged(args, inputs, i)
            snap = outs if remote else self.snapshot(outs)
            detail = self.mismatch(snap, refs, inputs, s)
            if detail:
                detail["trial"] = i
                detail["seed"] = s
                failures.append(detail)
            elif i == 0:
                first_snapshot = snap
            # Work that finishes after forward returned (a background thread) shows up here.
            n_after = native_threads()
            if n_before is not None and n_after is not None and n_after > n_before:
                ctx.finding(
                    "threads-after-call",
                    "warning",
                    f"ModelNew.forward left {n_after - n_before} more native thread(s) running after it returned",
                )
            _sleep(0.02)
            ctx.sync()
            if remote:
                self.assert_outputs_settled(outs, cand.shared.outputs, i, failures, len(trials))
            else:
                self.assert_outputs_settled(outs, snap, i, failures, len(trials))
                if keep_all:
                    previous.extend(outs)
                else:
                    previous = list(outs)
            del args
        ctx.phases.append(["candidate_trials", t_calls * 1000.0])
        ctx.phases.append(["checks", (_perf() - t0_all - t_calls) * 1000.0])
        ctx.restart_phase()
        if failures:
            raise Stop(
                {
                    "kind": "incorrect",
                    "message": f"{len(failures)} of {len(trials)} trials exceed atol = rtol = {tol}",
                    "trials": failures,
                    "passed_trials": len(trials) - len(failures),
                    "total_trials": len(trials),
                }
            )
        # Determinism: the first trial again, on fresh buffers (new pointers).
        s, inputs, refs = trials[0]
        fresh = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in inputs]
        ctx.poison([(r.shape, r.dtype) for r in refs])
        outs = ctx.as_list(self.call(cand, fresh, s, "running ModelNew.forward (repeat of trial 0)"))
        bad = self.structural(outs, refs, fresh, keep + previous, 0)
        if bad:
            raise Stop(bad)
        detail = self.mismatch(outs, refs, inputs, s)
        if detail:
            detail["trial"] = 0
            detail["repeat"] = True
            raise Stop(
                {
                    "kind": "incorrect",
                    "message": "a second call on the same inputs (trial 0) gave a wrong result: the kernel is "
                    "nondeterministic, reads uninitialised memory or depends on earlier calls",
                    "trials": [detail],
                    "passed_trials": len(trials),
                    "total_trials": len(trials) + 1,
                }
            )
        if first_snapshot is not None and not all(T.equal(a, b) for a, b in zip(outs, first_snapshot)):
            ctx.finding(
                "nondeterministic",
                "warning",
                "two calls on the same inputs gave different (within-tolerance) results",
            )
        del fresh, outs
        first_outputs = first_snapshot
        # Shifted inputs: correct only on the benchmark's distribution is worth a warning.
        for label, s, shifted, refs in extra:
            args = [T.clone(x) if _isinstance(x, T.Tensor) else x for x in shifted]
            ctx.poison([(r.shape, r.dtype) for r in refs])
            try:
                outs = ctx.as_list(self.call(cand, args, s, "shifted inputs"))
                if label.startswith("centred"):
                    self.precision.centred_outputs = outs  # judged by the precision audit, passed or not
            except Stop as stop:
                ctx.finding(
                    "shifted-inputs",
                    "warning",
                    f"on {label} inputs ModelNew failed: {stop.outcome.get('message', stop.outcome.get('kind'))}",
                )
                continue
            bad = self.structural(outs, refs, args, keep, 0)
            d = None if bad else self.mismatch(outs, refs, shifted, s)
            if d:
                bad = {"message": "outputs exceed the tolerance"}
            if bad:
                extra_txt = f" (max abs error {d['max_abs_error']}, {d['mismatches']} of {d['elements']} elements)" if d else ""
                ctx.finding(
                    "shifted-inputs",
                    "warning",
                    f"ModelNew passes on the benchmark's inputs but not on {label} inputs{extra_txt}: it may rely "
                    "on the input distribution (e.g. non-negative values)",
                )
        ctx.phase("shifted_trials")
        n_py = _active_count()
        if n_py > threads_py:
            ctx.finding(
                "python-threads",
                "warning",
                f"the candidate started {n_py - threads_py} Python thread(s) that are still running",
            )
        return first_outputs

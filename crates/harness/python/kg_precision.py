"""The precision audit: the candidate's error against a float64 evaluation of the reference.

`Precision(ctx)` computes the float64 reference before any candidate code exists
(`exact_reference`, on trial 0's inputs and the centred shifted set), audits the first trial's
outputs and the centred set's (`audit`, `precision-downgrade`) and, during timing, verified timed
calls the judge picks (`audit_timed`). `float64_outputs` is the float64 evaluation the
correctness check falls back on (`kg_trials`, `reference-less-accurate`). `result` is the result's
`precision_audit`. The limits, the narrower formats and the sampling are `kg_checks`'s.

Loaded by the harness as a private module and given to the runner as `runner.kg_precision`; the
runner gives it `kg_checks` and `kg_work`.
"""

import os

# Captured before any candidate code exists in the process.
_urandom = os.urandom
_isinstance = isinstance
_type = type

# Set by the runner (`runner._link`).
kg_checks = None
kg_work = None


class Precision:
    def __init__(self, ctx):
        self.ctx = ctx
        # The result's `precision_audit`: the worst audited output, or why the audit was skipped.
        self.result = None
        # (label, per-output samples) of the float64 reference, until the audit has run.
        self.exact = None
        # The candidate's outputs on the centred shifted set (`kg_trials`), judged here.
        self.centred_outputs = None
        # The audited timed calls (`audit_timed`), each its worst output's errors.
        self.timed = []

    def exact_reference(self, ref_model, trial, extra):
        """The reference in float64, before any candidate code exists, on trial 0's inputs and
        on the centred shifted set: what the precision audit measures the reference's and the
        candidate's errors against (a sample of at most `kg_checks.PRECISION_SAMPLE` elements per
        output). The centred set matters most: on the benchmark's non-negative inputs a matmul's
        sums have no cancellation, so rounding of its operands averages out against the large
        output; on signed inputs TF32 or fp16 operands are 100 to 1000 times the fp32
        reference's error. Skipped when it does not fit in memory or the model does not run in
        float64."""
        self.exact = []
        self.result = None
        self.centred_outputs = None
        if self.ctx.job.precision not in kg_checks.PRECISION_FLOOR:
            return
        s, inputs, refs = trial
        sets = [("benchmark", s, inputs, refs)]
        for label, es, shifted, erefs in extra:
            if label.startswith("centred"):
                sets.append(("centred", es, shifted, erefs))
        for label, es, xs, rs in sets:
            got = self.exact_set(ref_model, es, xs, rs)
            if got is not None:
                self.exact.append((label, got))

    def exact_set(self, ref_model, s, inputs, refs):
        ctx = self.ctx
        torch, T = ctx.torch, ctx.T
        if not any(r.is_floating_point() for r in refs):
            return None
        too_big = self.float64_too_big(ref_model, inputs, refs)
        if too_big:
            self.result = {"skipped": too_big}
            return None
        try:
            outs = self.float64_forward(ref_model, inputs, s)
        except Exception as e:
            self.result = {"skipped": f"the reference does not run in float64 ({_type(e).__name__})"}
            return None
        exact = []
        g = torch.Generator()
        g.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
        for r, o in zip(refs, outs):
            if not r.is_floating_point() or not _isinstance(o, T.Tensor) or o.shape != r.shape:
                exact.append(None)
                continue
            idx = kg_checks.sample_index(torch, r.numel(), g, r.device)
            e = kg_checks.flat_sample(o, idx).to(torch.float64)
            ref_err = kg_checks.relative_error(torch, kg_checks.flat_sample(r, idx), e)
            exact.append((idx, e, ref_err, tuple(r.shape)))
        del outs
        ref_errors = [x[2] for x in exact if x is not None and x[2] is not None]
        if not ref_errors:
            return None
        if max(ref_errors) > kg_checks.PRECISION_UNRELATED * kg_checks.PRECISION_FLOOR[ctx.job.precision]:
            # Not the same function in float64 (random ops draw differently, integer paths).
            self.result = {"skipped": f"the float64 reference differs from the reference by {max(ref_errors):.2e}"}
            return None
        return exact

    def float64_outputs(self, inputs, s, refs):
        """The reference's model run in float64 on `inputs`, or None where it does not fit in
        memory or does not run in float64 (then the reference alone decides)."""
        ctx = self.ctx
        ref_model = getattr(ctx, "ref_model", None)
        if ref_model is None or not any(r.is_floating_point() for r in refs):
            return None
        try:
            if self.float64_too_big(ref_model, inputs, refs):
                return None
            return self.float64_forward(ref_model, inputs, s)
        except Exception:
            return None

    def float64_too_big(self, ref_model, inputs, refs):
        """Why a float64 run of the reference does not fit in the GPU's free memory (the model,
        the inputs and three outputs' worth, twice over), or None where it fits (or on the CPU)."""
        ctx = self.ctx
        if ctx.dev.type != "cuda":
            return None
        T = ctx.T
        params = kg_work.nbytes(T, list(ref_model.parameters()) + list(ref_model.buffers()))
        need = 2 * (params + kg_work.nbytes(T, inputs) + 3 * kg_work.nbytes(T, refs))
        free = ctx.free_gpu_bytes()
        if need > 0.5 * free:
            return f"float64 reference needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
        return None

    def float64_forward(self, ref_model, inputs, s, narrow_to=None):
        """The reference's model run in float64 on `inputs`; with `narrow_to` (one of
        `kg_checks.NARROWER_FORMATS`), its floating parameters, buffers and inputs first rounded
        to that format. Raises what the model raises."""
        import copy

        ctx = self.ctx
        torch, T = ctx.torch, ctx.T

        def widened(x):
            if narrow_to is not None:
                x = kg_checks.narrowed(torch, x, narrow_to)
            return x.to(torch.float64)

        with torch.no_grad():
            m64 = copy.deepcopy(ref_model)
            if narrow_to is not None:
                for p in list(m64.parameters()) + list(m64.buffers()):
                    if p.is_floating_point():
                        p.data = kg_checks.narrowed(torch, p.data, narrow_to)
            m64 = m64.to(dtype=torch.float64)
            x64 = [widened(x) if _isinstance(x, T.Tensor) and x.is_floating_point() else x for x in inputs]
            if s is not None:
                ctx.set_seed(s)
            outs = ctx.as_list(m64(*x64))
        ctx.sync()
        return outs

    def audit(self, first_outputs):
        """The candidate's error against the float64 reference, relative to the reference's own,
        on each audited set: an fp32 kernel that sums in another order stays within a small
        factor of it, one that computes in TF32/fp16/bf16 is orders of magnitude further
        (`precision-downgrade`). On the centred set the candidate may be a different function
        altogether (a kernel that relies on the benchmark's distribution: the `shifted-inputs`
        warning says so); an error past `kg_checks.PRECISION_SAME_FUNCTION` is not judged."""
        ctx = self.ctx
        torch = ctx.torch
        precision = ctx.job.precision
        outputs = {"benchmark": first_outputs, "centred": self.centred_outputs}
        worst = None
        for label, exact in self.exact or []:
            outs = outputs.get(label)
            if outs is None:
                continue
            for k, (o, ex) in enumerate(zip(outs, exact)):
                if ex is None:
                    continue
                idx, e, ref_err, shape = ex
                if _type(o) is not ctx.T.Tensor or tuple(o.shape) != shape or not o.is_floating_point():
                    continue
                cand_err = kg_checks.relative_error(torch, kg_checks.flat_sample(o, idx), e)
                if cand_err is None or ref_err is None:
                    continue
                limit = kg_checks.precision_limit(precision, ref_err)
                if label != "benchmark" and cand_err >= kg_checks.PRECISION_SAME_FUNCTION:
                    continue
                row = {
                    "inputs": label,
                    "output": k,
                    "reference_error": ref_err,
                    "candidate_error": cand_err,
                    "limit": limit,
                    "elements": int(e.numel()),
                    "sampled": idx is not None,
                }
                if worst is None or cand_err / limit > worst["candidate_error"] / worst["limit"]:
                    worst = row
        self.exact = None
        self.centred_outputs = None
        if worst is None:
            return
        self.result = worst
        if worst["candidate_error"] > worst["limit"]:
            inputs = "the benchmark's inputs" if worst["inputs"] == "benchmark" else "centred (signed) inputs"
            ctx.finding(
                "precision-downgrade",
                "error",
                f"against a float64 evaluation of the reference on {inputs}, the candidate's relative error is "
                f"{worst['candidate_error']:.2e} and the {precision} reference's own is {worst['reference_error']:.2e} "
                f"(output {worst['output']}, {worst['elements']} elements{', sampled' if worst['sampled'] else ''}; "
                f"limit {worst['limit']:.2e}: {kg_checks.PRECISION_RATIO:g}x the reference's, at least "
                f"{kg_checks.PRECISION_FLOOR[precision]:.0e}): it computes in lower precision than the problem's "
                f"{precision} (TF32, fp16 or bf16 arithmetic). Compute and accumulate in the problem's precision",
            )
        ctx.phase("precision_audit")

    def audit_timed(self, ref_model, s, inputs, refs, outs):
        """The precision audit on a verified timed call's own content: a kernel that computes in
        full precision only where it expects the audit (the first trials) shows here. Each
        audited call's worst output goes in the result's `precision_audit.timed`."""
        ctx = self.ctx
        kept = self.result
        exact = self.exact_set(ref_model, s, inputs, refs)
        self.result = kept
        if not exact:
            return
        torch = ctx.torch
        precision = ctx.job.precision
        rows = []
        for k, (o, ex) in enumerate(zip(outs, exact)):
            if ex is None or _type(o) is not ctx.T.Tensor or not o.is_floating_point():
                continue
            idx, e, ref_err, shape = ex
            if tuple(o.shape) != shape:
                continue
            cand_err = kg_checks.relative_error(torch, kg_checks.flat_sample(o, idx), e)
            if cand_err is None or ref_err is None:
                continue
            rows.append(
                {
                    "output": k,
                    "reference_error": ref_err,
                    "candidate_error": cand_err,
                    "narrowed": [],
                    "_o": o,
                    "_idx": idx,
                    "_exact": e,
                }
            )
        if not rows:
            return
        worst = max(rows, key=lambda r: r["candidate_error"] / max(r["reference_error"], 1e-300))
        unexplained = [r for r in rows if r["candidate_error"] > kg_checks.PRECISION_EXPLAINED_RATIO * r["reference_error"]]
        if unexplained:
            self.narrowed_errors(ref_model, s, inputs, unexplained)
        for r in rows:
            for private in ("_o", "_idx", "_exact"):
                r.pop(private)
        if kg_checks.finite_or_none(worst["candidate_error"]) is not None:  # JSON has no infinity
            self.timed.append(worst)
        if ctx.has_finding("precision-downgrade"):
            return
        for r in rows:
            k, ref_err, cand_err = r["output"], r["reference_error"], r["candidate_error"]
            limit = kg_checks.precision_limit(precision, ref_err)
            if cand_err > limit:
                ctx.finding(
                    "precision-downgrade",
                    "error",
                    f"on a timed call's inputs, against a float64 evaluation of the reference, the candidate's relative "
                    f"error is {cand_err:.2e} and the {precision} reference's own is {ref_err:.2e} (output {k}; "
                    f"limit {limit:.2e}): it computes in lower precision than the problem's {precision} on the "
                    "calls it is timed on. Compute and accumulate in the problem's precision on every call",
                )
                return
            explained = [
                n for n in r["narrowed"] if kg_checks.explained_by_narrowing(ref_err, cand_err, n["coefficient"], n["stderr"])
            ]
            if explained:
                # The format whose reference is nearest the candidate; within 5% of it (TF32 and
                # fp16 round values in fp16's range alike) the first in `NARROWER_FORMATS`.
                nearest = min(n["error"] for n in explained)
                n = next(n for n in explained if n["error"] <= 1.05 * nearest)
                fmt = n["format"]
                ctx.finding(
                    "precision-downgrade",
                    "error",
                    f"on a timed call's inputs the candidate's output {k} is the reference's on {fmt} operands: its "
                    f"relative error is {cand_err:.2e} against the float64 reference (the {precision} reference's own: "
                    f"{ref_err:.2e}) and contains the error of a float64 reference on operands rounded to {fmt} "
                    f"(coefficient {n['coefficient']:.2f} +- {n['stderr']:.2g}; an {precision} kernel's own error is "
                    f"independent of it, near 0). It computes on {fmt} operands on the calls it is timed on; compute in "
                    f"the problem's {precision} on every call",
                )
                return

    def narrowed_errors(self, ref_model, s, inputs, rows):
        """Under the limit but well above the reference's error (`rows`): the candidate's error
        against a float64 reference on operands rounded to each narrower format
        (`kg_checks.NARROWER_FORMATS`) and how its deviation from the exact one follows theirs
        (`kg_checks.narrowing_fit`), into each row's `narrowed`. The format whose rounding its error follows
        (`explained_by_narrowing`) is the one it computes on: TF32 arithmetic on non-negative
        operands, whose rounding averages out below the floor."""
        ctx = self.ctx
        torch = ctx.torch
        for fmt in kg_checks.NARROWER_FORMATS.get(ctx.job.precision, ()):
            try:
                narrowed = self.float64_forward(ref_model, inputs, s, narrow_to=fmt)
            except Exception:
                continue
            for r in rows:
                k, o, idx, e = r["output"], r["_o"], r["_idx"], r["_exact"]
                n = narrowed[k] if k < len(narrowed) else None
                if _type(n) is not ctx.T.Tensor or n.shape != o.shape:
                    continue
                got, ns = kg_checks.flat_sample(o, idx), kg_checks.flat_sample(n, idx).to(torch.float64)
                err = kg_checks.relative_error(torch, got, ns)
                fit = kg_checks.narrowing_fit(torch, got, e, ns)
                if err is not None and kg_checks.finite_or_none(err) is not None and fit is not None:
                    coefficient, stderr, corr = fit
                    r["narrowed"].append(
                        {"format": fmt, "error": err, "coefficient": coefficient, "stderr": stderr, "correlation": corr}
                    )
            del narrowed

    def timed_result(self):
        """The result's `precision_audit` with the audited timed calls in it."""
        if not self.timed:
            return self.result
        return dict(self.result or {}, timed=self.timed)

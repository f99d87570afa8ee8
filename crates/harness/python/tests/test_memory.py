"""The harness's memory decisions, on CPU torch: the GPU budget's plan (kg_checks.plan_memory) and
the fresh-input pool (kg_timing.draw_pool, FreshInputs): bounded by its memory share, refilled
through the harness's own copy.

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import ctypes
import importlib.util
import os
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "..", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kg_checks = load("kg_checks")
kg_context = load("kg_context")
kg_trials = load("kg_trials")
kg_precision = load("kg_precision")
kg_trials.kg_checks = kg_checks
kg_precision.kg_checks = kg_checks
kg_timing = load("kg_timing")
kg_wire = load("kg_wire")
kg_judge = load("kg_judge")
kg_judge.kg_wire = kg_wire
kg_trials.kg_context = kg_context
kg_trials.kg_judge = kg_judge
GIB = 1 << 30


class PlanMemory(unittest.TestCase):
    def plan(self, set_gib, available_gib, trials=5, shifted=1, input_sets=3, draws=2):
        return kg_checks.plan_memory(
            set_bytes=set_gib * GIB,
            input_bytes=set_gib * GIB // 2,
            available=available_gib * GIB,
            trials=trials,
            shifted=shifted,
            input_sets=input_sets,
            draws=draws,
        )

    def test_small_problems_keep_every_copy(self):
        p = self.plan(0.01, 140)
        self.assertEqual((p["trials"], p["shifted"], p["input_sets"], p["reduced"]), (5, 1, 3, []))

    def test_kernelbench_relu_on_an_h200_fits_by_cutting_timing_sets_first(self):
        # 4096 x 393216 fp32: 6.4 GB of input and 6.4 GB of output per set.
        p = self.plan(12, 130)
        self.assertGreaterEqual(p["trials"], 3)
        self.assertLessEqual(p["need_bytes"], kg_checks.MEMORY_SHARE * 130 * GIB)
        self.assertTrue(p["reduced"], "something must give at this size")
        self.assertTrue(p["reduced"][0].endswith("timing input sets"), p["reduced"])

    def test_what_an_h100_held_at_kernelbench_relu_size_is_counted(self):
        # Measured on an H100 (79.2 GiB): with 1 trial, no shifted set and 1 timing set the
        # judge held 60.9 GiB and each of two workers 6.5 GiB when the first comparison asked
        # for 6 GiB more: out of memory. The former plan counted 56 GiB (no shared buffers, no
        # workers) against a budget of 62.9 GiB (80%). The judge's share: the trial (12), the
        # shared input set and outputs (12), timing's copy of the set and two draws (18), the
        # argument buffers, the output copy and its snapshot (18).
        held = 60.85 + 2 * 6.5
        p_full = kg_checks.plan_memory(12 * GIB, 6 * GIB, 10_000 * GIB, 1, 0, 1, workers=2)
        self.assertGreaterEqual(p_full["need_bytes"], (held - 6.5) * GIB, "a plan that counts less than was held")
        p = self.plan(12, 78.6)
        self.assertLessEqual(p["need_bytes"], kg_checks.MEMORY_SHARE * 78.6 * GIB)
        self.assertEqual((p["trials"], p["shifted"], p["input_sets"], p["draws"]), (1, 0, 1, 1))
        self.assertIn("1 fresh draw of the inputs for timing (content repeats)", p["reduced"])
        # The fresh draws may take what the plan left, never fewer than it counted.
        self.assertGreaterEqual(p["draw_bytes"], 6 * GIB)
        self.assertLess(p["draw_bytes"], 12 * GIB)

    def test_a_plan_that_cannot_fit_says_so(self):
        # The same ReLU with a base version to time (a third worker) on the H100.
        p = kg_checks.plan_memory(12 * GIB, 6 * GIB, 78.6 * GIB, 5, 1, 3, workers=3)
        self.assertEqual((p["trials"], p["shifted"], p["input_sets"], p["draws"]), (1, 0, 1, 1))
        self.assertGreater(p["need_bytes"], p["budget_bytes"])
        fits = self.plan(12, 78.6)
        self.assertLessEqual(fits["need_bytes"], fits["budget_bytes"])

    def test_each_worker_is_counted(self):
        one = kg_checks.plan_memory(2 * GIB, GIB, 100 * GIB, 5, 1, 3, workers=1)
        three = kg_checks.plan_memory(2 * GIB, GIB, 100 * GIB, 5, 1, 3, workers=3)
        self.assertEqual(three["need_bytes"] - one["need_bytes"], 2 * GIB)

    def test_what_an_h200_held_at_kernelbench_relu_size_is_counted(self):
        # Measured (in-process harness): with 5 trials, 1 shifted set and 2 timing sets, 114 GiB
        # were held when the first trial's comparison began (trials 60, shifted 12, timing sets
        # and pool 24, the argument buffer, the output and its snapshot 18); a plan that counted
        # 108 GiB allowed it, and the comparison's temporaries ran out of memory.
        p = self.plan(12, 139, input_sets=2)
        p_full = kg_checks.plan_memory(12 * GIB, 6 * GIB, 10_000 * GIB, 5, 1, 2)
        self.assertGreaterEqual(p_full["need_bytes"], 114 * GIB)
        self.assertLessEqual(p["need_bytes"], kg_checks.MEMORY_SHARE * 139 * GIB)
        self.assertTrue(p["reduced"], p)

    def test_comparisons_work_in_bounded_chunks(self):
        saved = kg_checks.COMPARE_CHUNK
        kg_checks.COMPARE_CHUNK = 1000
        try:
            o = torch.rand(10_500)
            r = o.clone()
            pieces = list(kg_checks.compare_chunks(o, r))
            self.assertEqual(len(pieces), 11)
            self.assertTrue(all(p[1].numel() <= 1000 for p in pieces))
            self.assertEqual(sum(p[1].numel() for p in pieces), o.numel())
            # A non-contiguous pair is compared whole (a reshape would copy it).
            self.assertEqual(len(list(kg_checks.compare_chunks(o[::2], r[::2]))), 1)
        finally:
            kg_checks.COMPARE_CHUNK = saved

    def test_a_chunked_comparison_reports_what_a_whole_one_does(self):
        ctx = kg_context.Context(None, None, None)
        ctx.torch, ctx.tol = torch, 1e-4
        ctx.T = ctx.capture(torch)
        r_ = kg_trials.Trials(ctx, kg_precision.Precision(ctx))
        ref = torch.rand(40, 263)
        out = ref.clone()
        out[9, 130] += 0.5
        out[31, 7] = float("nan")
        out[35, 200] -= 2.0
        whole = r_.mismatch([out], [ref])
        saved = kg_checks.COMPARE_CHUNK
        kg_checks.COMPARE_CHUNK = 1000
        try:
            chunked = r_.mismatch([out], [ref])
            self.assertIsNone(r_.mismatch([ref.clone()], [ref]))
        finally:
            kg_checks.COMPARE_CHUNK = saved
        self.assertEqual(chunked, whole)
        self.assertEqual((whole["mismatches"], whole["first_mismatch_index"], whole["nonfinite_outputs"]), (3, [9, 130], 1))
        self.assertAlmostEqual(whole["max_abs_error"], 2.0, places=5)

    def test_then_shifted_sets_then_trials_never_below_one(self):
        p = self.plan(12, 60)
        self.assertEqual((p["shifted"], p["input_sets"]), (0, 1))
        self.assertLess(p["trials"], 5)
        self.assertGreaterEqual(p["trials"], 1)
        self.assertTrue(any("correctness trials" in r for r in p["reduced"]), p["reduced"])
        p = self.plan(100, 10)
        self.assertEqual((p["trials"], p["shifted"], p["input_sets"]), (1, 0, 1))

    def test_nothing_reported_as_cut_that_was_not_asked_for(self):
        p = self.plan(12, 60, shifted=0, input_sets=1, draws=0)
        self.assertFalse(any("shifted" in r or "timing" in r for r in p["reduced"]), p["reduced"])


class RemoteOutputs(unittest.TestCase):
    """A worker's outputs in the correctness trials: the judge's copies are the snapshot (no
    second copy), and a shared output buffer written after the reply is caught."""

    class Remote(kg_judge.RemoteModel):
        def __init__(self, late_write=None):
            class Shared:
                pass

            self.shared = Shared()
            self.shared.outputs = []
            self.late_write = late_write
            self.copies = 0

        def run(self, args, seed, where):
            out = args[0][:, :16] * 2.0
            if not self.shared.outputs:
                self.shared.outputs = [torch.empty_like(out)]
            self.shared.outputs[0].copy_(out)
            copy = self.shared.outputs[0].clone()  # RemoteModel.read_outputs: the judge's copy
            self.copies += 1
            if self.late_write:
                # Work the worker left behind its reply lands in the shared buffer.
                self.shared.outputs[0].view(-1)[0] += 1.0
            return [copy]

    def trials(self):
        ctx = kg_context.Context(None, None, None)
        ctx.torch, ctx.tol, ctx.dev = torch, 1e-4, torch.device("cpu")
        ctx.T = ctx.capture(torch)

        class Job:
            shifted_trials = 0

        ctx.job = Job()
        r_ = kg_trials.Trials(ctx, kg_precision.Precision(ctx))
        trials = []
        for s in range(3):
            x = torch.rand(64, 32, generator=torch.Generator().manual_seed(s))
            trials.append((s, [x], [x[:, :16] * 2.0]))
        return r_, trials

    def test_an_honest_worker_passes_with_one_copy_per_call(self):
        r_, trials = self.trials()
        remote = self.Remote()
        clones = []
        real_clone = r_.ctx.T.clone
        r_.ctx.T.clone = lambda t: clones.append(t.shape) or real_clone(t)
        first = r_.check_trials(remote, trials, [], 1, None)
        self.assertTrue(torch.equal(first[0], trials[0][2][0]))
        # Inputs only (the argument buffers, the determinism call's fresh ones): no snapshot
        # of the judge's own copies of the outputs.
        self.assertTrue(clones)
        self.assertNotIn(torch.Size([64, 16]), clones)

    def test_a_shared_output_written_after_the_reply_is_caught(self):
        r_, trials = self.trials()
        with self.assertRaises(kg_context.Stop) as stop:
            r_.check_trials(self.Remote(late_write=True), trials, [], 1, None)
        self.assertEqual(stop.exception.outcome["kind"], "incorrect")
        self.assertIn("changed after ModelNew.forward returned", stop.exception.outcome["message"])


class FreshDraws(unittest.TestCase):
    """Timed calls get whole new draws of the problem's inputs, so every structure the problem's
    `get_inputs()` gives (a lower-triangular matrix, a symmetric one) is kept (issue 26)."""

    def tril_draw(self, n=64):
        a = torch.tril(torch.rand(n, n))
        s = torch.rand(n, n)
        return [a, s + s.T]

    def fresh(self, copy=None):
        sets = [self.tril_draw(), self.tril_draw()]
        draws = kg_timing.draw_pool(self.tril_draw, 20, 2 * 64 * 64 * 4, 1 << 30, 5.0)
        return kg_timing.FreshInputs(torch, sets, draws, copy), sets

    def test_every_timed_content_keeps_the_problems_structure_and_is_new(self):
        f, sets = self.fresh()
        originals = [[x.clone() for x in s] for s in sets]
        seen = []
        for _ in range(20):
            f.fill(0, f.fresh())
            a, sym = sets[0]
            self.assertTrue(torch.equal(a, torch.tril(a)), "the refilled matrix is no longer lower-triangular")
            self.assertTrue(torch.equal(sym, sym.T), "the refilled matrix is no longer symmetric")
            self.assertFalse(any(torch.equal(a, b) for b in seen), "content repeated while unused draws remained")
            self.assertFalse(torch.equal(a, originals[0][0]), "a timed call saw the correctness trials' content")
            seen.append(a.clone())
        self.assertEqual(f.repeats, 0)
        f.fresh()
        self.assertEqual(f.repeats, 1, "a 21st call on 20 draws repeats one, and says so")
        f.restore()
        for s, o in zip(sets, originals):
            self.assertTrue(all(torch.equal(x, y) for x, y in zip(s, o)))

    def test_the_refill_goes_through_the_harness_copy_when_given(self):
        calls = []

        def copy(dst, src, n, *, wait, evict_source):
            calls.append((n, evict_source))
            ctypes.memmove(dst, src, n)

        f, sets = self.fresh(copy=copy)
        token = f.fresh()
        f.fill(1, token)
        # Refills ask for the source's eviction from the host's caches (the CPU's input reuse).
        self.assertEqual(calls, [(64 * 64 * 4, True), (64 * 64 * 4, True)])
        self.assertTrue(all(torch.equal(x, y) for x, y in zip(sets[1], f.materialize(token))))
        self.assertEqual((f.harness_copies, f.torch_copies), (2, 0))

    def test_the_pool_stops_at_its_memory_share(self):
        draws = kg_timing.draw_pool(self.tril_draw, 100, 1000, 10_000, 5.0)
        self.assertEqual(len(draws), 10)
        self.assertEqual(len(kg_timing.draw_pool(self.tril_draw, 100, 1 << 40, 10, 5.0)), 1)


class PrecisionAudit(unittest.TestCase):
    """The error against float64, relative to the reference's own (issue 27)."""

    def errors(self, cand):
        torch.manual_seed(0)
        a, b = torch.rand(256, 512), torch.rand(512, 256)
        exact = (a.double() @ b.double()).reshape(-1)
        ref = (a @ b).reshape(-1)
        got = cand(a, b).reshape(-1)
        return kg_checks.relative_error(torch, ref, exact), kg_checks.relative_error(torch, got, exact)

    def test_a_matmul_in_bf16_is_far_beyond_the_limit(self):
        ref_err, cand_err = self.errors(lambda a, b: (a.bfloat16() @ b.bfloat16()).float())
        self.assertGreater(cand_err, kg_checks.precision_limit("fp32", ref_err))

    def test_another_summation_order_and_fp64_accumulation_pass(self):
        def blocked(a, b):
            return sum(a[:, k : k + 64] @ b[k : k + 64] for k in range(0, 512, 64))

        for cand in (blocked, lambda a, b: (a.double() @ b.double()).float()):
            ref_err, cand_err = self.errors(cand)
            self.assertLessEqual(cand_err, kg_checks.precision_limit("fp32", ref_err))

    def test_large_outputs_are_sampled(self):
        g = torch.Generator()
        g.manual_seed(1)
        self.assertIsNone(kg_checks.sample_index(torch, 1000, g, "cpu"))
        idx = kg_checks.sample_index(torch, kg_checks.PRECISION_SAMPLE * 3, g, "cpu")
        self.assertEqual(idx.numel(), kg_checks.PRECISION_SAMPLE)


if __name__ == "__main__":
    unittest.main()

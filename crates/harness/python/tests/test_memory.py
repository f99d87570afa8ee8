"""The harness's memory decisions, on CPU torch: the GPU budget's plan (kg_checks.plan_memory) and
the fresh-input pool's digest, which must work in bounded steps (a whole-pool float64 copy
crashed KernelBench-size problems on the H200: 16 bytes per element, on the host too).

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
GIB = 1 << 30


class PlanMemory(unittest.TestCase):
    def plan(self, set_gib, available_gib, trials=5, shifted=1, input_sets=3):
        return kg_checks.plan_memory(
            set_bytes=set_gib * GIB,
            input_bytes=set_gib * GIB // 2,
            available=available_gib * GIB,
            trials=trials,
            shifted=shifted,
            input_sets=input_sets,
        )

    def test_small_problems_keep_every_copy(self):
        p = self.plan(0.01, 140)
        self.assertEqual((p["trials"], p["shifted"], p["input_sets"], p["reduced"]), (5, 1, 3, []))

    def test_kernelbench_relu_on_an_h200_fits_by_cutting_timing_sets_first(self):
        # 4096 x 393216 fp32: 6.4 GB of input and 6.4 GB of output per set.
        p = self.plan(12, 130)
        self.assertEqual(p["trials"], 5)
        self.assertLessEqual(p["need_bytes"], 0.8 * 130 * GIB)
        self.assertTrue(p["reduced"], "something must give at this size")
        self.assertTrue(p["reduced"][0].endswith("timing input sets"), p["reduced"])

    def test_what_an_h200_held_at_kernelbench_relu_size_is_counted(self):
        # Measured: with 5 trials, 1 shifted set and 2 timing sets, 114 GiB were held when the
        # first trial's comparison began (trials 60, shifted 12, timing sets and pool 24, the
        # argument buffer, the output and its snapshot 18); the old plan counted 108 GiB and
        # allowed it, and the comparison's whole-tensor temporaries ran out of memory.
        p = self.plan(12, 139, input_sets=2)
        p_full = kg_checks.plan_memory(12 * GIB, 6 * GIB, 10_000 * GIB, 5, 1, 2)
        self.assertGreaterEqual(p_full["need_bytes"], 114 * GIB)
        self.assertLessEqual(p["need_bytes"], 0.8 * 139 * GIB)
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
        self.assertIn("correctness trials", p["reduced"][-1])
        p = self.plan(100, 10)
        self.assertEqual((p["trials"], p["shifted"], p["input_sets"]), (1, 0, 1))

    def test_nothing_reported_as_cut_that_was_not_asked_for(self):
        p = self.plan(12, 60, shifted=0, input_sets=1)
        self.assertFalse(any("shifted" in r or "timing" in r for r in p["reduced"]), p["reduced"])


class FreshDraws(unittest.TestCase):
    """Timed calls get whole new draws of the problem's inputs, so every structure the problem's
    `get_inputs()` gives (a lower-triangular matrix, a symmetric one) is kept (issue 26)."""

    def tril_draw(self, n=64):
        a = torch.tril(torch.rand(n, n))
        s = torch.rand(n, n)
        return [a, s + s.T]

    def fresh(self, n_draws=20, copy=None):
        sets = [self.tril_draw(), self.tril_draw()]
        draws = kg_timing.draw_pool(self.tril_draw, n_draws, 2 * 64 * 64 * 4, 1 << 30, 5.0)
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

    def test_a_changed_draw_is_seen(self):
        f, _ = self.fresh()
        self.assertTrue(f.intact())
        f.pool[-1][0][3, 1] += 1.0
        self.assertFalse(f.intact())

    def test_the_digest_works_in_bounded_steps(self):
        saved = kg_timing.DIGEST_CHUNK
        kg_timing.DIGEST_CHUNK = 1000
        sizes = []
        real_rand = torch.rand

        def rand(*shape, **kw):
            sizes.append(shape[0] if shape and isinstance(shape[0], int) else shape)
            return real_rand(*shape, **kw)

        try:
            f, _ = self.fresh(n_draws=2)
            f._weight_cache.clear()
            f._weight_bytes = 0
            torch.rand = rand
            try:
                kept = f.digest()
            finally:
                torch.rand = real_rand
            # Kept weights and new ones agree: a digest with nothing kept is the same.
            self.assertEqual(f.digest(), kept)
            f._weight_cache.clear()
            self.assertEqual(f.digest(), kept)
            self.assertTrue(f.intact())
        finally:
            kg_timing.DIGEST_CHUNK = saved
        self.assertTrue(sizes)
        self.assertLessEqual(max(sizes), 1000, "the digest made a weight vector larger than a step")
        # Every step's weights are drawn once and kept on the CPU: 2 originals + 2 draws, two
        # arguments of 4096 elements each, all weighed with the weights of one 4096-element pass.
        self.assertEqual(sum(sizes), 64 * 64)


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

"""The harness's memory decisions, on CPU torch: the GPU budget's plan (runner.plan_memory) and
the fresh-input pool's digest, which must work in bounded steps (a whole-pool float64 copy
crashed KernelBench-size problems on the H200: 16 bytes per element, on the host too).

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

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


runner = load("runner")
kg_timing = load("kg_timing")
GIB = 1 << 30


class PlanMemory(unittest.TestCase):
    def plan(self, set_gib, available_gib, trials=5, shifted=1, input_sets=3):
        return runner.plan_memory(
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


class PoolDigest(unittest.TestCase):
    def fresh(self, n=10_000):
        sets = [[torch.rand(n)], [torch.rand(n)]]
        return kg_timing.FreshInputs(torch, sets), sets

    def test_a_changed_pool_is_seen(self):
        f, _ = self.fresh()
        self.assertTrue(f.intact())
        f.slots[0][0][1234] += 1.0
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
            f, _ = self.fresh()
            torch.rand = rand
            try:
                f.digest()
            finally:
                torch.rand = real_rand
        finally:
            kg_timing.DIGEST_CHUNK = saved
        self.assertTrue(sizes)
        self.assertLessEqual(max(sizes), 1000, "the digest made a weight vector larger than a step")
        self.assertEqual(sum(sizes), 20_000, "every element of the pool is weighed once")


if __name__ == "__main__":
    unittest.main()

"""kg_timing.measure on CPU torch: the timed calls' fresh content lasts through the warm-up; a
model in a worker gets each timed call's sample (what the judge saw of the GPU after it)."""

import time
import unittest

import torch
from harness_modules import load

kg_timing = load("kg_timing")


class WallTimer:
    """The Timer's interface, on the host clock."""

    def time(self, fn):
        t = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t) * 1000.0
        return ms, 0.0, ms


class FreshContentOutlastsTheWarmUp(unittest.TestCase):
    def test_a_fast_kernel_warmed_for_200_ms_still_sees_new_content_on_every_timed_call(self):
        # Each draw is marked by its first element; the kernel records what it saw.
        sets = [[torch.full((4,), -1.0)]]
        draws = [[torch.full((4,), float(k))] for k in range(200)]
        fresh = kg_timing.FreshInputs(torch, sets, draws)
        seen = []

        def kernel(i):
            seen.append(float(sets[i][0][0]))
            return sets[i][0] * 2

        cfg = {"warmup": 3, "warmup_ms": 200.0, "min_samples": 50, "max_samples": 50, "budget_s": 60.0}
        samples = kg_timing.measure({"candidate": kernel}, 1, WallTimer(), cfg, inputs=fresh)
        timed = seen[-50:]
        self.assertEqual(len(samples["candidate"]), 50)
        # A microsecond kernel runs thousands of warm-up calls in 200 ms: they must not use up
        # the 200 draws, or the timed calls would repeat content a value-keyed cache holds.
        self.assertGreater(len(seen), 1000)
        self.assertEqual(len(set(timed)), 50, "timed calls repeated content")
        self.assertTrue(all(v >= 0 for v in timed), "a timed call ran on the set's own content")
        self.assertEqual(fresh.repeats, 0)


class WatchedRemote:
    """`kg_judge.RemoteModel`'s interface to `measure`: timed calls and their samples."""

    def __init__(self, log):
        self.log = log
        self.calls = 0

    def timed_call(self, i, timer):
        self.calls += 1
        self.log.append(("call", self.calls))
        return 1.0, 0.0, 1.0, 1.1, {"ok": True}

    def take_sample(self, sample):
        self.log.append(("sample", self.calls))
        sample["after_reply_ms"] = 0.0


class ARemoteModelsCallsAreWatched(unittest.TestCase):
    def test_every_timed_sample_reaches_the_model_right_after_its_call(self):
        log = []
        model = WatchedRemote(log)
        sets = [[torch.zeros(4)]]
        fresh = kg_timing.FreshInputs(torch, sets, [[torch.ones(4)] for _ in range(30)])
        cfg = {"warmup": 2, "warmup_ms": 0.0, "min_samples": 10, "max_samples": 10, "budget_s": 60.0}
        samples = kg_timing.measure({"candidate": model}, 1, WallTimer(), cfg, inputs=fresh)
        self.assertEqual(len(samples["candidate"]), 10)
        self.assertTrue(all(s["after_reply_ms"] == 0.0 and s["judge_ms"] == 1.1 for s in samples["candidate"]))
        # Each timed call's sample goes to the model right after that call, before the next.
        timed = [k for k, (what, _) in enumerate(log) if what == "sample"]
        self.assertEqual(len(timed), 10)
        self.assertTrue(all(log[k - 1][0] == "call" and log[k - 1][1] == log[k][1] for k in timed))


if __name__ == "__main__":
    unittest.main()

"""The judge's side of the worker boundary on CPU torch: the wire (JSON and shared memfd buffers
across a real socket pair and a real second process), what the judge accepts from a worker's
reply, and the clock check between the worker's reported times and the judge's.

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import json
import os
import socket
import subprocess
import sys
import statistics
import textwrap
import unittest

import torch

from harness_modules import PYDIR, load

kg_wire = load("kg_wire")
kg_judge = load("kg_judge")
kg_judge.kg_wire = kg_wire


def sample(ms, judge_ms):
    return {"ms": ms, "trailing_sync_ms": 0.0, "wall_ms": ms, "judge_ms": judge_ms}


class Wire(unittest.TestCase):
    def test_a_shared_buffer_written_by_another_process_is_seen_by_the_judge(self):
        alloc = kg_wire.SharedAllocator(torch, torch.device("cpu"))
        x, fd = alloc.like(torch.arange(12, dtype=torch.float32).view(3, 4))
        spec = kg_wire.tensor_spec(torch, x, 0)
        judge, worker = socket.socketpair()
        child = textwrap.dedent(
            f"""
            import socket, sys, torch
            sys.path.insert(0, {PYDIR!r})
            sys.path.insert(0, {os.path.dirname(__file__)!r})
            from harness_modules import load
            w = load("kg_wire")
            s = socket.socket(fileno={worker.fileno()})
            msg, fds = w.recv(s, want_fds=True)
            t = w.map_tensor(torch, msg["spec"], fds)
            t.mul_(2)
            w.send(s, {{"ok": True, "sum": float(t.sum())}})
            """
        )
        p = subprocess.Popen([sys.executable, "-c", child], pass_fds=[worker.fileno()])
        worker.close()
        kg_wire.send(judge, {"spec": spec}, [fd])
        reply = kg_wire.recv(judge)
        p.wait(timeout=60)
        judge.close()
        os.close(fd)
        self.assertEqual(reply, {"ok": True, "sum": 132.0})
        self.assertTrue(torch.equal(x, torch.arange(12, dtype=torch.float32).view(3, 4) * 2))

    def test_a_polling_receiver_gets_the_message_and_its_descriptors_whole(self):
        import threading

        a, b = socket.socketpair()
        r, w = os.pipe()
        try:
            # The message comes while the receiver polls, and after its polling ran out.
            for delay, spin_ns in ((0.002, 50_000_000), (0.02, 1_000_000)):
                t = threading.Timer(delay, lambda: kg_wire.send(a, {"op": "bind", "n": 1}, [r]))
                t.start()
                message, fds = kg_wire.recv(b, want_fds=True, spin_ns=spin_ns)
                t.join()
                self.assertEqual(message, {"op": "bind", "n": 1})
                self.assertEqual(len(fds), 1)
                os.write(w, b"x")
                self.assertEqual(os.read(fds[0], 1), b"x")
                os.close(fds[0])
            # A closed peer ends the polling at once and reads as a wire error.
            a.close()
            with self.assertRaises(kg_wire.WireError):
                kg_wire.recv(b, spin_ns=5_000_000_000)
        finally:
            b.close()
            os.close(r)
            os.close(w)

    def test_a_peer_that_closes_or_sends_garbage_is_a_wire_error(self):
        a, b = socket.socketpair()
        b.sendall(b"\x05\x00\x00\x00[[[[[")
        with self.assertRaises(kg_wire.WireError):
            kg_wire.recv(a)
        b.sendall((10**9).to_bytes(4, "little"))
        with self.assertRaises(kg_wire.WireError):
            kg_wire.recv(a)
        b.close()
        with self.assertRaises(kg_wire.WireError):
            kg_wire.recv(a)
        a.close()


class Replies(unittest.TestCase):
    def test_a_worker_cannot_report_a_pass_or_fields_the_judge_did_not_observe(self):
        out = kg_judge._sanitised({"kind": "passed", "trials": 5, "speedup": 9}, "trial 0")
        self.assertEqual(out["kind"], "runtime_error")
        self.assertNotIn("trials", out)
        self.assertNotIn("speedup", out)
        crash = kg_judge._sanitised({"kind": "crash", "reason": "x" * 10000}, "timing")
        self.assertEqual(crash["kind"], "crash")
        self.assertEqual(len(crash["reason"]), 4000)
        self.assertEqual(kg_judge._sanitised("not a dict", "w")["kind"], "runtime_error")

    def test_a_worker_may_report_only_what_it_observes(self):
        self.assertIn("sandbox-denied", kg_judge.WORKER_RULES)
        for rule in ("clock-disagrees", "precision-downgrade", "input-reuse-speedup"):
            self.assertNotIn(rule, kg_judge.WORKER_RULES)

    def test_an_output_the_worker_names_is_stood_in_for_by_its_type_name(self):
        self.assertEqual(type(kg_judge._foreign("LazyTensor")).__name__, "LazyTensor")
        self.assertEqual(type(kg_judge._foreign("not an identifier!")).__name__, "object")


class Ending(unittest.TestCase):
    def test_every_worker_is_asked_to_stop_before_any_is_waited_for(self):
        events = []

        class Worker:
            def __init__(self, name):
                self.name = name

            def ask_to_stop(self):
                events.append(("ask", self.name))

            def wait_stopped(self):
                events.append(("wait", self.name))

        kg_judge.stop_all([Worker("reference"), Worker("candidate"), Worker("base")])
        self.assertEqual([e[0] for e in events], ["ask"] * 3 + ["wait"] * 3)
        self.assertEqual([e[1] for e in events[3:]], ["reference", "candidate", "base"])


class Clock(unittest.TestCase):
    def test_the_judges_figure_replaces_a_worker_clock_that_disagrees(self):
        samples = {"reference": self.series(1.0, 0.05), "candidate": self.series(0.2, 0.85)}
        kg_judge.judge_the_times(samples, "cuda", disagreed=True)
        self.assertAlmostEqual(samples["candidate"][0]["ms"], 1.0)
        self.assertAlmostEqual(samples["reference"][0]["ms"], 1.0)
        # On the CPU too: the row fails on the finding, and shows no speedup the worker claimed.
        cpu = {"reference": self.series(7.0, 0.5), "candidate": self.series(0.1, 7.3)}
        kg_judge.judge_the_times(cpu, "cpu", disagreed=True)
        self.assertAlmostEqual(cpu["candidate"][0]["ms"], 6.9)
        self.assertAlmostEqual(cpu["candidate"][0]["worker_ms"], 0.1)

    def test_a_timer_that_reports_a_share_of_each_call_gains_nothing_below_the_finding(self):
        # 1 ms of work reported as 0.6 ms: inside the finding's slack (the machine's noise and a
        # quarter of the call), but the judge waited the whole millisecond, and the time is
        # raised by all but the machine's noise.
        samples = {"reference": self.series(1.0, 0.05), "candidate": self.series(0.6, 0.45)}
        self.assertEqual(kg_judge.clock_findings(samples), [])
        kg_judge.judge_the_times(samples, "cuda")
        self.assertAlmostEqual(samples["candidate"][0]["ms"], 1.0 - kg_judge.CLOCK_SLACK_MS["cuda"])
        # Half of each call on the CPU: no finding there (its slack is the call's own time), and
        # the time is raised by all but the machine's noise.
        cpu = {"reference": self.series(14.0, 2.0), "candidate": self.series(7.0, 9.0)}
        self.assertEqual(kg_judge.clock_findings(cpu, "cpu"), [])
        kg_judge.judge_the_times(cpu, "cpu")
        self.assertAlmostEqual(cpu["candidate"][0]["ms"], 14.0 - kg_judge.CLOCK_SLACK_MS["cpu"])

    def test_an_honest_worker_keeps_its_own_figures(self):
        samples = {"reference": self.series(1.0, 0.05), "candidate": self.series(0.5, 0.07)}
        kg_judge.judge_the_times(samples, "cuda")
        self.assertEqual([s["ms"] for s in samples["candidate"]], [0.5] * 40)

    def series(self, ms, gap, n=40):
        return [sample(ms, ms + gap) for _ in range(n)]

    def test_an_honest_worker_agrees_with_the_judge(self):
        samples = {"reference": self.series(1.0, 0.05), "candidate": self.series(0.5, 0.06)}
        self.assertEqual(kg_judge.clock_findings(samples), [])

    def test_a_timer_scaled_by_a_fifth_disagrees(self):
        # 1 ms of real work reported as 0.2 ms: the judge waited the whole millisecond.
        samples = {"reference": self.series(1.0, 0.05), "candidate": self.series(0.2, 0.85)}
        [(rule, severity, message)] = kg_judge.clock_findings(samples)
        # On the CPU the slack is wider: half a millisecond behind a 0.2 ms call is within it...
        near = {"reference": self.series(1.0, 0.05), "candidate": self.series(0.2, 0.55)}
        self.assertEqual(kg_judge.clock_findings(near, "cpu"), [])
        self.assertEqual([f[:2] for f in kg_judge.clock_findings(near)], [("clock-disagrees", "error")])
        # ...and 5 ms hidden behind a 1 ms call is not.
        cpu = {"reference": self.series(5.0, 0.2), "candidate": self.series(1.0, 4.2)}
        self.assertEqual([f[:2] for f in kg_judge.clock_findings(cpu, "cpu")], [("clock-disagrees", "error")])
        self.assertEqual((rule, severity), ("clock-disagrees", "error"))
        self.assertIn("candidate", message)

    def test_on_the_cpu_scheduling_delays_in_most_calls_are_not_hidden_work(self):
        # A loaded machine: half the calls of each series wait 6 ms for a wake-up, at random.
        def noisy(ms, gap, n=40):
            return [sample(ms, ms + gap + (6.0 if (k * 7) % 3 else 0.0)) for k in range(n)]

        honest = {"reference": noisy(2.0, 2.5), "candidate": noisy(2.5, 2.5)[5:] + self.series(2.5, 2.5, 5)}
        self.assertEqual(kg_judge.clock_findings(honest, "cpu"), [])
        # A heavier load on the candidate's calls than on the reference's (5 ms more in every
        # call): within the reference's own scatter (6 ms between its quartiles here), which a
        # fixed slack alone (1 ms plus the call's own 2.5) would not be.
        loaded = {"reference": noisy(2.0, 2.5), "candidate": noisy(2.5, 7.5)}
        self.assertEqual(kg_judge.clock_findings(loaded, "cpu"), [])
        spread = kg_judge.CLOCK_SLACK_SPREAD["cpu"]
        try:
            kg_judge.CLOCK_SLACK_SPREAD["cpu"] = 0.0
            self.assertEqual(len(kg_judge.clock_findings(loaded, "cpu")), 1)
        finally:
            kg_judge.CLOCK_SLACK_SPREAD["cpu"] = spread
        # The same noise, and 10 ms of work after the timer in every call: caught.
        hook = {"reference": noisy(2.0, 2.5), "candidate": noisy(0.1, 12.5)}
        self.assertEqual([f[:2] for f in kg_judge.clock_findings(hook, "cpu")], [("clock-disagrees", "error")])
        self.assertIn("25th percentile", kg_judge.clock_findings(hook, "cpu")[0][2])

    def test_on_a_loaded_gpu_machine_the_gap_noise_of_few_calls_is_not_hidden_work(self):
        # Builds and CPU lanes on every core: wake-ups add 0 to 0.6 ms to any call's round trip,
        # and a fast kernel stops after a dozen rounds. The candidate's median gap lands 0.2 ms
        # above the reference's by chance (seen on an H100 for honest CUDA kernels).
        def loaded(ms, extra, n=12):
            return [sample(ms, ms + 0.6 + extra + 0.05 * ((k * 5) % 12)) for k in range(n)]

        honest = {"reference": loaded(0.05, 0.0), "candidate": loaded(0.05, 0.2)}
        self.assertEqual(kg_judge.clock_findings(honest), [])
        # A quiet machine: the reference's gaps are steady, and 0.5 ms of work after the timer
        # in every call is caught (the profile-hook cheat's class; below `CLOCK_SLACK_MS` honest
        # workers' round trips differ as much, round 11).
        quiet = {"reference": self.series(0.6, 0.6), "candidate": self.series(0.001, 1.1)}
        self.assertEqual([f[:2] for f in kg_judge.clock_findings(quiet)], [("clock-disagrees", "error")])

    def test_a_median_on_the_high_side_of_a_two_mode_round_trip_is_not_hidden_work(self):
        # The round trip has two modes (0.56 and 0.80 ms: a wake-up or not). The reference's calls
        # landed low 16 times in 20 (a narrow interquartile range); the candidate's, 11 times
        # in 20 high: its median gap is 0.2 ms above, past the slack, by chance alone (an honest
        # Triton ReLU's repeated calls on an H100, 0.18 ms over against 0.15 allowed).
        def two_modes(ms, high, n=20, extra=0.0):
            return [sample(ms, ms + extra + (0.80 if k < high else 0.56) + 0.002 * ((k * 7) % n)) for k in range(n)]

        honest = {"reference": two_modes(0.05, 4), "candidate_repeated": two_modes(0.048, 11)}
        gap = statistics.median(s["judge_ms"] - s["ms"] for s in honest["candidate_repeated"])
        ref_gap = statistics.median(s["judge_ms"] - s["ms"] for s in honest["reference"])
        self.assertGreater(gap - ref_gap, 0.15)
        self.assertEqual(kg_judge.clock_findings(honest), [])
        # The same round trip with 0.5 ms of work after the timer in every call: every gap moves.
        hook = {"reference": two_modes(0.05, 4), "candidate_repeated": two_modes(0.001, 4, extra=0.5)}
        self.assertEqual([f[:2] for f in kg_judge.clock_findings(hook)], [("clock-disagrees", "error")])
        # Work hidden in 11 calls of 20: no shift of the whole series, but a median gap past any
        # honest worker's offset (`CLOCK_RAISE_ALWAYS_MS`), and the judge's clock sets those
        # times: no speed gained.
        most = {
            "reference": two_modes(0.05, 4),
            "candidate_repeated": two_modes(0.001, 4)[:9] + two_modes(0.001, 4, extra=0.8)[9:],
        }
        kg_judge.judge_the_times(most, "cuda")
        self.assertGreater(statistics.median(s["ms"] for s in most["candidate_repeated"]), 0.2)

    def test_an_honest_series_keeps_its_times_where_its_median_round_trip_fell_high(self):
        # An A/A eval on an H100 (results/gpu-proof/h100-round10-call3-aa-off/aa-after-off-10-aa.json):
        # every worker's kernel took 0.064 ms, and the round trips scattered between 0.42 and
        # 1.15 ms. The candidate's median gap landed 0.17 ms above the reference's by chance;
        # raising its times by that made identical kernels 14% "slower".
        gaps = {
            "reference": [0.547, 0.58, 0.678, 0.753, 0.482, 0.545, 0.578, 0.724, 0.795, 0.619],
            "candidate": [0.797, 0.422, 0.69, 0.425, 0.793, 0.958, 1.153, 0.758, 0.572, 0.78],
            "candidate_repeated": [1.052, 0.518, 0.848, 0.802, 1.018, 0.574, 0.783, 0.611, 0.594, 1.051],
            "base": [0.836, 0.964, 0.799, 0.574, 0.573, 0.975, 0.583, 0.578, 0.698, 0.705],
        }
        samples = {name: [sample(0.064, 0.064 + g) for g in gs] for name, gs in gaps.items()}
        ref_gap, spread = kg_judge._reference_gap(samples, "cuda")
        self.assertGreater(statistics.median(gaps["candidate"]) - ref_gap, 0.15)
        self.assertEqual(kg_judge.clock_findings(samples), [])
        kg_judge.judge_the_times(samples, "cuda")
        for name in ("candidate", "candidate_repeated", "base"):
            self.assertEqual([s["ms"] for s in samples[name]], [0.064] * 10, name)

    def test_the_recorded_a_a_evals_that_went_wrong_replay_to_their_true_verdicts(self):
        # Six evals of round 10's third H100 call and seven of round 11's whose verdict was wrong
        # or far from 1, with the worker's own times restored: the A/A ones are not changed by
        # the judge's clock (no finding, medians within 2%), the slowed ones (3% of GPU sleep,
        # 5-8% measured) stay slower. In round 11 the candidate's and the base's workers (the
        # same kernel as the reference's) had round trips up to 0.27 ms longer than the
        # reference worker's for a whole eval (p = 2e-5): `CLOCK_SLACK_MS`.
        root = os.path.join(PYDIR, "..", "..", "..", "results", "gpu-proof")
        paths = []
        for folder, count in (("h100-round10-call3-aa-off", 6), ("h100-round11-aa-off", 7)):
            names = sorted(n for n in os.listdir(os.path.join(root, folder)) if n.endswith(".json"))
            self.assertEqual(len(names), count, folder)
            paths += [os.path.join(root, folder, n) for n in names]
        for path in paths:
            name = os.path.basename(path)
            with open(path) as f:
                samples = json.load(f)["timing"]["samples"]
            for series in samples.values():
                for s in series:
                    if "worker_ms" in s:
                        s["ms"] = s.pop("worker_ms")
            clock = kg_judge.clock_findings(samples)
            kg_judge.judge_the_times(samples, "cuda", bool(clock))
            ratio = statistics.median(s["ms"] for s in samples["candidate"]) / statistics.median(s["ms"] for s in samples["base"])
            with self.subTest(eval=name):
                self.assertEqual(clock, [])
                if name.endswith("-aa.json"):
                    self.assertLess(abs(ratio - 1), 0.02)
                else:
                    self.assertGreater(ratio, 1.03)

    def test_the_rank_test_sees_a_shift_not_a_median(self):
        self.assertLess(kg_judge._shift_p([1.0] * 10, [0.5] * 10), 1e-4)
        # 0.3 ms hidden in each of 12 calls, one of them in the reference's range: still a shift.
        ref = [0.6 + 0.01 * k for k in range(12)]
        hook = [0.65] + [0.9 + 0.01 * k for k in range(1, 12)]
        self.assertLess(kg_judge._shift_p(hook, ref), kg_judge.CLOCK_SHIFT_P)
        self.assertGreater(kg_judge._shift_p([0.5] * 10, [0.5] * 10), 0.4)
        self.assertGreater(kg_judge._shift_p([0.5] * 10, [1.0] * 10), 0.99)

    def test_a_time_longer_than_the_judge_waited_is_impossible(self):
        samples = {"reference": self.series(1.0, 0.05), "candidate": [sample(2.0, 1.0)] * 10}
        [(rule, _, message)] = kg_judge.clock_findings(samples)
        self.assertEqual(rule, "clock-disagrees")
        self.assertIn("tampered", message)

    def test_no_reference_on_the_same_path_means_no_verdict_on_the_clock(self):
        self.assertEqual(kg_judge.clock_findings({"candidate": self.series(0.2, 0.85)}), [])


if __name__ == "__main__":
    unittest.main()


class FakeGpuWatch:
    """`kernelgate_harness.GpuWatch`'s interface: each probe's (start delay, stolen) in ms is
    given by the test, after 41 idle ones for the calibration."""

    def __init__(self, probes=(), idle=0.008):
        self.probes = [(idle, 0.0)] * 41 + list(probes)
        self.running = False
        self.log = []

    def start(self, quiet_us=None):
        assert not self.running
        self.running = True
        self.log.append("start")

    def worker_stopped(self):
        self.log.append("worker_stopped")

    def stop(self):
        assert self.running
        self.running = False
        start_ms, stolen = self.probes.pop(0)
        return (stolen, int(stolen > 0), start_ms, 0.001, 1.0, "quiet")


class FakeWorker:
    role = "candidate"

    def __init__(self, can_pause=True, log=None):
        self.can_pause = can_pause
        self.paused = False
        self.log = log

    def pause(self):
        if self.log is not None:
            self.log.append("pause")
        self.paused = self.can_pause
        return self.can_pause


def observed(watch, worker=None):
    watch.after_reply(worker or FakeWorker())
    s = sample(1.0, 1.2)
    watch.take_sample(s)
    return s


class GpuWatchAfterReplies(unittest.TestCase):
    def test_a_probe_goes_out_before_the_worker_is_stopped_and_until_one_starts_at_once(self):
        gpu = FakeGpuWatch(probes=[(0.17, 0.0), (0.4, 0.0), (0.3, 0.05), (0.009, 0.0)])
        watch = kg_judge.GapWatch(gpu, window_us=1.0)
        self.assertAlmostEqual(watch.idle_start_ms, 0.008)
        worker = FakeWorker(log=gpu.log)
        s = observed(watch, worker)
        self.assertTrue(worker.paused)
        # The first probe is launched before the pause: work the worker left shows in its wait.
        first_pause = gpu.log.index("pause")
        self.assertEqual(gpu.log[first_pause - 2 : first_pause], ["start", "worker_stopped"])
        self.assertEqual(s["first_wait_ms"], 0.17)
        self.assertEqual(s["watch_probes"], 4)
        # The waits of the later probes (past the idle start) and what others took during them.
        self.assertAlmostEqual(s["after_reply_ms"], (0.4 - 0.008) + (0.3 - 0.008 + 0.05))
        self.assertEqual(s["ms"], 1.0, "charged after the timing, against the reference's first waits")
        self.assertEqual(gpu.probes, [])

    def test_the_first_wait_is_charged_beyond_the_reference_workers(self):
        firsts = [0.16, 0.17, 0.18, 0.17, 0.19, 0.17, 0.16, 0.18, 0.17, 0.175]
        samples = {
            "reference": [dict(sample(1.0, 1.2), first_wait_ms=f, after_reply_ms=0.0) for f in firsts],
            "candidate": [dict(sample(0.5, 0.7), first_wait_ms=f + 1.3, after_reply_ms=0.2) for f in firsts],
            "base": [dict(sample(1.0, 1.2), first_wait_ms=f + 0.01, after_reply_ms=0.0) for f in firsts],
        }
        kg_judge.charge_work_after_reply(samples)
        ref = sorted(firsts)
        allowed = ref[5] + 3 * (ref[int(0.9 * 9)] - ref[5]) + 0.010
        for s, f in zip(samples["candidate"], firsts):
            self.assertAlmostEqual(s["after_reply_ms"], 0.2 + max(0.0, f + 1.3 - allowed))
            self.assertAlmostEqual(s["ms"], 0.5 + s["after_reply_ms"])
            self.assertAlmostEqual(s["judge_ms"], 0.7 + s["after_reply_ms"])
        # Within the reference's own scatter: nothing charged, the honest times kept.
        self.assertTrue(all(s["ms"] == 1.0 and s["after_reply_ms"] == 0.0 for s in samples["base"]))
        self.assertTrue(all(s["ms"] == 1.0 for s in samples["reference"]))
        found = kg_judge.work_after_reply(samples)
        self.assertEqual([(r, sev) for r, sev, _ in found], [("work-after-reply", "error")])
        self.assertIn("the candidate's GPU work went on", found[0][2])

    def test_samples_the_watch_did_not_see_are_left_alone(self):
        samples = {
            "reference": [sample(1.0, 1.2)],
            "candidate": [sample(0.5, 0.7)],
            "reference_before_import": [sample(1.0, 1.1)],
        }
        kg_judge.charge_work_after_reply(samples)
        self.assertEqual(samples["candidate"][0]["ms"], 0.5)
        self.assertEqual(kg_judge.work_after_reply(samples), [])

    def test_a_gpu_that_never_goes_quiet_after_a_reply_fails_the_call(self):
        watch = kg_judge.GapWatch(FakeGpuWatch(probes=[(0.2, 0.0)] + [(2.0, 0.0)] * 50), window_us=1.0, cap_ms=0.0)
        with self.assertRaises(kg_judge.WorkerFailed) as failed:
            watch.after_reply(FakeWorker())
        self.assertEqual(failed.exception.outcome["kind"], "runtime_error")
        self.assertIn("after its call replied", failed.exception.outcome["message"])

    def test_a_worker_the_judge_cannot_stop_is_not_timed(self):
        watch = kg_judge.GapWatch(FakeGpuWatch(probes=[(0.17, 0.0)]), window_us=1.0)
        with self.assertRaises(kg_judge.WorkerFailed) as failed:
            watch.after_reply(FakeWorker(can_pause=False))
        self.assertEqual(failed.exception.outcome["kind"], "harness_error")

    def test_an_honest_call_costs_two_probes_and_no_charge(self):
        watch = kg_judge.GapWatch(FakeGpuWatch(probes=[(0.17, 0.0), (0.009, 0.0)]), window_us=1.0)
        s = observed(watch)
        self.assertEqual((s["after_reply_ms"], s["watch_probes"]), (0.0, 2))
        s2 = sample(1.0, 1.2)
        watch.take_sample(s2)  # a sample with no call watched since: nothing added
        self.assertNotIn("after_reply_ms", s2)

    def test_on_a_cpu_the_worker_is_only_stopped(self):
        watch = kg_judge.GapWatch.for_device(torch.device("cpu"))
        worker = FakeWorker()
        watch.after_reply(worker)
        self.assertTrue(worker.paused)
        s = sample(1.0, 1.2)
        watch.take_sample(s)
        self.assertEqual(s, sample(1.0, 1.2))
        with self.assertRaises(kg_judge.WorkerFailed):
            watch.after_reply(FakeWorker(can_pause=False))


class Pausing(unittest.TestCase):
    def _state(self, pid):
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    def test_a_paused_worker_runs_no_thread_until_it_is_asked_again(self):
        # A process with a busy thread besides its main one, as work launched from a thread is.
        child = textwrap.dedent(
            """
            import sys, threading, time
            n = [0]
            def spin():
                while True:
                    n[0] += 1
            threading.Thread(target=spin, daemon=True).start()
            while True:
                sys.stdout.write(f"{n[0]}\\n"); sys.stdout.flush()
                time.sleep(0.01)
            """
        )
        p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        try:
            p.stdout.readline()
            worker = kg_judge.Worker.__new__(kg_judge.Worker)
            worker.proc, worker.paused = p, False
            self.assertTrue(worker.pause())
            self.assertTrue(worker.paused)
            self.assertEqual(self._state(p.pid), "T")
            tasks = os.listdir(f"/proc/{p.pid}/task")
            self.assertGreaterEqual(len(tasks), 2)
            for tid in tasks:
                with open(f"/proc/{p.pid}/task/{tid}/stat") as f:
                    self.assertEqual(f.read().rsplit(")", 1)[1].split()[0], "T", "every thread stops")
            worker.resume()
            self.assertFalse(worker.paused)
            self.assertIn(self._state(p.pid), ("R", "S"))
            first = int(p.stdout.readline())
            # Drain what was written before the pause, then see the count move on.
            later = first
            for _ in range(50):
                later = int(p.stdout.readline())
                if later > first:
                    break
            self.assertGreater(later, first)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()

    def test_pausing_a_worker_that_has_ended_returns(self):
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        worker = kg_judge.Worker.__new__(kg_judge.Worker)
        worker.proc, worker.paused = p, False
        worker.pause()  # no hang on a process that is gone
        worker.resume()


class ForkedWorkers(unittest.TestCase):
    """`kg_judge.adopt`: the workers `kernelgate_harness.main` forks, held as `Popen` is."""

    def _fork(self, body):
        parent, child = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            parent.close()
            try:
                body(child)
            finally:
                os._exit(7)
        child.close()
        ((proc, sock),) = kg_judge.adopt([(pid, parent.detach())])
        return proc, sock

    def test_an_exit_is_seen_with_its_status_and_the_pair_still_speaks(self):
        proc, sock = self._fork(lambda s: s.sendall(b"hello"))
        self.assertEqual(sock.recv(5), b"hello")
        self.assertEqual(proc.wait(timeout=10), 7)
        self.assertEqual(proc.poll(), 7)
        sock.close()

    def test_a_worker_that_does_not_end_times_out_and_is_killed(self):
        import time

        proc, sock = self._fork(lambda s: time.sleep(60))
        with self.assertRaises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
        self.assertIsNone(proc.poll())
        proc.kill()
        self.assertEqual(proc.wait(timeout=10), -9, "killed: a negative signal number, as Popen says")
        proc.kill()  # already gone: nothing to do
        sock.close()

    def test_a_paused_forked_worker_is_stopped_and_woken(self):
        import time

        proc, sock = self._fork(lambda s: time.sleep(60))
        worker = kg_judge.Worker.__new__(kg_judge.Worker)
        worker.proc, worker.paused = proc, False
        self.assertTrue(worker.pause())
        with open(f"/proc/{proc.pid}/stat") as f:
            self.assertEqual(f.read().rsplit(")", 1)[1].split()[0], "T")
        self.assertIsNone(proc.poll(), "a stop is not an exit")
        worker.resume()
        proc.kill()
        proc.wait(timeout=10)
        sock.close()

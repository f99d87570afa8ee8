"""What the judge's GPU watch (`kernelgate_harness.GpuWatch`, crates/harness/src/watch.rs) sees
of another process's GPU work, and how long another process's work waits while the watch runs
(the time slice between contexts, which sets the watch's quiet time).

Process A (a stand-in worker) launches GPU work of a given length and says so at once; process B
(the judge) runs the watch. Prints, per case: A's work by its own events, what the watch charged
(the time it did not run, plus its start delay over the idle one), its jumps and start delay.
Then: how long A's tiny kernel takes, launch to completion on A's clock, while the watch runs
(a time slice, at most) and while the GPU is idle.
Usage:   PYTHONPATH=dir-with-kernelgate_harness python3 scripts/gpu-watch.py [REPS]
"""

import multiprocessing as mp
import statistics
import sys
import time


def worker(conn):
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    per_ms = 10_000_000 / start.elapsed_time(end)
    conn.send(per_ms)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg[0] == "work":
            _, ms, pieces, delay_us = msg
            torch.cuda.synchronize()
            conn.send("ready")
            if delay_us:
                t = time.perf_counter()
                while (time.perf_counter() - t) * 1e6 < delay_us:
                    pass
            start.record()
            for _ in range(pieces):
                torch.cuda._sleep(max(1, int(per_ms * ms / pieces)))
            end.record()
            conn.send("launched")
            end.synchronize()
            conn.send(start.elapsed_time(end))
        elif msg[0] == "tiny":
            _, reps = msg
            walls = []
            for _ in range(reps):
                t = time.perf_counter_ns()
                torch.cuda._sleep(100)
                torch.cuda.synchronize()
                walls.append((time.perf_counter_ns() - t) / 1e6)
                time.sleep(0.0003)
            conn.send(walls)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=worker, args=(there,))
    p.start()
    import torch
    import kernelgate_harness as h

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    per_ms = here.recv()
    print(f"# {torch.cuda.get_device_name()}; torch.cuda._sleep: {per_ms:.0f} cycles per ms")

    def watch_once(w, work=None):
        """A's work (ms, pieces, delay_us) launched, then the watch started at once."""
        if work is not None:
            here.send(("work",) + work)
            assert here.recv() == "ready"
            if work[2] == 0:
                assert here.recv() == "launched"
        w.start()
        if work is not None and work[2] != 0:
            assert here.recv() == "launched"
        w.worker_stopped()
        seen = w.stop()
        own = here.recv() if work is not None else 0.0
        return seen, own

    idle = h.GpuWatch("cuda", gap_us=4.0, quiet_us=50.0)
    starts = []
    for _ in range(200):
        (stolen, jumps, start_ms, watched, pace, state), _ = watch_once(idle)
        starts.append(start_ms)
    starts.sort()
    print(
        f"idle watch (200): start median {1e3 * statistics.median(starts):.1f} us, p90 {1e3 * starts[180]:.1f}, "
        f"p99 {1e3 * starts[198]:.1f}, max {1e3 * starts[-1]:.1f}"
    )
    w = h.GpuWatch("cuda", gap_us=4.0, quiet_us=50.0)
    w.start()
    time.sleep(0.5)
    w.worker_stopped()
    stolen, jumps, start_ms, watched, pace, state = w.stop()
    print(f"idle watch for 0.5 s: {jumps} jumps, {1e3 * stolen:.1f} us charged, pace max {pace:.2f} us")

    # A queued work waits while B holds the GPU; B goes idle for W us, then probes: does A's
    # work get its turn in W (the probe waits), or does B keep the GPU (the probe starts at once)?
    print("\n## how long the GPU must be left idle for another context's queued work to take its turn")
    long_watch = h.GpuWatch("cuda", gap_us=4.0, quiet_us=1.0)
    probe = h.GpuWatch("cuda", gap_us=4.0, quiet_us=1.0)
    for window_us in (0, 10, 25, 50, 100, 200):
        waits = []
        for _ in range(reps):
            long_watch.start()
            here.send(("work", 0.5, 1, 0))
            assert here.recv() == "ready"
            assert here.recv() == "launched"
            time.sleep(0.0002)  # A's work is queued behind the watch
            long_watch.worker_stopped()
            long_watch.stop()
            until = time.perf_counter_ns() + int(window_us * 1e3)
            while time.perf_counter_ns() < until:
                pass
            probe.start(quiet_us=0.0)
            probe.worker_stopped()
            waits.append(probe.stop()[2])
            here.recv()
        print(f"idle window {window_us:>4} us: probe start median {1e3 * statistics.median(waits):7.1f} us, min {1e3 * min(waits):7.1f}, max {1e3 * max(waits):7.1f}")

    # The judge's protocol (kg_judge.GapWatch) against work A leaves queued at its "reply".
    sys.path.insert(0, "crates/harness/python")
    import kg_judge

    gap = kg_judge.GapWatch(h.GpuWatch("cuda", gap_us=kg_judge.WATCH_GAP_US))
    stand_in = kg_judge.Worker.__new__(kg_judge.Worker)
    stand_in.proc, stand_in.paused, stand_in.role = p, False, "stand-in"
    print(
        f"\n## kg_judge.GapWatch (window {kg_judge.WATCH_WINDOW_US} us, clean {kg_judge.WATCH_CLEAN_US} us); idle start {1e3 * gap.idle_start_ms:.1f} us"
    )
    print(f"{'A: ms x pieces':>16} {'A events':>9} {'first wait':>11} {'later':>8} {'probes':>7} {'charged':>8} {'protocol ms':>12}")
    rows = []
    for ms, pieces in [(0.0, 1), (0.0, 1), (0.02, 1), (0.05, 1), (0.2, 1), (1.0, 1), (5.0, 1), (20.0, 1), (5.0, 100)]:
        firsts, laters, probes_l, owns, walls = [], [], [], [], []
        for _ in range(reps):
            stand_in.resume()
            here.send(("work", ms, pieces, 0))
            assert here.recv() == "ready"
            assert here.recv() == "launched"
            t = time.perf_counter_ns()
            gap.after_reply(stand_in)
            walls.append((time.perf_counter_ns() - t) / 1e6)
            seen = {}
            gap.take_sample(seen)
            stand_in.resume()
            owns.append(here.recv())
            firsts.append(seen["first_wait_ms"])
            laters.append(seen["after_reply_ms"])
            probes_l.append(seen["watch_probes"])
        rows.append((ms, pieces, owns, firsts, laters, probes_l, walls))
    honest = sorted(rows[0][3] + rows[1][3])
    med = honest[len(honest) // 2]
    allowed = med + kg_judge.WATCH_FIRST_SPREAD * (honest[int(0.9 * (len(honest) - 1))] - med) + kg_judge.WATCH_FIRST_SLACK_US / 1e3
    for ms, pieces, owns, firsts, laters, probes_l, walls in rows:
        charged = [l + max(0.0, f - allowed) for f, l in zip(firsts, laters)]
        print(
            f"{ms:>9.2f} x {pieces:<4} {statistics.median(owns):>9.3f} {statistics.median(firsts):>11.3f} {statistics.median(laters):>8.3f} "
            f"{statistics.median(probes_l):>7.0f} {statistics.median(charged):>8.3f} {statistics.median(walls):>12.3f}"
        )
    print(f"(first waits of the work-free calls: median {1e3 * med:.1f} us, allowed {1e3 * allowed:.1f} us)")
    stand_in.resume()

    # How long A's tiny kernel waits while the watch runs: a time slice at most.
    w = h.GpuWatch("cuda", gap_us=4.0, quiet_us=200e3)
    here.send(("tiny", reps * 5))
    idle_walls = here.recv()
    w.start()
    here.send(("tiny", reps * 5))
    busy_walls = here.recv()
    w.worker_stopped()
    stolen, jumps, start_ms, watched, pace, quiet = w.stop()
    idle_walls.sort()
    busy_walls.sort()
    print(
        f"\nA's tiny kernel, launch to done: GPU idle median {statistics.median(idle_walls):.3f} ms max {idle_walls[-1]:.3f}; "
        f"while the watch runs median {statistics.median(busy_walls):.3f} ms, min {busy_walls[0]:.3f}, max {busy_walls[-1]:.3f} "
        f"(watch: {jumps} jumps, {stolen:.3f} ms charged over {watched:.1f} ms)"
    )
    here.send(None)
    p.join()


if __name__ == "__main__":
    main()

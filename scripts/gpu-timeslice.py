"""How long a kernel of one process waits while another process's context has GPU work queued:
the question behind the judge's clock between calls (docs/security.md, the work a worker leaves
running after its reply). Process A (the "worker") launches GPU work of a given length and says
so at once, without waiting; process B (the "judge") then launches one tiny kernel and waits for
it. If B waits for all of A's work, a kernel of the judge's own after each reply puts left-over
work on its clock; if B waits one time slice, it does not (round 11: `Runner.settle` did not).

Prints one line per case: A's work (one long kernel, or many short ones), B's wait for a tiny
kernel (median and max of REPS), B's events around a 2 ms kernel of its own launched the same
way (a probe: if A's work shares the GPU with it in time slices, the probe's elapsed time grows
by the share A got, which is what a judge would read), and A's work by its own events.
Usage:   python3 scripts/gpu-timeslice.py [REPS]      (a GPU machine; about 20 s)
"""

import multiprocessing as mp
import statistics
import sys
import time


def worker(conn):
    import torch

    torch.cuda.init()
    x = torch.zeros(1, device="cuda")
    # Cycles per ms of torch.cuda._sleep, calibrated with the worker's own events.
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
        ms, pieces = msg
        torch.cuda.synchronize()
        start.record()
        for _ in range(pieces):
            torch.cuda._sleep(int(per_ms * ms / pieces))
        end.record()
        conn.send("launched")  # at once: the work is queued, not done
        end.synchronize()
        x.add_(1)
        conn.send(start.elapsed_time(end))


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=worker, args=(there,))
    p.start()
    import torch

    probe = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    per_ms = here.recv()
    print(f"# {torch.cuda.get_device_name()}; torch.cuda._sleep: {per_ms:.0f} cycles per ms")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe_ms = 2.0
    print(
        f"{'A: work (ms) x pieces':>24} {'B: wait median (ms)':>20} {'B: wait max (ms)':>17} "
        f"{'B: 2 ms probe (ms)':>19} {'A: events (ms)':>15}"
    )
    for ms, pieces in [(0.0, 1), (0.5, 1), (1.0, 1), (2.0, 1), (5.0, 1), (10.0, 1), (20.0, 1), (5.0, 100), (20.0, 400)]:
        waits, probes, own = [], [], []
        for _ in range(reps):
            here.send((ms, pieces))
            assert here.recv() == "launched"
            t0 = time.perf_counter_ns()
            probe.add_(1)
            torch.cuda.synchronize()
            waits.append((time.perf_counter_ns() - t0) / 1e6)
            own.append(here.recv())
            here.send((ms, pieces))
            assert here.recv() == "launched"
            start.record()
            torch.cuda._sleep(int(per_ms * probe_ms))
            end.record()
            end.synchronize()
            probes.append(start.elapsed_time(end))
            here.recv()
        print(
            f"{ms:>17.1f} x {pieces:<4} {statistics.median(waits):>20.3f} {max(waits):>17.3f} "
            f"{statistics.median(probes):>19.3f} {statistics.median(own):>15.3f}"
        )
    here.send(None)
    p.join()


if __name__ == "__main__":
    main()

"""Which C++ compiles a test run makes, and their CPU time (issue 51: where the suite's time goes).

Run beside a test run; samples the compiler proper (`cc1plus`) twice a second until it gets
SIGTERM, then prints one row per extension (its directory's name, the `-O` level, how many
compiles, their CPU seconds) and the total. A compile of a torch extension takes 9 s or more of
CPU on these machines, so none is missed between samples; the CPU time is each process's last
sampled `utime + stime`, a little under the true figure.
    python3 scripts/compile-watch.py > compiles.txt &  ...  kill %1
"""

import os
import re
import signal
import sys
import time
from collections import defaultdict

TICK = os.sysconf("SC_CLK_TCK")
seen = {}  # pid -> [extension, -O level, cpu seconds]
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGINT, on_term)


def sample():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            if "(cc1plus)" not in stat:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            if pid not in seen:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
                args = [a.decode(errors="replace") for a in args]
                source = next((a for a in args if re.search(r"\.(cpp|cc|cxx)$", a)), "?")
                level = next((a for a in reversed(args) if re.fullmatch(r"-O[0-3sg]?", a)), "-O0")
                seen[pid] = [os.path.basename(os.path.dirname(source)) or source, level, cpu]
            else:
                seen[pid][2] = cpu
        except (OSError, IndexError, ValueError):
            continue


while not stop:
    sample()
    time.sleep(0.5)

rows = defaultdict(lambda: [0, 0.0])
for name, level, cpu in seen.values():
    rows[(name, level)][0] += 1
    rows[(name, level)][1] += cpu
total = sum(cpu for _, _, cpu in seen.values())
print(f"\n{len(seen)} C++ compiles, {total:.0f} s of CPU")
print(f"{'compiles':>8}  {'cpu s':>7}  level  extension")
for (name, level), (n, cpu) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
    print(f"{n:8d}  {cpu:7.1f}  {level:5}  {name}")
sys.stdout.flush()

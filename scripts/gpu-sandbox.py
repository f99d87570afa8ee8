"""The sandbox's escape fixtures on a GPU machine (issue 47): each escape under
tests/fixtures/eval/kernels/sandbox/ and the honest kernels beside them through
`kernelgate eval --device cuda`, side by side as a pull request's jobs run, with the stand-ins the
CPU test (tests/it/sandbox.rs) sets up: a secret outside the checkout, a TCP and a Unix listener,
workflow secrets in kernelgate's environment, a descriptor open across the exec, another build in
torch's own extensions directory. One line per fixture: the row's outcome, its exit code, whether
anything got out (a marker on its stdout, a file it wrote, a listener that heard it) and the
sandbox's findings.

  python3 scripts/gpu-sandbox.py OUT_DIR        (KERNELGATE_BIN: default target/device/kernelgate)

A benchmark-style proof for the device, not a test: the CPU test is the one CI runs.
"""

import concurrent.futures
import json
import os
import pathlib
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent
FX = ROOT / "tests" / "fixtures" / "eval"
BIN = os.environ.get("KERNELGATE_BIN", str(ROOT / "target" / "device" / "kernelgate"))
TOKEN = "ghs_kgFakeWorkflowToken0123456789abcdef"
MARKERS = ("STOLEN", "WROTE", "CONNECTED", "LISTED", "=widened", "ptrace=0", TOKEN)
SECRETS = {"DEPLOY_PAT": "kg-secret-pat", "API_JWT": "kg-secret-jwt", "DB_PASS": "kg-secret-pass"}


def listen(sock, address, key, heard):
    """A listener on `address` that records in `heard[key]` what a connection sent."""
    sock.bind(address)
    sock.listen(8)
    sock.settimeout(0.5)

    def loop():
        while not heard.get("stop"):
            try:
                c, _ = sock.accept()
                heard[key] = c.recv(64) or b"connected"
                c.close()
            except OSError:
                pass

    threading.Thread(target=loop, daemon=True).start()
    return sock.getsockname()


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="kg-gpu-sandbox-"))
    checkout = work / "checkout"
    checkout.mkdir()
    (checkout / "kernelgate.toml").write_text("")
    in_checkout = checkout / "private.txt"
    in_checkout.write_text("checkout-secret-5150")
    secret = work / "outside.txt"
    secret.write_text("outside-secret-8086")
    inherited = work / "inherited.txt"
    inherited.write_text("")
    torch_dir = work / "torch-ext"
    victim = torch_dir / "kg_victim_ext" / "kg_victim_ext.so"
    victim.parent.mkdir(parents=True)
    victim.write_text("trusted build")
    ext = work / "ext"
    heard = {}
    port = listen(socket.socket(), ("127.0.0.1", 0), "tcp", heard)[1]
    sock = str(work / "listener.sock")
    listen(socket.socket(socket.AF_UNIX), sock, "unix", heard)
    dgram = str(work / "listener.dgram")
    dgram_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram_sock.bind(dgram)
    dgram_sock.settimeout(0.5)

    def dgram_loop():
        while not heard.get("stop"):
            try:
                heard["dgram"] = dgram_sock.recv(64)
            except OSError:
                pass

    threading.Thread(target=dgram_loop, daemon=True).start()
    pth = pathlib.Path(sysconfig.get_paths()["purelib"]) / "kg_sandbox_escape.pth"

    S = "kernels/sandbox/"
    runs = [
        (S + "read_outside.py", {"KG_FIXTURE_PATHS": f"{secret}:{in_checkout}"}, {}),
        (S + "parent_environ.py", {}, {}),
        (S + "tcp_connect.py", {"KG_FIXTURE_PORT": str(port)}, {}),
        (S + "unix_socket.py", {"KG_FIXTURE_SOCKET": sock}, {}),
        (S + "unix_socket_native.py", {"KG_FIXTURE_SOCKET": sock, "KG_FIXTURE_DGRAM": dgram}, {}),
        (S + "write_pth.py", {}, {}),
        (S + "write_checkout.py", {}, {}),
        (S + "ptrace_parent.py", {}, {}),
        (S + "widen_affinity.py", {}, {}),
        (S + "env_secrets.py", dict(SECRETS), {}),
        (S + "read_opt.py", {}, {}),
        (S + "readback_symlink.py", {"KG_FIXTURE_PATHS": str(secret)}, {}),
        (S + "inherited_fd.py", {"KG_FIXTURE_FD": "9"}, {"fd": 9}),
        (S + "other_builds.py", {"TORCH_EXTENSIONS_DIR": str(torch_dir)}, {"unkeyed": True}),
        (S + "poison_shared_cache.py", {}, {}),
        ("kernels/honest_relu.py", {}, {}),
        ("kernels/beside/relu_with_table.py", {}, {}),
        (S + "profiled_relu.py", {}, {}),
        ("cuda/honest_relu_cuda.py", {}, {}),
        ("cuda/honest_relu_triton.py", {}, {}),
    ]

    def one(run):
        kernel, env_extra, how = run
        args = [BIN, "eval", "--problem", str(FX / "problems/relu.py"), "--kernel", str(FX / kernel),
                "--device", os.environ.get("DEVICE", "cuda"), "--seed", "42", "--no-timing", "--format", "json"]
        if not how.get("unkeyed"):
            args += ["--extensions-dir", str(ext)]
        env = {k: v for k, v in os.environ.items() if k not in ("KERNELGATE_SANDBOX", "TORCH_EXTENSIONS_DIR")}
        env.update(env_extra)
        env["GITHUB_TOKEN"] = TOKEN
        env["KERNELGATE_PYTHON"] = env.get("KERNELGATE_PYTHON", "python3")
        env["KERNELGATE_CHILD_ENV"] = ",".join(k for k in env_extra if k.startswith("KG_"))
        if "fd" in how:
            # The shell opens the file at the descriptor and execs kernelgate: open across the exec.
            env["KG_TEST_INHERITED"] = str(inherited)
            args = ["/bin/sh", "-c", f'exec "$0" "$@" {how["fd"]}>>"$KG_TEST_INHERITED"'] + args
        p = subprocess.run(args, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
        try:
            v = json.loads(p.stdout)
        except ValueError:
            v = {"outcome": {"kind": "no-json"}, "stderr": p.stderr[-800:]}
        return kernel, p.returncode, v

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, runs))
    heard["stop"] = True

    side_effects = {
        "tcp_connect": bool(heard.get("tcp")),
        "unix_socket": bool(heard.get("unix")),
        "unix_socket_native": bool(heard.get("unix") or heard.get("dgram")),
        "write_pth": pth.exists(),
        "write_checkout": (checkout / "PWNED.txt").exists(),
        "inherited_fd": inherited.read_text() != "",
        "other_builds": victim.read_text() != "trusted build",
    }
    lines = ["| fixture | outcome | exit | got out | sandbox findings |", "|---|---|---|---|---|"]
    escaped = 0
    for kernel, code, v in results:
        name = pathlib.Path(kernel).stem
        stdout = v.get("stdout_tail") or ""
        leaks = [m for m in MARKERS if m in stdout]
        leaks += [s for s in list(SECRETS.values()) + ["outside-secret-8086", "checkout-secret-5150"] if s in stdout]
        if side_effects.get(name):
            leaks.append("side effect")
        found = [f"{f['rule']}: {f['message'][:120]}" for f in v.get("findings", [])
                 if f["rule"].startswith("eval/sandbox") or f["rule"] == "eval/worker-confinement"]
        if name == "unix_socket_native":  # what the CUDA driver's start needs must still work
            found.insert(0, "driver's seqpacket socket " + ("made" if "SEQPACKET_MADE" in stdout else "REFUSED"))
        honest = "sandbox/" not in kernel or name == "profiled_relu"
        escaped += bool(leaks) and not honest
        lines.append(f"| {name}{' (honest)' if honest else ''} | {v['outcome']['kind']} | {code} | "
                     f"{', '.join(leaks) or 'no'} | {'; '.join(found[:2]) or '-'} |")
        if v["outcome"]["kind"] not in ("passed", "incorrect"):
            lines.append(f"|   | {json.dumps(v['outcome'])[:400]} {v.get('stderr', '')[-300:]} | | | |")
    lines.append(f"\nescapes that got something out: {escaped}; sandbox levels: "
                 f"{sorted({str(v.get('sandbox')) for _, _, v in results})}")
    text = "\n".join(lines)
    (out / "sandbox.txt").write_text(text + "\n")
    (out / "sandbox.json").write_text(json.dumps([{"kernel": k, "exit": c, "result": v} for k, c, v in results]))
    print(text)
    if pth.exists():
        pth.unlink()


if __name__ == "__main__":
    main()

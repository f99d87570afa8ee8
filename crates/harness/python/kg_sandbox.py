"""The sandbox's witness inside the child: an audit hook that names what the candidate tries
outside its sandbox, which the kernel's Landlock and seccomp rules block (`crates/eval/src/
sandbox.rs`). Installed by the runner before the candidate is imported; an audit hook cannot be
removed.

Loaded by the harness as a private module and given to the runner as `runner.kg_sandbox`.
"""

import os
import sys
import threading

# Captured before any candidate code exists in the process.
_isinstance = isinstance


def install(policy, report):
    """Reports what the candidate tries outside its sandbox (the kernel's Landlock and seccomp
    rules block it; this hook only names it): reads and writes outside the allowed paths,
    another process's /proc entries, network connections, programs and libraries from outside,
    ctypes lookups of the syscalls seccomp denies. Installed before the candidate is imported; an
    audit hook cannot be removed. Code that skips Python (ctypes syscall stubs, C++) is still
    blocked, just not named. `policy` is the job's `kg_protocol.Sandbox`."""
    import socket

    realpath, abspath, fsdecode, sep = os.path.realpath, os.path.abspath, os.fsdecode, os.sep
    # The job runs in a PID namespace of its own under the host's /proc: its pid there (what
    # /proc/self names) is not os.getpid().
    try:
        me = int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        me = os.getpid()
    read_exec = tuple(policy.read_exec)
    read_write = tuple(policy.read_write)
    read_files = frozenset(policy.read_files)
    # Importing a file by path looks for its cached bytecode beside it; that is no attempt.
    bytecode_dirs = frozenset(os.path.join(os.path.dirname(f), "__pycache__") for f in read_files)
    denied = frozenset(policy.denied_syscalls) | frozenset(policy.denied_from_candidate)
    # libc functions that reach a denied syscall under another name.
    denied |= {w for w, nr in _LIBC_WRAPPERS.items() if nr in denied}
    inet = (socket.AF_INET, socket.AF_INET6)
    unix = getattr(socket, "AF_UNIX", None)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    level = str(policy.level)
    verdict = "blocked by the sandbox" if level == "full" or level.startswith("partial") else f"NOT blocked (sandbox {level})"
    seen = set()
    busy = threading.local()

    def real(path):
        try:
            return realpath(path)
        except (OSError, ValueError):  # an unreadable link (another process's /proc/<pid>/cwd)
            return abspath(path)

    def under(path, roots):
        return any(path == r or path.startswith(r + sep) for r in roots)

    def foreign_proc(path):
        parts = path.split(sep)
        return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and int(parts[2]) != me

    def readable(path):
        return path in read_files or under(path, read_exec) or under(path, read_write)

    def note(what):
        if what not in seen and len(seen) < 50:
            seen.add(what)
            report("sandbox-denied", "error", f"the candidate tried to {what}: {verdict}")

    def check(event, args):
        if event == "open":
            path, mode, flags = args
            if not _isinstance(path, (str, bytes)):
                return
            path = real(fsdecode(path))
            writes = (_isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
            if foreign_proc(path):
                note(f"open another process's {path}")
            elif writes and not under(path, read_write):
                note(f"write {path} (outside the job's directory)")
            elif not writes and not readable(path) and os.path.dirname(path) not in bytecode_dirs:
                note(f"read {path} (outside the files the job may read)")
        elif event in ("os.listdir", "os.scandir"):
            # Listing a directory outside (/opt, /home): what is there is the runner's.
            if args and _isinstance(args[0], (str, bytes)):
                path = real(fsdecode(args[0]))
                if foreign_proc(path):
                    note(f"list another process's {path}")
                elif not readable(path):
                    note(f"list {path} (outside the files the job may read)")
        elif event in ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate"):
            # Changes to the file tree: the paths changed must be writable (a link's target
            # may be anywhere: reading through it is what the sandbox judges).
            changed = args[1:2] if event in ("os.symlink", "os.link") else args
            for p in changed:
                if _isinstance(p, (str, bytes)):
                    path = real(fsdecode(p))
                    if not under(path, read_write):
                        note(f"{event.split('.')[1]} {path} (outside the job's directory)")
                        break
        elif event == "socket.__new__":
            # A UNIX socket reaches servers by path (docker.sock, D-Bus, agents); seccomp
            # refuses its connect() (and datagram ones outright). The socket module's own wrappers of an existing descriptor
            # (socketpair, accept, fromfd) raise the same event: not an attempt.
            if args[1] == unix and not _from_socket_module(sys._getframe(1)):
                note(
                    "open a UNIX socket (to reach a server by its path; its connect() is denied by the sandbox's seccomp filter)"
                )
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
            sock, address = args[0], args[-1]
            if getattr(sock, "family", None) in inet:
                note(f"{event.split('.')[1]} a network socket to {address!r}")
        elif event in ("subprocess.Popen", "os.exec", "os.posix_spawn"):
            exe = args[0]
            if _isinstance(exe, (str, bytes)) and sep in fsdecode(exe) and not readable(real(fsdecode(exe))):
                note(f"run {fsdecode(exe)} (outside the allowed programs)")
        elif event == "ctypes.dlopen":
            name = args[0]
            if _isinstance(name, (str, bytes)) and sep in fsdecode(name) and not readable(real(fsdecode(name))):
                note(f"load the library {fsdecode(name)} (outside the allowed paths)")
        elif event == "os.sched_setaffinity":  # raised by the wrapper below
            note("change its CPU affinity (denied by the sandbox's seccomp filter)")
        elif event == "ctypes.dlsym":
            # The symbol lookup (ctypes raises no event for the call itself).
            if args[1] in denied:
                note(f"call {args[1]}() through ctypes (denied by the sandbox's seccomp filter)")

    def hook(event, args):
        if getattr(busy, "on", False):  # the check's own calls
            return
        busy.on = True
        try:
            check(event, args)
        except Exception:
            pass
        finally:
            busy.on = False

    sys.addaudithook(hook)
    if "sched_setaffinity" in denied:
        _name_affinity_changes()


# The socket module's functions that wrap a descriptor that already exists in a socket object.
_WRAPPERS = frozenset({"socketpair", "fromfd", "accept", "dup", "_fromfd"})


def _from_socket_module(frame):
    """Whether the socket object is made by one of the socket module's wrappers of an existing
    descriptor (`socket.__init__` first, then its caller)."""
    here = _from_socket_module.__globals__
    while frame is not None and frame.f_globals is here:
        frame = frame.f_back
    for _ in range(3):
        if frame is None or frame.f_globals.get("__name__") != "socket":
            return False
        if frame.f_code.co_name in _WRAPPERS:
            return True
        frame = frame.f_back
    return False


# libc's wrappers, by the syscall they make.
_LIBC_WRAPPERS = {"pthread_setaffinity_np": "sched_setaffinity"}


def _name_affinity_changes():
    """`os.sched_setaffinity` raises no audit event: the wrapper raises one, then calls the
    original (which the seccomp filter denies). Only names the attempt; `posix.sched_setaffinity`
    or C++ are still denied, just not named."""
    original = os.sched_setaffinity

    def sched_setaffinity(pid, mask):
        sys.audit("os.sched_setaffinity", pid)
        return original(pid, mask)

    os.sched_setaffinity = sched_setaffinity

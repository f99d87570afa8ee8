"""nvcc with its host front end beside its device chain, for the builds of `pr` and `baseline`.

For one `.cu` source `nvcc -dryrun` lists one serial chain (CUDA 12 and 13):
    host front:  gcc -E (cpp4.ii)  ->  cudafe++ (cudafe1.cpp; writes the module id)
    device:      gcc -E -D__CUDA_ARCH__ (cpp1.ii)  ->  cicc (reads the id; ptx, stub)
                 ->  ptxas  ->  fatbinary
    last:        gcc -c cudafe1.cpp (which includes the stub, which includes the fat binary)
With torch's headers cudafe++ and cicc each parse for 15-20 s (scripts/gpu-nvcc-trajectory.py),
and all the device chain needs of the host front end is the module id: a name that makes the
translation unit's internal device entities unique. Here cudafe++ first writes the id from a
stand-in translation unit unique to this source, then both chains read it side by side, then
the last step runs: the object is nvcc's but for the id's value, and nothing else crosses.

Anything this module does not know (another chain, a step it cannot place, `-dryrun` itself,
no `-c`) runs nvcc itself, and so does a failed step: a compile error is reported by nvcc, as
it would be without this module. Intermediate files live in a private `TMPDIR`, removed after.

`install` (run by `kernelgate pch`, a trusted process) writes this file under the pch root,
which jobs read and never write; `use` (the runner, in a job whose extensions directory is
kept per source, where kernelgate sets `KERNELGATE_NVCC_PARALLEL=1` unless it is `0`) names it in torch's `PYTORCH_NVCC`.
torch writes that command into `build.ninja`, so a build and its later eval must agree on
it, or ninja compiles again: both come from the same root and switch.
Usage:   python kg_nvcc.py REAL_NVCC ARGS...
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

# The environment switch the runner reads (set by kernelgate for kept extension directories).
SWITCH = "KERNELGATE_NVCC_PARALLEL"
DEVICE_TOOLS = ("cicc", "ptxas", "fatbinary")
FRONT_END = "cudafe++"
COMPILERS = ("gcc", "g++", "c++", "cc", "clang", "clang++")
ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
# A quoted or bare argument after an option.
ARG = r'("[^"]*"|\S+)'


def _tool(step):
    first = step.split(None, 1)[0] if step.strip() else ""
    return os.path.basename(first.strip('"'))


def _unquote(value):
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"' and '"' not in value[1:-1]:
        return value[1:-1]
    return value


class Plan:
    """nvcc's steps for one source, placed: environment, host front, device, last. (Its `rm`
    lines are not kept: its intermediate files live in the private folder, removed whole.)"""

    def __init__(self, env, host, device, last, writer, aside=(), tail=()):
        self.env = env
        self.host = host
        self.device = device
        self.last = last
        self.writer = writer
        # Host steps whose output no later step reads (the dependency file's preprocessing):
        # they run beside the chains, off the critical path.
        self.aside = list(aside)
        # Steps nvcc lists after the host compile: run after it, in order.
        self.tail = list(tail)


def compilers(args):
    """The host compiler names a step may start with (`-ccbin` adds its own)."""
    names = set(COMPILERS)
    for i, a in enumerate(args):
        value = None
        if a in ("-ccbin", "--compiler-bindir") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(("-ccbin=", "--compiler-bindir=")):
            value = a.split("=", 1)[1]
        if value:
            names.add(os.path.basename(value))
    return names


def eligible(args):
    """Whether the arguments ask for one object compiled from sources (`-c`), nothing else."""
    banned = {
        "-dryrun",
        "--dryrun",
        "-E",
        "--preprocess",
        "-M",
        "-MM",
        "--generate-dependencies",
        "-ptx",
        "--ptx",
        "-cubin",
        "--cubin",
        "-fatbin",
        "--fatbin",
        "-rdc=true",
        "--relocatable-device-code=true",
        "-dc",
        "--device-c",
        "-dlink",
        "--device-link",
        "-lib",
        "--lib",
        "-link",
        "--link",
        "-run",
        "--run",
        "-keep",
        "--keep",
    }
    return ("-c" in args or "--compile" in args) and not banned.intersection(args)


class NotTheChain(Exception):
    """nvcc's listing is not the chain this module knows; the message says where."""


def parse(listing, args, scratch):
    """The plan for nvcc's `-dryrun` listing (`#$ ` lines); raises `NotTheChain` when a step
    is not where this module expects it."""
    lines = [x[3:] for x in listing.splitlines() if x.startswith("#$ ")]
    env, steps = {}, []
    for line in lines:
        m = ENV_LINE.match(line)
        if m:
            # nvcc lists its variables before the steps, a later value replacing an earlier one
            # (`_TARGET_DIR_=` then `_TARGET_DIR_=targets/x86_64-linux`), and may list them
            # again between steps: those must agree, as every step here gets one environment.
            value = _unquote(m.group(2))
            if steps and env.get(m.group(1), value) != value:
                raise NotTheChain(f"`{m.group(1)}` changed between steps")
            env[m.group(1)] = value
        elif not line.startswith("rm "):
            steps.append(line)
    known = compilers(args)
    host, device, last, after = [], [], None, []
    for step in steps:
        tool = _tool(step)
        words = step.split()
        if tool == FRONT_END:
            host.append(step)
        elif tool in DEVICE_TOOLS:
            device.append(step)
        elif tool in known:
            if "-c" in words:
                if last is not None:
                    raise NotTheChain("two host compiles")
                last = step
            elif any(w.startswith("-D__CUDA_ARCH__=") for w in words):
                device.append(step)
            elif last is not None:
                after.append(step)
            else:
                host.append(step)
        else:
            raise NotTheChain(f"a step of `{tool}`")
        if last is not None and step is not last and tool != _tool(last):
            raise NotTheChain(f"`{tool}` after the host compile")
        if last is not None and step is not last and step not in after:
            raise NotTheChain("a device step after the host compile")
    writers = [s for s in host if _tool(s) == FRONT_END and "--gen_module_id_file" in s.split()]
    ciccs = [s for s in device if _tool(s) == "cicc"]
    if last is None:
        raise NotTheChain("no host compile (`-c`)")
    if len(writers) != 1:
        raise NotTheChain(f"{len(writers)} cudafe++ steps write the module id")
    if not ciccs:
        raise NotTheChain("no cicc step")
    if any("--gen_module_id_file" in s.split() or "--module_id_file_name" not in s for s in ciccs):
        raise NotTheChain("cicc does not read the module id")
    # Every intermediate file must be nvcc's own, in this call's private folder.
    for step in steps:
        for path in re.findall(r"[^\s\"=]*tmpxft_[^\s\"]*", step):
            if os.path.isabs(path) and not path.startswith(scratch + os.sep):
                raise NotTheChain(f"an intermediate file outside {scratch}: {path}")
    aside = [s for s in host if _tool(s) != FRONT_END and _independent(s, steps)]
    host = [s for s in host if s not in aside]
    # What nvcc runs after the host compile (a dependency file's own step, say) runs after it.
    return Plan(env, host, device, last, writers[0], aside, after)


def _output(step):
    m = re.search(r"\s-o\s+" + ARG, step)
    return m.group(1).strip('"') if m else None


def _paths(step):
    """The step's arguments as paths: each word unquoted, and what follows `=` in one."""
    words = [a or b for a, b in re.findall(r'"([^"]*)"|(\S+)', step)]
    return set(words) | {w.rsplit("=", 1)[1] for w in words if "=" in w}


def _independent(step, steps):
    """Whether the step neither reads another step's output nor writes one another reads (the
    dependency file's own preprocessing): it can run at any time. A step without `-o` writes
    where this module cannot see, so it is never independent."""
    out = _output(step)
    if not out:
        return False
    others = [s for s in steps if s is not step]
    if any(out in _paths(other) for other in others):
        return False
    mine = _paths(step)
    return not any(o and o in mine for o in map(_output, others))


def module_id_steps(plan, source_digest, scratch):
    """The writer run on a stand-in translation unit (the id first), and the writer as a reader.

    The stand-in declares a name made from the source's digest: cudafe++ may derive the id
    from what it parses, and two sources must not share one (two extensions loaded in one
    process, a kernel and its base, each register their own device code)."""
    stand_in = os.path.join(scratch, "kg_module_id.ii")
    with open(stand_in, "w") as f:
        f.write(f"namespace kg_module_id_{source_digest} {{ int unique; }}\n")
    writer = plan.writer
    id_only = re.sub(ARG + r"\s*$", shlex.quote(stand_in), writer.rstrip())
    id_only = re.sub(
        r"--gen_c_file_name\s+" + ARG, "--gen_c_file_name " + shlex.quote(os.path.join(scratch, "kg_id.cpp")), id_only
    )
    id_only = re.sub(
        r"--stub_file_name\s+" + ARG, "--stub_file_name " + shlex.quote(os.path.join(scratch, "kg_id.stub.c")), id_only
    )
    reader = re.sub(r"\s--gen_module_id_file(?=\s)", "", writer)
    return id_only, reader


class _Chain(threading.Thread):
    """Steps run one after another; stops at the first failure. A step that reads the module
    id waits for `id_written` (set once the id's step ended, `id_ok` whether it succeeded)."""

    def __init__(self, name, steps, env, cwd, t0, id_written=None, id_ok=None):
        super().__init__(daemon=True)
        self.name, self.steps, self.env, self.cwd, self.t0 = name, steps, env, cwd, t0
        self.id_written, self.id_ok = id_written, id_ok
        self.outputs = []
        self.times = []
        self.ok = True

    def run(self):
        for step in self.steps:
            if self.id_written is not None and "--module_id_file_name" in step:
                self.id_written.wait()
                if not self.id_ok():
                    self.ok = False
                    return
            start = time.monotonic()
            p = subprocess.run(["bash", "-c", step], env=self.env, cwd=self.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self.times.append(
                {
                    "chain": self.name,
                    "tool": _tool(step),
                    "start_s": round(start - self.t0, 2),
                    "end_s": round(time.monotonic() - self.t0, 2),
                }
            )
            self.outputs.append(p.stdout)
            if p.returncode != 0:
                self.ok = False
                return


def _digest(args):
    h = hashlib.sha256("\0".join(args).encode())
    for a in args:
        if a.endswith((".cu", ".cuh")) and os.path.isfile(a):
            with open(a, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:20]


def _then(run, after):
    def both():
        try:
            run()
        finally:
            after()

    return both


def _record(args, cwd, t0, times):
    """Where the compile's time went, beside the object (`<object>.kg_nvcc.json`): each step's
    chain, tool, start and end in seconds. Best effort: a compile never fails for it."""
    obj = _option(args, "-o")
    if not obj:
        return
    try:
        with open(os.path.join(cwd or os.getcwd(), obj + ".kg_nvcc.json"), "w") as f:
            json.dump({"total_s": round(time.monotonic() - t0, 2), "steps": times}, f)
    except OSError:
        pass


# With a compile, the dependency file (`-MD -MF f`, as torch's build.ninja asks), and nvcc's
# own dependency-only mode that writes the same file.
WITH_COMPILE = {
    "-MD": "-M",
    "--generate-dependencies-with-compile": "-M",
    "-MMD": "-MM",
    "--generate-nonsystem-dependencies-with-compile": "-MM",
}
DEPENDENCY_OUTPUT = ("-MF", "--dependency-output")


def split_dependencies(args):
    """The compile's arguments without its dependency file, and the arguments of nvcc's own
    run that writes that file alone (`-M -MT <object> -MF <file>`), or None when none is asked.

    CUDA 13 lists the file's last step as `-- Filter Dependencies -- > <file>`, done inside nvcc
    and not a command this module can run: nvcc itself writes the file, beside the chains."""
    compile_args, mode, output = [], None, None
    i = 0
    while i < len(args):
        a = args[i]
        if a in WITH_COMPILE:
            mode = WITH_COMPILE[a]
        elif a in DEPENDENCY_OUTPUT and i + 1 < len(args):
            output = args[i + 1]
            i += 1
        else:
            compile_args.append(a)
        i += 1
    if mode is None or output is None:
        return args, None
    obj = _option(compile_args, "-o")
    deps, skip = [], False
    for a in compile_args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a not in ("-c", "--compile"):
            deps.append(a)
    return compile_args, deps + [mode, "-MT", obj or "", "-MF", output]


def _option(args, *flags):
    """The value after the first of `flags` in the arguments, or None."""
    return next((args[i + 1] for i, a in enumerate(args) if a in flags and i + 1 < len(args)), None)


def _dependency_file(args, cwd):
    """The dependency file the arguments ask for (`-MF`/`--dependency-output`), or None."""
    output = _option(args, *DEPENDENCY_OUTPUT)
    return os.path.join(cwd or os.getcwd(), output) if output else None


def side_by_side(nvcc, args, cwd=None):
    """Compiles as nvcc would, its two chains side by side. Returns None when it did, else why
    it could not (it wrote nothing that nvcc itself does not write again)."""
    scratch = tempfile.mkdtemp(prefix="kg-nvcc-")
    t0 = time.monotonic()
    try:
        nvcc_env = dict(os.environ, TMPDIR=scratch)
        compile_args, dependency_args = split_dependencies(args)
        listed = subprocess.run(
            [nvcc, *compile_args, "-dryrun"], env=nvcc_env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if listed.returncode != 0:
            return f"`nvcc -dryrun` exited {listed.returncode}"
        try:
            plan = parse(listed.stdout, compile_args, scratch)
        except NotTheChain as e:
            return f"its steps are not the chain this wrapper knows ({e})"
        env = dict(nvcc_env, **plan.env)
        id_only, reader = module_id_steps(plan, _digest(args), scratch)
        # The id is written beside both preprocessors; the readers (cudafe++, cicc) wait for it.
        ident = _Chain("id", [id_only], env, cwd, t0)
        written = threading.Event()
        ident.run = _then(ident.run, written.set)
        host_steps = [reader if s is plan.writer else s for s in plan.host]
        host = _Chain("host", host_steps, env, cwd, t0, written, lambda: ident.ok)
        device = _Chain("device", plan.device, env, cwd, t0, written, lambda: ident.ok)
        aside = _Chain("aside", plan.aside, env, cwd, t0)
        # nvcc's own dependency run, in nvcc's environment (not the steps' variables).
        deps = _Chain("deps", [shlex.join([nvcc, *dependency_args])] if dependency_args else [], nvcc_env, cwd, t0)
        for chain in (ident, host, device, aside, deps):
            chain.start()
        for chain in (ident, host, device, aside, deps):
            chain.join()
        if not ident.ok:
            return "cudafe++ could not write the module id"
        if not (host.ok and device.ok and aside.ok and deps.ok):
            return "a step failed"
        last = _Chain("last", [plan.last] + plan.tail, env, cwd, t0)
        last.run()
        _record(args, cwd, t0, ident.times + deps.times + aside.times + host.times + device.times + last.times)
        if not last.ok:
            return "the host compile failed"
        depfile = _dependency_file(args, cwd)
        if depfile and not os.path.isfile(depfile):
            return "no step wrote the dependency file"
        # The tools' own warnings, in nvcc's order.
        out = getattr(sys.stderr, "buffer", None)
        if out is not None:
            for chunk in deps.outputs + aside.outputs + host.outputs + device.outputs + last.outputs:
                out.write(chunk or b"")
            out.flush()
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv):
    if len(argv) < 2:
        print("usage: kg_nvcc.py REAL_NVCC ARGS...", file=sys.stderr)
        return 2
    nvcc, args = argv[1], argv[2:]
    if not eligible(args):
        return subprocess.call([nvcc, *args])
    why = side_by_side(nvcc, args)
    if why is None:
        return 0
    # nvcc itself, with its own messages for a compile error.
    print(f"kernelgate: nvcc's steps side by side: {why}; nvcc runs them in turn", file=sys.stderr)
    sys.stderr.flush()
    return subprocess.call([nvcc, *args])


def installed_name(source):
    return f"kg_nvcc-{hashlib.sha256(source.encode()).hexdigest()[:12]}.py"


def install(root, source):
    """`kernelgate pch`: writes this module under `<root>/nvcc` unless there; returns its path."""
    folder = os.path.join(root, "nvcc")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, installed_name(source))
    if not os.path.isfile(path):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kg_nvcc-")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    return path


def use(root, source, real_nvcc, environ=os.environ, python=sys.executable):
    """Names the installed wrapper in `PYTORCH_NVCC` when the switch is on and the file under
    `root` is this source's; returns the command, or None (nvcc as torch finds it). A
    `PYTORCH_NVCC` already set (a compiler cache, say) is left alone. `real_nvcc` is the path,
    or a function giving it (asked only when the switch is on)."""
    if environ.get(SWITCH) != "1" or not (root and source) or environ.get("PYTORCH_NVCC"):
        return None
    if callable(real_nvcc):
        real_nvcc = real_nvcc()
    if not real_nvcc:
        return None
    path = os.path.join(root, "nvcc", installed_name(source))
    try:
        with open(path) as f:
            if f.read() != source:
                return None
    except OSError:
        return None
    command = shlex.join([python, path, real_nvcc])
    environ["PYTORCH_NVCC"] = command
    return command


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Python bytecode for the job's interpreter, compiled once per runner (`kernelgate pch`).

Every job is a fresh process that imports torch, and jobs run with `PYTHONDONTWRITEBYTECODE=1`
(a candidate's process writes nothing it could leave for the next job). Where torch was
installed without its bytecode (`pip install --no-compile`, or an image built with
`PYTHONDONTWRITEBYTECODE=1`: seen on the GPU runner, 0 `.pyc` for torch's 2,141 modules), each
child compiles torch's source again: `import torch` took 4.9 s there.

`build` (run by `kernelgate pch`, a trusted process: no candidate code) compiles the
interpreter's standard library and site-packages into a mirror tree, `<root>/bytecode/`
(`sys.pycache_prefix`, Python's own layout), when torch has no bytecode beside its sources.
`use` (the harness, before it imports torch) points `sys.pycache_prefix` at that tree when it
exists and torch still has none of its own; with a prefix set, Python reads only the prefix's
files, so a runner whose packages carry their bytecode keeps reading those.

Python checks every `.pyc` against its source (size and modification time) and its own magic
number, so a stale or foreign file is ignored and the source compiled as before: the tree needs
no key. Only kernelgate writes it; the sandbox grants jobs the root read-only (docs/sandbox.md),
so no candidate can leave bytecode that a later job's harness would run.

Imports only `os` and `sys` at module level: `use` runs before anything else is imported, when
every import may still be a compile.
"""

import os
import sys

TREE = "bytecode"


def tree(root):
    return os.path.join(root, TREE)


def _package_dir(name, path):
    for entry in path:
        d = os.path.join(entry or os.getcwd(), name)
        if os.path.isfile(os.path.join(d, "__init__.py")):
            return d
    return None


def has_own_bytecode(name="torch", path=None):
    """True when package `name` (found on `path`, default `sys.path`, without importing it) has
    its bytecode beside its sources; also True when it is not installed (nothing to cache)."""
    d = _package_dir(name, sys.path if path is None else path)
    if d is None:
        return True
    tag = sys.implementation.cache_tag
    return os.path.isfile(os.path.join(d, "__pycache__", f"__init__.{tag}.pyc"))


def use(root, name="torch", path=None):
    """Reads bytecode from `root`'s tree when it exists and `name` has none of its own; returns
    the tree used, or None. Call before importing `name`."""
    if not root:
        return None
    t = tree(root)
    if not os.path.isdir(t) or has_own_bytecode(name, path):
        return None
    sys.pycache_prefix = t
    return t


def source_dirs():
    """The interpreter's standard library and site-packages, outermost first, none inside another
    (compileall descends into subdirectories)."""
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = []
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        d = paths.get(key)
        if d and os.path.isdir(d):
            # As `sys.path` names it, not resolved: the tree mirrors the path a module is
            # imported by, so a link resolved here would leave every file unfound.
            d = os.path.abspath(d)
            if d not in dirs:
                dirs.append(d)
    dirs.sort(key=len)
    kept = []
    for d in dirs:
        if not any(d == k or d.startswith(k + os.sep) for k in kept):
            kept.append(d)
    return kept


def compile_into(target, dirs, workers=0):
    """Compiles every module under `dirs` into the mirror tree `target`; files already up to date
    are skipped. Returns the number of `.pyc` files in the tree."""
    import compileall

    os.makedirs(target, exist_ok=True)
    os.chmod(target, 0o755)
    import warnings

    # Worker processes read the environment (a spawned one does not share this process's state);
    # quiet=2 and no warnings: a module that does not compile, or compiles with a warning (test
    # data, another Python's syntax), is skipped or kept silently, as its import would be.
    env = {"PYTHONPYCACHEPREFIX": target, "PYTHONWARNINGS": "ignore"}
    saved = {k: os.environ.get(k) for k in env}
    previous = sys.pycache_prefix
    sys.pycache_prefix = target
    os.environ.update(env)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for d in dirs:
                compileall.compile_dir(d, quiet=2, workers=workers)
    finally:
        sys.pycache_prefix = previous
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return sum(1 for _, _, files in os.walk(target) for f in files if f.endswith(".pyc"))


def build(root, force=False, log=print, name="torch", path=None):
    """Compiles this interpreter's modules into `root`'s tree unless package `name` (torch) has
    its own bytecode (`force`: regardless). Returns (tree or None, a line that says what was
    done)."""
    if not force and has_own_bytecode(name, path):
        return None, f"bytecode: {name}'s is beside its sources; nothing to compile"
    import time

    dirs = source_dirs()
    target = tree(root)
    log(f"compiling Python bytecode of {', '.join(dirs)} into {target} ...")
    started = time.monotonic()
    count = compile_into(target, dirs)
    return target, f"bytecode: {count} modules in {target} ({time.monotonic() - started:.0f} s)"


def main(argv):
    """`kernelgate pch`: `main([root])`; prints what it did, returns the exit status."""
    root = argv[0]
    try:
        _, line = build(root, log=lambda m: print(m, file=sys.stderr, flush=True))
    except Exception as e:  # noqa: BLE001 - one line that says what failed, not a traceback
        print(f"error: bytecode: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(line)
    return 0

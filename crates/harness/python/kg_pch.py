"""A precompiled `torch/extension.h` for the C++ half of candidates' torch extensions.

`load_inline` starts every C++ source with `#include <torch/extension.h>`, and parsing that
header is most of a small extension's compile (about 45 s of 60 s on a 2-core machine). gcc
reads a precompiled header instead when it finds `torch/extension.h.gch` in a directory of its
search path before the header itself; a `.gch` *directory* may hold several variants, and gcc
uses the first whose flags match the compile (it checks its own version, the flags and the
macros the header reads: `__OPTIMIZE__` splits unoptimised from optimised builds).

`build` (run by `kernelgate pch`, a trusted process: no candidate code) writes one entry per
torch, Python and compiler, `<root>/<key>/torch/extension.h.gch/{O0,O2}.gch`, checks gcc uses
each variant with the flags torch gives a C++ source, and renames the entry into place whole.
Beside the `.gch` directory sits a `torch/extension.h` that forwards to torch's own: gcc
serves only a TU's first include from the `.gch` and opens that file for any later one.
`use` (the runner and each worker, after their torch import and before any model code) puts
the entry on `CPATH` when it exists. torch's build hash and `build.ninja` do not change, so a contributor's own
build is still reused, and a compile whose flags match no variant parses the header as before.

gcc does not check that the header changed since the `.gch` was made: the key names torch's
version, the headers' place and stat, Python and the compiler, so another torch finds no entry.
The sandbox grants jobs the root read-only (docs/sandbox.md).
"""

import concurrent.futures
import hashlib
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# gcc's variants: the optimisation level is the flag torch's users pass most (`-O3`, `-O2`,
# none), and one optimised `.gch` serves -O1 to -O3 (gcc accepts it: only `__OPTIMIZE__` differs).
VARIANTS = (("O0", []), ("O2", ["-O2"]))
MANIFEST = "manifest.json"
FORWARD = """// kernelgate pch: the precompiled header beside this file stands for torch's own; a later
// #include of it, which a precompiled header cannot serve, reads torch's header through here.
#pragma once
#include_next <torch/extension.h>
"""
HEADER = os.path.join("torch", "extension.h")


def compiler():
    """The C++ compiler torch's builds use (`get_cxx_compiler`: `$CXX`, else `c++`)."""
    return os.environ.get("CXX") or "c++"


def facts(torch):
    """What an entry was made for; any change means another entry."""
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    header = os.stat(os.path.join(include, HEADER))
    cxx = shutil.which(compiler())
    cxx_stat = os.stat(cxx) if cxx else None
    return {
        # The entry's layout: 2 has the forwarding header beside the `.gch` directory.
        "layout": 2,
        "torch": torch.__version__,
        "include": include,
        "header": [header.st_size, header.st_mtime_ns],
        "python": sys.version,
        "cxx": os.path.realpath(cxx) if cxx else None,
        "cxx_stat": [cxx_stat.st_size, cxx_stat.st_mtime_ns] if cxx_stat else None,
    }


def key(entry_facts):
    return hashlib.sha256(json.dumps(entry_facts, sort_keys=True).encode()).hexdigest()[:20]


def entry_for(root, torch):
    """The entry for this torch under `root`, when one was built whole; else None."""
    if not root:
        return None
    try:
        entry = os.path.join(root, key(facts(torch)))
    except OSError:
        return None
    return entry if os.path.isfile(os.path.join(entry, MANIFEST)) else None


def use(root, torch, environ=os.environ):
    """Puts this torch's entry under `root` first on `CPATH` (once: a process that inherited it
    from the runner keeps it first); returns it, or None when none."""
    entry = entry_for(root, torch)
    if entry:
        rest = environ.get("CPATH")
        if not (rest and rest.split(os.pathsep)[0] == entry):
            environ["CPATH"] = entry + (os.pathsep + rest if rest else "")
    return entry


def torch_cflags(torch):
    """The flags torch gives a C++ source of an extension, read from the `build.ninja` torch's
    own code writes (so every torch version's list), without the extension's name."""
    from torch.utils import cpp_extension

    write = cpp_extension._write_ninja_file_to_build_library
    with tempfile.TemporaryDirectory(prefix="kg-pch-flags-") as d:
        source = os.path.join(d, "main.cpp")
        open(source, "w").close()
        args = {
            "path": os.path.join(d, "build.ninja"),
            "name": "kg_pch_flags",
            "sources": [source],
            "extra_cflags": [],
            "extra_cuda_cflags": [],
            "extra_sycl_cflags": [],
            "extra_ldflags": [],
            "extra_include_paths": [],
            "with_cuda": False,
            "with_sycl": False,
            "is_standalone": False,
        }
        params = inspect.signature(write).parameters
        write(**{k: v for k, v in args.items() if k in params})
        with open(args["path"]) as f:
            for line in f:
                if line.startswith("cflags = "):
                    flags = shlex.split(line[len("cflags = ") :])
                    return [x for x in flags if not x.startswith("-DTORCH_EXTENSION_NAME=")]
    raise RuntimeError("torch wrote a build.ninja without a cflags line")


def _compile_variant(cxx, header, out, flags):
    started = time.monotonic()
    p = subprocess.run(
        [cxx, "-x", "c++-header", header, "-o", out, *flags],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise RuntimeError(f"{cxx} failed to precompile {header} ({' '.join(flags)}):\n{p.stderr[-2000:]}")
    return time.monotonic() - started


def _used(cxx, entry, variant_file, flags):
    """True when gcc, given torch's flags and `entry` on CPATH, reads `variant_file`."""
    with tempfile.TemporaryDirectory(prefix="kg-pch-probe-") as work:
        probe = os.path.join(work, "probe.cpp")
        with open(probe, "w") as f:
            # Twice, as load_inline writes it before a source that includes it too.
            f.write("#include <torch/extension.h>\n#include <torch/extension.h>\n")
        p = subprocess.run(
            [cxx, "-fsyntax-only", "-H", "-Winvalid-pch", "-DTORCH_EXTENSION_NAME=kg_pch_probe", *flags, probe],
            capture_output=True,
            text=True,
            env=dict(os.environ, CPATH=entry),
        )
    # `-H` prints "! <file>" for the precompiled header it used.
    return p.returncode == 0 and any(
        line.startswith("! ") and line[2:].strip() == variant_file for line in p.stderr.splitlines()
    ), p.stderr[-1500:]


def build(root, torch, log=print):
    """Builds this torch's entry under `root` unless it exists; returns (entry, built)."""
    entry_facts = facts(torch)
    entry = os.path.join(root, key(entry_facts))
    if os.path.isfile(os.path.join(entry, MANIFEST)):
        return entry, False
    cxx = shutil.which(compiler())
    if not cxx:
        raise RuntimeError(f"no C++ compiler: {compiler()} is not on PATH (set CXX)")
    header = os.path.join(entry_facts["include"], HEADER)
    flags = torch_cflags(torch)
    os.makedirs(root, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".building-", dir=root)
    os.chmod(staging, 0o755)
    try:
        gch_dir = os.path.join(staging, HEADER + ".gch")
        os.makedirs(gch_dir)
        # A precompiled header serves only a TU's first #include; for a later one (a source that
        # includes torch/extension.h itself after load_inline's line) gcc opens the header
        # beside the `.gch` and fails when there is none. This one forwards to torch's own.
        with open(os.path.join(staging, HEADER), "w") as f:
            f.write(FORWARD)
        log(f"precompiling {header} ({len(VARIANTS)} variants, {compiler()}) ...")

        def make(variant):
            # Compiled beside the directory and moved in whole: gcc tries every file in it,
            # and the other variant's check may be reading it meanwhile.
            name, extra = variant
            part = os.path.join(staging, name + ".part")
            took = _compile_variant(cxx, header, part, flags + extra)
            os.rename(part, os.path.join(gch_dir, name + ".gch"))
            log(f"  {name} ({' '.join(extra) or 'no -O'}): {took:.0f} s")
            # Checked where it was built: gcc records nothing of the path in a `.gch`.
            ok, stderr = _used(cxx, staging, os.path.join(gch_dir, name + ".gch"), flags + extra)
            if not ok:
                raise RuntimeError(
                    f"gcc did not use the precompiled {name} variant with torch's flags "
                    f"({' '.join(flags + extra)}); nothing was kept:\n{stderr}"
                )
            return took

        workers = max(1, min(len(VARIANTS), os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            seconds = dict(zip([name for name, _ in VARIANTS], pool.map(make, VARIANTS)))
        manifest = {"facts": entry_facts, "flags": flags, "variants": dict(VARIANTS), "seconds": seconds}
        with open(os.path.join(staging, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
        try:
            os.rename(staging, entry)
        except OSError:
            # Another build finished first: its entry stands.
            if not os.path.isfile(os.path.join(entry, MANIFEST)):
                raise
            return entry, False
        staging = None
        return entry, True
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)


def main(argv):
    """`kernelgate pch`: `main([root])`; prints what it did, returns the exit status."""
    import torch

    root = argv[0]
    try:
        entry, built = build(root, torch, log=lambda m: print(m, file=sys.stderr, flush=True))
    except Exception as e:  # noqa: BLE001 - one line that says what failed, not a traceback
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(entry) for f in fs)
    others = sorted(
        n for n in os.listdir(root) if n != os.path.basename(entry) and os.path.isfile(os.path.join(root, n, MANIFEST))
    )
    state = "built" if built else "already built"
    print(f"{state}: {entry} ({size / 2**30:.1f} GiB; torch {torch.__version__}, {compiler()})")
    if others:
        print(
            f"{len(others)} other entr{'y' if len(others) == 1 else 'ies'} under {root} (other torch or compiler): "
            f"{', '.join(others)}; remove what is no longer used with rm -r"
        )
    return 0

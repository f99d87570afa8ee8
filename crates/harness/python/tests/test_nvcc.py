"""kg_nvcc: nvcc's host front end beside its device chain, against a stand-in nvcc.

The stand-in lists the chain CUDA 13's `nvcc -dryrun` lists, with stand-in tools that write
what the real ones write and check what the real ones need: cicc and the host compile read the
module id cudafe++ wrote, and the host compile fails when the two sides' ids differ. cudafe++
(the reader) waits for cicc to have started: run one after another, as nvcc runs them, the
compile fails, so a passing build proves the two chains ran side by side.
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
import unittest

from harness_modules import PYDIR, load

kg_nvcc = load("kg_nvcc")
WRAPPER = os.path.join(PYDIR, "kg_nvcc.py")

# The stand-in tools: one script, told which tool it is by its name.
TOOL = r"""
import hashlib, os, sys, time
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
def opt(flag):
    return args[args.index(flag) + 1] if flag in args else None
def read(p):
    with open(p) as f:
        return f.read()
def write(p, text):
    with open(p, "w") as f:
        f.write(text)
log = os.environ["FAKE_LOG"]
with open(log, "a") as f:
    f.write(name + " " + (args[-1] if args else "") + "\n")
def wait_for(marker, who):
    deadline = time.time() + 20
    while not os.path.exists(marker):
        if time.time() > deadline:
            sys.exit("%s: %s never appeared" % (name, os.path.basename(marker)))
        time.sleep(0.01)
if name == "gcc":
    if "-E" in args:
        write(os.path.join(os.path.dirname(opt("-o")), "preprocess-started"), "")
        src = args[args.index("-o") - 1]
        write(opt("-o"), ("DEVICE " if any(a.startswith("-D__CUDA_ARCH__=") for a in args) else "HOST ") + read(src))
        if opt("-MF"):
            write(opt("-MF"), opt("-o") + ": " + src + "\n")
    else:
        cpp = args[args.index("-o") - 1]
        host = read(cpp)
        stub = read(os.path.join(os.path.dirname(cpp), host.split("include ")[1].split()[0]))
        host_id, device_id = host.split("id=")[1].split()[0], stub.split("id=")[1].split()[0]
        if host_id != device_id:
            sys.exit("module id mismatch: host %s device %s" % (host_id, device_id))
        write(opt("-o"), "object id=%s\n%s%s" % (host_id, host, stub))
elif name == "cudafe++":
    src = args[-1]
    id_file = opt("--module_id_file_name")
    if "--gen_module_id_file" in args:
        if "kg_module_id" in read(src):
            # The id's own step runs beside the preprocessors.
            wait_for(os.path.join(os.path.dirname(src), "preprocess-started"), name)
        write(id_file, "id_" + hashlib.sha256(read(src).encode()).hexdigest()[:8])
    else:
        write(os.path.join(os.path.dirname(id_file), "cudafe-started"), "")
        # The reader: only side by side does cicc start before it ends.
        wait_for(os.path.join(os.path.dirname(id_file), "cicc-started"), name)
    print("cudafe++ warning: a word from the front end")
    write(opt("--gen_c_file_name"), "host id=%s include %s\n" % (read(id_file), opt("--stub_file_name")))
elif name == "cicc":
    out = opt("-o")
    write(os.path.join(os.path.dirname(out), "cicc-started"), "")
    if os.environ.get("FAKE_MODE") == "cicc-fails":
        sys.exit("cicc: error: the kernel does not compile")
    write(out, "ptx id=%s\n" % read(opt("--module_id_file_name")))
    write(opt("--stub_file_name"), "stub id=%s\n" % read(opt("--module_id_file_name")))
elif name == "ptxas":
    write(opt("-o"), read(args[args.index("-o") - 1]))
elif name == "fatbinary":
    pass
elif name == "nvlink":
    pass
"""

# The stand-in nvcc: `-dryrun` lists the chain; otherwise it compiles in turn (marked "serial").
NVCC = r"""
import os, subprocess, sys, time
args = sys.argv[1:]
tmp = os.environ.get("TMPDIR", "/tmp")
mode = os.environ.get("FAKE_MODE", "ok")
if "-M" in args:
    # The dependency file alone: only beside the chains does cudafe++ (the reader) start
    # before this ends. nvcc's internal variables are not in its environment.
    assert "_NVVM_BRANCH_" not in os.environ and "-c" not in args and "-o" not in args, args
    deadline = time.time() + 20
    while not os.path.exists(os.path.join(tmp, "cudafe-started")):
        if time.time() > deadline:
            sys.exit("nvcc -M: cudafe-started never appeared")
        time.sleep(0.01)
    with open(args[args.index("-MF") + 1], "w") as f:
        f.write("%s: %s\n" % (args[args.index("-MT") + 1], args[args.index("-M") - 1]))
    sys.exit(0)
src = args[args.index("-c") + 1]
obj = args[args.index("-o") + 1]
if "-dryrun" not in args:
    if mode == "cicc-fails":
        print("x.cu(3): error: the kernel does not compile (nvcc)", file=sys.stderr)
        sys.exit(2)
    with open(obj, "w") as f:
        f.write("serial\n")
    if "-MF" in args:
        open(args[args.index("-MF") + 1], "w").close()
    sys.exit(0)
t = lambda s: '"%s/tmpxft_0000beef_00000000-%s"' % (tmp, s)
depfile = args[args.index("-MF") + 1] if "-MF" in args else None
# CUDA 13 with -MD: the host preprocessor writes a raw list, then nvcc filters it itself.
dep = ' -MD -MF %s' % t("7_x.cudafe1.d") if depfile else ""
lines = [
    "_NVVM_BRANCH_=nvvm",
    "_SPACE_= ",
    "_TARGET_DIR_=",
    "_TARGET_DIR_=targets/x86_64-linux",
    'INCLUDES="-I/usr/local/cuda/bin/../targets/x86_64-linux/include"  ',
    'LIBRARIES=  "-L/usr/local/cuda/lib64/stubs" "-L/usr/local/cuda/lib64"',
    "rm tmp/a_dlink.reg.c",
] + [
    'gcc -D__CUDA_ARCH_LIST__=900 -E -x c++ -D__CUDACC__%s "%s" -o %s ' % (dep, src, t("5_x.cpp4.ii")),
] + (["-- Filter Dependencies -- > %s" % depfile] if depfile else []) + [
    'cudafe++ --c++17 --orig_src_file_name "x.cu" --gen_c_file_name %s --stub_file_name %s --gen_module_id_file --module_id_file_name %s %s '
    % (t("6_x.cudafe1.cpp"), '"tmpxft_0000beef_00000000-6_x.cudafe1.stub.c"', t("4_x.module_id"), t("5_x.cpp4.ii")),
    'gcc -D__CUDA_ARCH__=900 -D__CUDA_ARCH_LIST__=900 -E -x c++ "%s" -o %s ' % (src, t("9_x.cpp1.ii")),
    'cicc --c++17 -arch compute_90 --module_id_file_name %s --gen_c_file_name %s --stub_file_name %s --gen_device_file_name %s %s -o %s'
    % (t("4_x.module_id"), t("6_x.cudafe1.c"), t("6_x.cudafe1.stub.c"), t("6_x.cudafe1.gpu"), t("9_x.cpp1.ii"), t("6_x.ptx")),
    'ptxas -arch=sm_90 -m64 %s -o %s ' % (t("6_x.ptx"), t("10_x.sm_90.cubin")),
    'fatbinary --create=%s -64 "--image3=kind=elf,sm=90,file=%s" ' % (t("3_x.fatbin"), t("10_x.sm_90.cubin")[1:-1]),
]
if mode == "unknown-tool":
    lines.append("nvlink --arch=sm_90 %s" % t("10_x.sm_90.cubin"))
lines += ["rm %s" % t("3_x.fatbin")[1:-1], 'gcc -D__CUDA_ARCH_LIST__=900 -c -x c++ -m64 %s -o "%s" ' % (t("6_x.cudafe1.cpp"), obj)]
for line in lines:
    print("#$ " + line, file=sys.stderr)
"""


def _read(path):
    with open(path) as f:
        return f.read()


class StandIn:
    """A folder with the stand-in nvcc and tools on PATH, and a source to compile."""

    def __init__(self, source="__global__ void k() {}\n"):
        self.dir = tempfile.TemporaryDirectory(prefix="kg-nvcc-test-")
        root = self.dir.name
        self.bin = os.path.join(root, "bin")
        os.makedirs(self.bin)
        for name in ("gcc", "cudafe++", "cicc", "ptxas", "fatbinary", "nvlink"):
            self._script(name, TOOL)
        self.nvcc = self._script("nvcc", NVCC)
        self.tmp = os.path.join(root, "tmp")
        os.makedirs(self.tmp)
        self.log = os.path.join(root, "log")
        self.source = self.write("cuda.cu", source)

    def _script(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write(f"#!{sys.executable}\n" + textwrap.dedent(body))
        os.chmod(path, 0o755)
        return path

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def compile(self, mode="ok", extra=(), deps=True):
        """Runs the wrapper as ninja would (`-MD -MF <object>.d` unless `deps` is off); returns
        (exit status, output, object text)."""
        obj = os.path.join(self.dir.name, "cuda.cuda.o")
        if os.path.exists(obj):
            os.remove(obj)
        env = dict(
            os.environ, PATH=self.bin + os.pathsep + os.environ["PATH"], TMPDIR=self.tmp, FAKE_LOG=self.log, FAKE_MODE=mode
        )
        dep = ["-MD", "-MF", obj + ".d"] if deps else []
        args = [sys.executable, WRAPPER, self.nvcc, *extra, *dep, "-c", self.source, "-o", obj]
        p = subprocess.run(args, env=env, cwd=self.dir.name, capture_output=True, text=True, timeout=120)
        text = _read(obj) if os.path.exists(obj) else None
        return p.returncode, p.stdout + p.stderr, text

    def close(self):
        self.dir.cleanup()


class SideBySide(unittest.TestCase):
    def setUp(self):
        self.s = StandIn()

    def tearDown(self):
        self.s.close()

    def test_the_two_chains_run_side_by_side_and_agree_on_one_module_id(self):
        rc, out, obj = self.s.compile()
        self.assertEqual(rc, 0, out)
        # Not nvcc's own serial compile: the chains ran (cudafe++ waited for cicc to start).
        self.assertNotIn("serial", obj)
        first = obj.splitlines()[0]
        self.assertRegex(first, r"^object id=id_[0-9a-f]{8}$")
        self.assertIn("stub " + first.split()[1], obj)
        # The tools' own words come through; the dependency file torch asks for is there.
        self.assertIn("a word from the front end", out)
        self.assertTrue(os.path.isfile(obj_path(self.s) + ".d"))
        # Where the time went, beside the object: every step, by chain.
        with open(obj_path(self.s) + ".kg_nvcc.json") as f:
            times = json.load(f)
        chains = [(t["chain"], t["tool"]) for t in times["steps"]]
        self.assertEqual(
            sorted(chains),
            sorted(
                [
                    ("id", "cudafe++"),
                    ("deps", "nvcc"),
                    ("host", "gcc"),
                    ("host", "cudafe++"),
                    ("device", "gcc"),
                    ("device", "cicc"),
                    ("device", "ptxas"),
                    ("device", "fatbinary"),
                    ("last", "gcc"),
                ]
            ),
        )
        self.assertGreaterEqual(times["total_s"], max(t["end_s"] for t in times["steps"]))
        # Intermediate files went to a private folder under TMPDIR, removed after.
        self.assertEqual(os.listdir(self.s.tmp), [])

    def test_the_dependency_file_is_nvccs_own_written_beside_the_chains(self):
        # CUDA 13 lists `-- Filter Dependencies -- > file` for -MD, a step inside nvcc: the
        # chains are listed without -MD, and nvcc -M writes the file while they run.
        rc, out, obj = self.s.compile()
        self.assertEqual(rc, 0, out)
        self.assertNotIn("serial", obj)
        self.assertNotIn("not the chain", out)
        self.assertEqual(_read(obj_path(self.s) + ".d"), "%s: %s\n" % (obj_path(self.s), self.s.source))
        # Without a dependency file asked, none is written and no nvcc -M runs.
        os.remove(obj_path(self.s) + ".d")
        rc, out, obj = self.s.compile(deps=False)
        self.assertEqual(rc, 0, out)
        self.assertNotIn("serial", obj)
        self.assertFalse(os.path.exists(obj_path(self.s) + ".d"))
        with open(obj_path(self.s) + ".kg_nvcc.json") as f:
            self.assertNotIn("deps", [t["chain"] for t in json.load(f)["steps"]])

    def test_the_dependency_arguments_split_off_the_compile(self):
        args = ["-MD", "-MF", "o.d", "-ccbin", "g++", "-O3", "-c", "x.cu", "-o", "o.o", "-std=c++17"]
        compile_args, deps = kg_nvcc.split_dependencies(args)
        self.assertEqual(compile_args, ["-ccbin", "g++", "-O3", "-c", "x.cu", "-o", "o.o", "-std=c++17"])
        self.assertEqual(deps, ["-ccbin", "g++", "-O3", "x.cu", "-std=c++17", "-M", "-MT", "o.o", "-MF", "o.d"])
        long = ["--generate-nonsystem-dependencies-with-compile", "--dependency-output", "o.d", "-c", "x.cu", "-o", "o.o"]
        self.assertEqual(kg_nvcc.split_dependencies(long)[1], ["x.cu", "-MM", "-MT", "o.o", "-MF", "o.d"])
        # No file asked: the arguments as they are.
        self.assertEqual(kg_nvcc.split_dependencies(["-c", "x.cu", "-o", "o.o"]), (["-c", "x.cu", "-o", "o.o"], None))

    def test_two_sources_get_two_module_ids(self):
        other = StandIn(source="__global__ void other() {}\n")
        try:
            _, out_a, a = self.s.compile()
            _, out_b, b = other.compile()
            self.assertIsNotNone(a, out_a)
            self.assertIsNotNone(b, out_b)
            self.assertNotEqual(a.splitlines()[0], b.splitlines()[0])
        finally:
            other.close()

    def test_a_step_it_does_not_know_leaves_the_compile_to_nvcc(self):
        rc, out, obj = self.s.compile(mode="unknown-tool")
        self.assertEqual(rc, 0, out)
        self.assertEqual(obj, "serial\n")
        self.assertIn("not the chain this wrapper knows (a step of `nvlink`)", out)
        # Nothing of the chain ran.
        self.assertFalse(os.path.exists(self.s.log))

    def test_a_failed_step_gives_nvcc_itself_and_its_error(self):
        rc, out, obj = self.s.compile(mode="cicc-fails")
        self.assertEqual(rc, 2)
        self.assertIn("a step failed; nvcc runs them in turn", out)
        self.assertIn("error: the kernel does not compile (nvcc)", out)
        self.assertIsNone(obj)
        self.assertEqual(os.listdir(self.s.tmp), [])

    def test_anything_but_one_object_is_nvcc_itself(self):
        for extra in (["-E"], ["--device-c"]):
            rc, out, obj = self.s.compile(extra=extra)
            self.assertEqual(obj, "serial\n", extra)
            self.assertNotIn("side by side", out)
        # `-dryrun` is nvcc's listing, passed through untouched.
        rc, out, obj = self.s.compile(extra=["-dryrun"])
        self.assertEqual(rc, 0)
        self.assertIn("#$ cudafe++", out)
        self.assertIsNone(obj)


def obj_path(standin):
    return os.path.join(standin.dir.name, "cuda.cuda.o")


# nvcc 12.3's own listing for one source (abridged paths), as `parse` reads it.
LISTING = """#$ _NVVM_BRANCH_=nvvm
#$ _SPACE_= 
#$ _TARGET_DIR_=
#$ _TARGET_DIR_=targets/x86_64-linux
#$ PATH=/usr/local/cuda/bin/../nvvm/bin:/usr/local/cuda/bin:/usr/bin
#$ INCLUDES="-I/usr/local/cuda/bin/../targets/x86_64-linux/include"  
#$ LIBRARIES=  "-L/usr/local/cuda/bin/../targets/x86_64-linux/lib/stubs" "-L/usr/local/cuda/bin/../targets/x86_64-linux/lib"
#$ rm S/a_dlink.reg.c
#$ /opt/gcc/bin/gcc -D__CUDA_ARCH_LIST__=900 -E -x c++ -D__CUDACC__ -D__NVCC__ -include "cuda_runtime.h" -m64 "cuda.cu" -o "S/tmpxft_002f43ef_00000000-5_cuda.cpp4.ii" 
#$ cudafe++ --c++17 --gnu_version=130300 --orig_src_file_name "cuda.cu" --gen_c_file_name "S/tmpxft_002f43ef_00000000-6_cuda.cudafe1.cpp" --stub_file_name "tmpxft_002f43ef_00000000-6_cuda.cudafe1.stub.c" --gen_module_id_file --module_id_file_name "S/tmpxft_002f43ef_00000000-4_cuda.module_id" "S/tmpxft_002f43ef_00000000-5_cuda.cpp4.ii" 
#$ /opt/gcc/bin/gcc -D__CUDA_ARCH__=900 -D__CUDA_ARCH_LIST__=900 -E -x c++ -DCUDA_DOUBLE_MATH_FUNCTIONS "cuda.cu" -o "S/tmpxft_002f43ef_00000000-9_cuda.cpp1.ii" 
#$ cicc --c++17 -arch compute_90 --include_file_name "tmpxft_002f43ef_00000000-3_cuda.fatbin.c" -tused --module_id_file_name "S/tmpxft_002f43ef_00000000-4_cuda.module_id" --gen_c_file_name "S/tmpxft_002f43ef_00000000-6_cuda.cudafe1.c" --stub_file_name "S/tmpxft_002f43ef_00000000-6_cuda.cudafe1.stub.c" --gen_device_file_name "S/tmpxft_002f43ef_00000000-6_cuda.cudafe1.gpu" "S/tmpxft_002f43ef_00000000-9_cuda.cpp1.ii" -o "S/tmpxft_002f43ef_00000000-6_cuda.ptx"
#$ ptxas -arch=sm_90 -m64 "S/tmpxft_002f43ef_00000000-6_cuda.ptx" -o "S/tmpxft_002f43ef_00000000-10_cuda.sm_90.cubin" 
#$ fatbinary --create="S/tmpxft_002f43ef_00000000-3_cuda.fatbin" -64 --cicc-cmdline="-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 " "--image3=kind=elf,sm=90,file=S/tmpxft_002f43ef_00000000-10_cuda.sm_90.cubin" --embedded-fatbin="S/tmpxft_002f43ef_00000000-3_cuda.fatbin.c" 
#$ rm S/tmpxft_002f43ef_00000000-3_cuda.fatbin
#$ /opt/gcc/bin/gcc -D__CUDA_ARCH_LIST__=900 -c -x c++ -DCUDA_DOUBLE_MATH_FUNCTIONS -m64 "S/tmpxft_002f43ef_00000000-6_cuda.cudafe1.cpp" -o "cuda.cuda.o" 
"""
ARGS = ["-ccbin", "/opt/gcc/bin/gcc", "-c", "cuda.cu", "-o", "cuda.cuda.o"]


class Parse(unittest.TestCase):
    def test_nvccs_listing_is_placed_host_device_last(self):
        plan = kg_nvcc.parse(LISTING.replace("S/", "/scratch/"), ARGS, "/scratch")
        self.assertEqual([kg_nvcc._tool(s) for s in plan.host], ["gcc", "cudafe++"])
        self.assertEqual([kg_nvcc._tool(s) for s in plan.device], ["gcc", "cicc", "ptxas", "fatbinary"])
        self.assertIn('-o "cuda.cuda.o"', plan.last)
        # The host preprocessor's output is cudafe++'s input: nothing runs aside.
        self.assertEqual(plan.aside, [])
        self.assertEqual(plan.env["_TARGET_DIR_"], "targets/x86_64-linux")
        self.assertEqual(plan.env["INCLUDES"], "-I/usr/local/cuda/bin/../targets/x86_64-linux/include")
        self.assertEqual(plan.env["PATH"], "/usr/local/cuda/bin/../nvvm/bin:/usr/local/cuda/bin:/usr/bin")
        id_only, reader = kg_nvcc.module_id_steps(plan, "abc", tempfile.mkdtemp())
        self.assertNotIn("--gen_module_id_file", reader)
        self.assertIn('--module_id_file_name "/scratch/tmpxft_002f43ef_00000000-4_cuda.module_id"', reader)
        self.assertIn("--gen_module_id_file", id_only)
        self.assertTrue(id_only.rstrip().endswith("kg_module_id.ii"), id_only)
        self.assertNotIn("cuda.cudafe1.cpp", id_only)

    def test_intermediate_files_outside_its_folder_are_not_its_to_run(self):
        with self.assertRaisesRegex(kg_nvcc.NotTheChain, "outside /scratch: /tmp/tmpxft_"):
            kg_nvcc.parse(LISTING.replace("S/", "/tmp/"), ARGS, "/scratch")

    def test_a_cicc_that_writes_the_id_is_another_chain(self):
        old = (
            LISTING.replace("S/", "/scratch/")
            .replace(" --gen_module_id_file", "")
            .replace("-tused --module_id_file_name", "-tused --gen_module_id_file --module_id_file_name")
        )
        with self.assertRaisesRegex(kg_nvcc.NotTheChain, "0 cudafe"):
            kg_nvcc.parse(old, ARGS, "/scratch")

    def test_a_dependency_step_after_the_host_compile_runs_after_it(self):
        listing = (
            LISTING.replace("S/", "/scratch/")
            + '#$ _NVVM_BRANCH_=nvvm\n#$ /opt/gcc/bin/gcc -E -x c++ -M "cuda.cu" > "cuda.cuda.o.d"\n'
        )
        plan = kg_nvcc.parse(listing, ARGS, "/scratch")
        self.assertEqual(plan.aside, [])
        self.assertEqual(len(plan.tail), 1)
        self.assertIn("-M", plan.tail[0])
        # A variable listed again with another value is not a listing this module knows.
        twice = listing + "#$ _NVVM_BRANCH_=other\n"
        with self.assertRaisesRegex(kg_nvcc.NotTheChain, "changed between steps"):
            kg_nvcc.parse(twice, ARGS, "/scratch")

    def test_a_dependency_step_before_the_chains_runs_aside(self):
        dep = (
            '#$ /opt/gcc/bin/gcc -E -x c++ -M -MF "cuda.cuda.o.d" "cuda.cu" -o "/scratch/tmpxft_002f43ef_00000000-11_cuda.deps"\n'
        )
        listing = LISTING.replace("S/", "/scratch/")
        at = listing.index("#$ /opt/gcc/bin/gcc")
        plan = kg_nvcc.parse(listing[:at] + dep + listing[at:], ARGS, "/scratch")
        self.assertEqual(len(plan.aside), 1)
        self.assertEqual([kg_nvcc._tool(s) for s in plan.host], ["gcc", "cudafe++"])

    def test_a_tool_it_does_not_know_is_named(self):
        with self.assertRaisesRegex(kg_nvcc.NotTheChain, "a step of `nvlink`"):
            kg_nvcc.parse(LISTING.replace("S/", "/scratch/") + "#$ nvlink -o x\n", ARGS, "/scratch")


class InstallAndUse(unittest.TestCase):
    SOURCE = "# kg_nvcc, this version\n"

    def test_installed_once_then_named_in_pytorch_nvcc_when_switched_on(self):
        with tempfile.TemporaryDirectory() as root:
            path = kg_nvcc.install(root, self.SOURCE)
            self.assertEqual(_read(path), self.SOURCE)
            self.assertEqual(kg_nvcc.install(root, self.SOURCE), path)
            env = {kg_nvcc.SWITCH: "1"}
            cmd = kg_nvcc.use(root, self.SOURCE, "/usr/local/cuda/bin/nvcc", env, python="/usr/bin/python3")
            self.assertEqual(shlex.split(env["PYTORCH_NVCC"]), ["/usr/bin/python3", path, "/usr/local/cuda/bin/nvcc"])
            self.assertEqual(cmd, env["PYTORCH_NVCC"])

    def test_left_alone_when_off_missing_stale_or_already_set(self):
        with tempfile.TemporaryDirectory() as root:
            nvcc = "/usr/local/cuda/bin/nvcc"
            self.assertIsNone(kg_nvcc.use(root, self.SOURCE, nvcc, {kg_nvcc.SWITCH: "1"}))  # not installed
            path = kg_nvcc.install(root, self.SOURCE)
            self.assertIsNone(kg_nvcc.use(root, self.SOURCE, nvcc, {}))  # switch off
            self.assertIsNone(kg_nvcc.use(root, self.SOURCE, None, {kg_nvcc.SWITCH: "1"}))  # no CUDA
            # The real nvcc is looked up only when the switch is on.
            asked = []
            self.assertIsNone(kg_nvcc.use(root, self.SOURCE, lambda: asked.append(1) or nvcc, {}))
            self.assertEqual(asked, [])
            env = {kg_nvcc.SWITCH: "1"}
            self.assertIsNotNone(kg_nvcc.use(root, self.SOURCE, lambda: asked.append(1) or nvcc, env))
            self.assertEqual(asked, [1])
            mine = {kg_nvcc.SWITCH: "1", "PYTORCH_NVCC": "ccache nvcc"}
            self.assertIsNone(kg_nvcc.use(root, self.SOURCE, nvcc, mine))
            self.assertEqual(mine["PYTORCH_NVCC"], "ccache nvcc")
            # A copy that is not this source's (changed on disk): not run.
            with open(path, "a") as f:
                f.write("import os; os.system('curl evil')\n")
            env = {kg_nvcc.SWITCH: "1"}
            self.assertIsNone(kg_nvcc.use(root, self.SOURCE, nvcc, env))
            self.assertNotIn("PYTORCH_NVCC", env)


if __name__ == "__main__":
    unittest.main()

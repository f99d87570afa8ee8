"""The runner's stage modules on CPU torch: the structural checks (kg_checks.structural), the
problem's work count (kg_work) and the sandbox's audit hook (kg_sandbox, in a child process:
an audit hook cannot be removed).

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import json
import os
import subprocess
import sys
import tempfile
import types
import unittest

import torch

from harness_modules import PYDIR, load


kg_checks = load("kg_checks")
kg_work = load("kg_work")
runner = load("runner")


class T:
    """The captured torch table, as `Runner.capture` builds it."""

    Tensor = torch.Tensor
    storage = torch.Tensor.untyped_storage


class Structural(unittest.TestCase):
    def check(self, outs, refs, args=(), keep=()):
        return kg_checks.structural(T, list(outs), list(refs), list(args), list(keep), 0)

    def test_a_fresh_output_of_the_right_kind_passes(self):
        x = torch.randn(4, 8)
        self.assertIsNone(self.check([torch.relu(x)], [torch.relu(x)], [x]))

    def test_a_missing_output_is_a_shape_mismatch(self):
        r = torch.zeros(3)
        self.assertEqual(self.check([], [r])["kind"], "shape_mismatch")

    def test_a_tensor_subclass_is_not_a_tensor(self):
        class Lazy(torch.Tensor):
            pass

        out = torch.zeros(3).as_subclass(Lazy)
        bad = self.check([out], [torch.zeros(3)])
        self.assertEqual(bad["kind"], "not_a_tensor")
        self.assertIn("Lazy", bad["message"])

    def test_shape_and_dtype_are_checked_in_that_order(self):
        self.assertEqual(self.check([torch.zeros(2, 3)], [torch.zeros(3, 2)])["kind"], "shape_mismatch")
        self.assertEqual(self.check([torch.zeros(3, dtype=torch.float64)], [torch.zeros(3)])["kind"], "dtype_mismatch")

    def test_an_output_that_is_a_view_of_an_input_is_aliased(self):
        x = torch.randn(16)
        bad = self.check([x[4:8]], [torch.zeros(4)], [x])
        self.assertEqual((bad["kind"], bad["output"]), ("output_aliased", 0))
        self.assertIn("input 0", bad["message"])

    def test_two_outputs_sharing_memory_are_aliased(self):
        buf = torch.zeros(8)
        bad = self.check([buf[:4], buf[2:6]], [torch.zeros(4), torch.zeros(4)])
        self.assertEqual(bad["kind"], "output_aliased")
        self.assertIn("outputs 0 and 1", bad["message"])

    def test_returning_a_kept_tensor_again_is_a_cached_result(self):
        earlier = torch.ones(4)
        bad = self.check([earlier], [torch.ones(4)], keep=[earlier])
        self.assertEqual(bad["kind"], "output_aliased")
        self.assertIn("earlier call", bad["message"])

    def test_neighbouring_storages_do_not_overlap(self):
        a, b = torch.zeros(4), torch.zeros(4)
        self.assertFalse(kg_checks.overlaps(T, a, b))
        self.assertTrue(kg_checks.overlaps(T, a, a[1:]))


class Work(unittest.TestCase):
    def test_bytes_count_nested_inputs_and_skip_non_tensors(self):
        xs = [torch.zeros(4, 8), 3, [torch.zeros(2, dtype=torch.float16), (torch.zeros(1, dtype=torch.int64),)]]
        self.assertEqual(kg_work.nbytes(T, xs), 4 * 8 * 4 + 2 * 2 + 8)

    def test_a_linear_layer_counts_two_flops_per_multiply_add(self):
        m, k, n = 16, 32, 8
        layer = torch.nn.Linear(k, n, bias=False)
        self.assertEqual(kg_work.count_flops(torch, layer, [torch.randn(m, k)]), 2 * m * k * n)

    def test_elementwise_ops_count_no_flops(self):
        self.assertEqual(kg_work.count_flops(torch, torch.nn.ReLU(), [torch.randn(64)]), 0)


SANDBOX_CHILD = """
import json, os, sys, types
sys.path.insert(0, sys.argv[1])
import kg_sandbox
seen = []
policy = types.SimpleNamespace(**json.loads(sys.argv[2]))
kg_sandbox.install(policy, lambda rule, sev, msg: seen.append([rule, sev, msg]))
inside = os.path.join(sys.argv[3], "inside.txt")
open(inside, "w").close()
try:
    open(os.path.join(sys.argv[4], "outside.txt"), "w").close()
except OSError:
    pass
try:
    open("/proc/1/environ").close()
except OSError:
    pass
open("/proc/self/maps").close()
import socket
a, b = socket.socketpair()
a.close(); b.close()
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
except OSError:
    pass
print(json.dumps(seen))
"""


class SandboxHook(unittest.TestCase):
    def test_writes_outside_the_job_and_other_processes_are_named_and_the_rest_is_quiet(self):
        with tempfile.TemporaryDirectory() as job, tempfile.TemporaryDirectory() as elsewhere:
            policy = {
                "read_exec": [sys.prefix, "/usr", "/proc"],
                "read_files": [],
                "read_write": [os.path.realpath(job)],
                "denied_syscalls": {"ptrace": 101},
                "denied_from_candidate": {},
                "level": "off",
            }
            out = subprocess.run(
                [sys.executable, "-c", SANDBOX_CHILD, PYDIR, json.dumps(policy), job, elsewhere],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            seen = json.loads(out.stdout.strip().splitlines()[-1])
        messages = [m for _, _, m in seen]
        self.assertTrue(all(rule == "sandbox-denied" and sev == "error" for rule, sev, _ in seen), seen)
        self.assertTrue(any("outside.txt" in m and "NOT blocked (sandbox off)" in m for m in messages), messages)
        self.assertTrue(any("/proc/1/environ" in m for m in messages), messages)
        self.assertFalse(any("inside.txt" in m for m in messages), messages)
        # Its own /proc entries (under the pid the host's /proc gives it) and a socketpair are
        # quiet; a UNIX socket, which reaches servers by path, is named.
        self.assertFalse(any("/maps" in m for m in messages), messages)
        self.assertEqual(sum("UNIX socket" in m for m in messages), 1, messages)


class RunnerUsesTheStageModules(unittest.TestCase):
    def test_the_runner_reads_every_stage_module_the_harness_installs(self):
        # The harness sets these globals (crates/harness/src/lib.rs); a name the runner reads
        # but the harness never sets would be None on the GPU.
        units = ("kg_context", "kg_trials", "kg_precision", "kg_timed")
        for name in ("kg_audit", "kg_protocol", "kg_checks", "kg_sandbox", "kg_work", "kg_integrity", "kg_pch") + units:
            self.assertTrue(hasattr(runner, name), name)
        with open(os.path.join(PYDIR, "..", "src", "lib.rs")) as f:
            lib = f.read()
        for name in ("kg_protocol", "kg_checks", "kg_sandbox", "kg_work", "kg_integrity", "kg_pch") + units:
            self.assertIn(f'"{name}",', lib, f"the harness does not install {name}")
            self.assertIn(f'include_str!("../python/{name}.py")', lib, name)

    def test_every_module_a_unit_reads_is_linked(self):
        # A unit's module slot (`kg_checks = None`, ...) is filled by `runner._link`; one it
        # never fills would be None in the harness.
        linked = {"kg_context", "kg_checks", "kg_work", "kg_judge"}
        for unit in ("kg_trials", "kg_precision", "kg_timed"):
            module = load(unit)
            slots = {n for n, v in vars(module).items() if n.startswith("kg_") and v is None}
            self.assertEqual(slots - linked, set(), unit)
            self.assertTrue(slots, unit)

    def test_linking_hands_the_runner_s_modules_to_its_units(self):
        r = load("runner")
        for name in ("kg_context", "kg_checks", "kg_work", "kg_trials", "kg_precision", "kg_timed"):
            setattr(r, name, load(name))
        r.kg_judge = object()
        r._link()
        for unit in (r.kg_trials, r.kg_precision, r.kg_timed):
            self.assertIs(unit.kg_checks, r.kg_checks)
            self.assertIs(unit.kg_work, r.kg_work)
        self.assertIs(r.kg_trials.kg_context, r.kg_context)
        self.assertIs(r.kg_timed.kg_judge, r.kg_judge)


if __name__ == "__main__":
    unittest.main()


class LoadOnly(unittest.TestCase):
    """A prebuilt base kernel's import (runner._load_only): torch's JIT build loads what the
    base's build job left and compiles nothing; a missing library is an error naming it."""

    def setUp(self):
        import torch.utils.cpp_extension as cpp_extension

        self.cpp_extension = cpp_extension
        self.root = tempfile.mkdtemp()
        self.loaded = []
        self.real_import = cpp_extension._import_module_from_library
        cpp_extension._import_module_from_library = lambda name, path, py: self.loaded.append((name, path, py)) or "module"
        self.env = os.environ.get("TORCH_EXTENSIONS_DIR")
        os.environ["TORCH_EXTENSIONS_DIR"] = self.root

    def tearDown(self):
        self.cpp_extension._import_module_from_library = self.real_import
        if self.env is None:
            os.environ.pop("TORCH_EXTENSIONS_DIR", None)
        else:
            os.environ["TORCH_EXTENSIONS_DIR"] = self.env

    def load_inline(self):
        return self.cpp_extension.load_inline("kg_base_ops", cpp_sources="int f() { return 1; }", functions=["f"])

    def test_the_built_library_is_loaded_and_nothing_is_compiled(self):
        build = os.path.join(self.root, "kg_base_ops")
        os.makedirs(build)
        open(os.path.join(build, "kg_base_ops.so"), "w").close()
        original = self.cpp_extension._jit_compile
        with runner._load_only():
            self.assertEqual(self.load_inline(), "module")
        self.assertIs(self.cpp_extension._jit_compile, original)
        self.assertEqual(self.loaded, [("kg_base_ops", build, True)])
        # No build file, no lock: the build job's directory is as it left it (plus sources torch
        # writes only when they differ, which for the same source they do not).
        self.assertNotIn("build.ninja", os.listdir(build))
        self.assertNotIn("lock", os.listdir(build))

    def test_a_base_whose_build_failed_is_an_error_naming_the_library(self):
        with runner._load_only():
            with self.assertRaisesRegex(RuntimeError, "kg_base_ops.so.*did not build"):
                self.load_inline()
        self.assertEqual(self.loaded, [])


class NoGpuReason(unittest.TestCase):
    """`runner.cuda_failure`: the row of a job that asked for CUDA and got none says why."""

    def fake_torch(self, built=True, init_error=None):
        def init():
            if init_error is not None:
                raise init_error

        return types.SimpleNamespace(
            backends=types.SimpleNamespace(cuda=types.SimpleNamespace(is_built=lambda: built)),
            cuda=types.SimpleNamespace(init=init),
        )

    def test_a_torch_without_cuda_says_so(self):
        self.assertIn("built without CUDA", runner.cuda_failure(self.fake_torch(built=False)))

    def test_the_drivers_error_304_points_at_the_sandbox(self):
        # torch's own text on an H100 whose driver could not make socket(AF_UNIX).
        e = RuntimeError(
            "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
            "NumCudaDevices() that might have already set an error? Error 304: OS call failed or "
            "operation not supported on this OS"
        )
        msg = runner.cuda_failure(self.fake_torch(init_error=e))
        self.assertTrue(msg.startswith("Error 304: OS call failed"), msg)
        self.assertIn("KERNELGATE_SANDBOX=off", msg)
        self.assertIn("docs/sandbox.md", msg)

    def test_any_other_reason_is_torchs_with_the_usual_advice(self):
        e = RuntimeError("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU")
        msg = runner.cuda_failure(self.fake_torch(init_error=e))
        self.assertIn("Found no NVIDIA driver", msg)
        self.assertIn("CUDA_VISIBLE_DEVICES", msg)
        self.assertNotIn("KERNELGATE_SANDBOX", msg)

    def test_this_machines_torch_gives_a_reason(self):
        # The real torch of the test venv (no GPU here): whatever it says, it is said.
        self.assertGreater(len(runner.cuda_failure(torch)), 20)

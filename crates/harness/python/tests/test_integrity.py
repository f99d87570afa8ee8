"""The witness of PyTorch's state (kg_integrity), on CPU torch: what the reference runs on is
compared before and after the candidate's import (issues 27 and 28). Each test runs in a child
process, since what it changes (a replaced op, a dispatcher entry, a mode) cannot be undone
reliably in this one.

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.normpath(os.path.join(HERE, ".."))

PRELUDE = f"""
import importlib.util, json, sys
import torch
spec = importlib.util.spec_from_file_location("kg_integrity", {os.path.join(PYDIR, "kg_integrity.py")!r})
K = importlib.util.module_from_spec(spec); spec.loader.exec_module(K)
ref = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
w = K.Witness(torch, ref)
"""
EPILOGUE = """
out = {"changes": w.changes(), "restored": w.restore_settings(), "threads": torch.get_num_threads()}
print(json.dumps(out))
"""


def witness(candidate):
    code = PRELUDE + candidate + EPILOGUE
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def rules(out):
    return sorted(c[0] for c in out["changes"])


class Witness(unittest.TestCase):
    def test_an_honest_import_of_torch_subsystems_changes_nothing(self):
        # Dynamo wraps `torch.manual_seed` and `nn.Module.__init__` itself: torch's own code.
        out = witness(
            "import torch._dynamo, torch.utils.cpp_extension, torch.utils.flop_counter, torch.profiler\n"
            "lib = torch.library.Library('kgtest', 'DEF')\n"
            "lib.define('fused(Tensor x) -> Tensor')\n"
            "lib.impl('fused', lambda x: x.relu(), 'CPU')\n"
            "with torch.profiler.profile():\n    ref(torch.randn(2, 8))\n"
        )
        self.assertEqual(out["changes"], [])
        self.assertIsNone(out["restored"])

    def test_an_op_wrapped_at_import_is_torch_patched(self):
        out = witness(
            "_relu = torch.relu\n"
            "def slow(x, *a, **k):\n    _relu(x); return _relu(x, *a, **k)\n"
            "torch.relu = slow\n"
            "torch.nn.ReLU.forward = lambda self, x: slow(x)\n"
        )
        self.assertEqual(rules(out), ["torch-patched"])
        msg = out["changes"][0][2]
        self.assertIn("torch.relu", msg)
        self.assertIn("ReLU.forward", msg)

    def test_a_swap_for_another_torch_function_is_torch_patched(self):
        out = witness("torch.nn.functional.relu = torch.nn.functional.relu6\n")
        self.assertEqual(rules(out), ["torch-patched"])

    def test_a_dispatcher_override_of_an_aten_op_is_harness_hooked(self):
        out = witness("lib = torch.library.Library('aten', 'IMPL')\nlib.impl('addmm', lambda *a, **k: torch.zeros(()), 'CPU')\n")
        self.assertEqual(rules(out), ["harness-hooked"])
        self.assertIn("aten::addmm", out["changes"][0][2])

    def test_a_dispatch_mode_left_on_the_stack_is_harness_hooked(self):
        out = witness(
            "from torch.utils._python_dispatch import TorchDispatchMode\n"
            "class Defer(TorchDispatchMode):\n"
            "    def __torch_dispatch__(self, f, t, a=(), k=None):\n        return f(*a, **(k or {}))\n"
            "Defer().__enter__()\n"
        )
        self.assertEqual(rules(out), ["harness-hooked"])
        self.assertIn("TorchDispatchMode", out["changes"][0][2])

    def test_a_function_mode_left_on_the_stack_is_harness_hooked(self):
        out = witness(
            "from torch.overrides import TorchFunctionMode\n"
            "class Defer(TorchFunctionMode):\n"
            "    def __torch_function__(self, f, t, a=(), k=None):\n        return f(*a, **(k or {}))\n"
            "Defer().__enter__()\n"
        )
        self.assertEqual(rules(out), ["harness-hooked"])

    def test_changed_settings_are_put_back_and_named(self):
        out = witness("torch.set_num_threads(1)\ntorch.backends.cuda.matmul.allow_tf32 = True\n")
        self.assertEqual(out["changes"], [])
        self.assertEqual(out["restored"][0], "torch-settings-changed")
        self.assertIn("allow_tf32", out["restored"][2])
        self.assertNotEqual(out["threads"], 1)


if __name__ == "__main__":
    unittest.main()

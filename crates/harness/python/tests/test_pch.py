"""The precompiled torch header's entries (kg_pch): what keys an entry, when the runner offers
one to a build, and torch's own flags read back. No gcc here: `kernelgate pch`'s build and
gcc's use of it are tested end to end (tests/it/eval.rs), the sandbox's refusal of a
candidate's write in tests/it/sandbox.rs.

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import importlib.util
import os
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("kg_pch", os.path.join(HERE, "..", "kg_pch.py"))
kg_pch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kg_pch)


class Entries(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        top = self.dir.name
        os.makedirs(os.path.join(top, "torch", "include", "torch"))
        self.header = os.path.join(top, "torch", "include", "torch", "extension.h")
        with open(self.header, "w") as f:
            f.write("#pragma once\n")
        self.torch = types.SimpleNamespace(__file__=os.path.join(top, "torch", "__init__.py"), __version__="2.11.0")
        self.root = os.path.join(top, "pch")

    def tearDown(self):
        self.dir.cleanup()

    def key(self):
        return kg_pch.key(kg_pch.facts(self.torch))

    def test_another_torch_or_a_changed_header_is_another_entry(self):
        first = self.key()
        self.assertEqual(first, self.key(), "the key is stable")
        self.torch.__version__ = "2.12.0"
        second = self.key()
        self.assertNotEqual(first, second, "a torch upgrade must not find the old entry")
        with open(self.header, "a") as f:
            f.write("// patched\n")
        self.assertNotEqual(second, self.key(), "a changed header must not find the old entry")

    def test_only_a_whole_entry_is_offered_and_it_goes_first_on_cpath(self):
        entry = os.path.join(self.root, self.key())
        os.makedirs(os.path.join(entry, "torch", "extension.h.gch"))
        env = {"CPATH": "/opt/include"}
        self.assertIsNone(kg_pch.use(self.root, self.torch, env), "no manifest: still being built")
        self.assertEqual(env, {"CPATH": "/opt/include"})
        with open(os.path.join(entry, kg_pch.MANIFEST), "w") as f:
            f.write("{}")
        self.assertEqual(kg_pch.use(self.root, self.torch, env), entry)
        self.assertEqual(env["CPATH"], entry + os.pathsep + "/opt/include")
        fresh = {}
        kg_pch.use(self.root, self.torch, fresh)
        self.assertEqual(fresh["CPATH"], entry)
        # A worker started with the runner's environment: the entry stays first, once.
        self.assertEqual(kg_pch.use(self.root, self.torch, env), entry)
        self.assertEqual(env["CPATH"], entry + os.pathsep + "/opt/include")

    def test_no_root_or_no_header_offers_nothing(self):
        env = {}
        self.assertIsNone(kg_pch.use(None, self.torch, env))
        os.remove(self.header)
        self.assertIsNone(kg_pch.use(self.root, self.torch, env))
        self.assertEqual(env, {})


class TorchFlags(unittest.TestCase):
    def test_the_flags_are_torchs_own_for_a_cpp_source_without_the_extension_name(self):
        import torch

        flags = kg_pch.torch_cflags(torch)
        self.assertIn("-DTORCH_API_INCLUDE_EXTENSION_H", flags)
        self.assertIn("-fPIC", flags)
        self.assertTrue(any(f.startswith("-std=") for f in flags), flags)
        self.assertFalse(any(f.startswith("-DTORCH_EXTENSION_NAME") for f in flags), flags)
        include = os.path.join(os.path.dirname(torch.__file__), "include")
        self.assertIn(include, flags, "torch's headers as -isystem")


if __name__ == "__main__":
    unittest.main()

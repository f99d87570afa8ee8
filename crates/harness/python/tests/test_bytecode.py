"""Bytecode compiled by `kernelgate pch` (kg_bytecode): a child reads a package's modules from
the tree instead of compiling their source, only when the package has no bytecode of its own,
and writes nothing.

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import os
import subprocess
import sys
import tempfile
import unittest

from harness_modules import PYDIR, load

kg_bytecode = load("kg_bytecode")

# A child that points its prefix at the tree as the harness does, imports the package and says
# what it read: the value of `pkg.mod.X`, where the module came from, whether a prefix was set.
CHILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("kg_bytecode", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
used = m.use(sys.argv[2], name="pkg")
import pkg.mod
print(pkg.mod.X, used is not None, pkg.mod.__cached__)
"""


def write(path, text, mtime=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))


class TreeIsRead(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.site = os.path.join(self.dir.name, "site")
        self.root = os.path.join(self.dir.name, "pch")
        self.mtime = 1_700_000_000 * 10**9
        write(os.path.join(self.site, "pkg", "__init__.py"), "", self.mtime)
        write(os.path.join(self.site, "pkg", "mod.py"), "X = 1\n", self.mtime)

    def tearDown(self):
        self.dir.cleanup()

    def child(self):
        env = dict(os.environ, PYTHONPATH=self.site, PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONPYCACHEPREFIX", None)
        out = subprocess.run(
            [sys.executable, "-c", CHILD, os.path.join(PYDIR, "kg_bytecode.py"), self.root],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        x, used, cached = out.stdout.split()
        return x, used == "True", cached

    def pyc_files(self, top):
        return [f for _, _, files in os.walk(top) for f in files if f.endswith(".pyc")]

    def test_a_package_without_bytecode_is_read_from_the_tree(self):
        count = kg_bytecode.compile_into(kg_bytecode.tree(self.root), [self.site], workers=1)
        self.assertEqual(count, 2)
        # Same size and time, other text: only a read of the compiled file can give X = 1.
        write(os.path.join(self.site, "pkg", "mod.py"), "X = 2\n", self.mtime)
        x, used, cached = self.child()
        self.assertTrue(used)
        self.assertEqual(x, "1")
        self.assertTrue(cached.startswith(kg_bytecode.tree(self.root)), cached)
        self.assertEqual(self.pyc_files(self.site), [], "the package got bytecode beside it")

    def test_a_changed_source_is_compiled_again_not_read_stale(self):
        kg_bytecode.compile_into(kg_bytecode.tree(self.root), [self.site], workers=1)
        write(os.path.join(self.site, "pkg", "mod.py"), "X = 22\n")
        x, used, _ = self.child()
        self.assertTrue(used)
        self.assertEqual(x, "22")

    def test_a_package_with_its_own_bytecode_keeps_reading_it(self):
        kg_bytecode.compile_into(kg_bytecode.tree(self.root), [self.site], workers=1)
        import py_compile

        for name in ("__init__", "mod"):
            src = os.path.join(self.site, "pkg", name + ".py")
            own = os.path.join(self.site, "pkg", "__pycache__", f"{name}.{sys.implementation.cache_tag}.pyc")
            py_compile.compile(src, cfile=own, doraise=True)
        self.assertTrue(kg_bytecode.has_own_bytecode("pkg", [self.site]))
        x, used, cached = self.child()
        self.assertFalse(used)
        self.assertEqual(x, "1")
        self.assertTrue(cached.startswith(os.path.join(self.site, "pkg", "__pycache__")), cached)

    def test_no_tree_no_root_or_no_package_sets_no_prefix(self):
        self.assertIsNone(kg_bytecode.use(None, name="pkg", path=[self.site]))
        self.assertIsNone(kg_bytecode.use(self.root, name="pkg", path=[self.site]))  # no tree yet
        os.makedirs(kg_bytecode.tree(self.root))
        self.assertTrue(kg_bytecode.has_own_bytecode("not_installed", [self.site]))
        self.assertIsNone(kg_bytecode.use(self.root, name="not_installed", path=[self.site]))

    def test_build_compiles_nothing_where_torch_has_its_own_bytecode(self):
        import py_compile

        src = os.path.join(self.site, "pkg", "__init__.py")
        own = os.path.join(self.site, "pkg", "__pycache__", f"__init__.{sys.implementation.cache_tag}.pyc")
        py_compile.compile(src, cfile=own, doraise=True)
        tree, line = kg_bytecode.build(self.root, log=lambda m: None, name="pkg", path=[self.site])
        self.assertIsNone(tree)
        self.assertIn("nothing to compile", line)
        self.assertFalse(os.path.exists(kg_bytecode.tree(self.root)))

    def test_the_compiled_directories_are_the_interpreters_own_and_not_nested(self):
        dirs = kg_bytecode.source_dirs()
        self.assertTrue(dirs)
        for a in dirs:
            for b in dirs:
                if a != b:
                    self.assertFalse(b.startswith(a + os.sep), (a, b))
        self.assertTrue(any(os.path.isfile(os.path.join(d, "os.py")) for d in dirs), dirs)


if __name__ == "__main__":
    unittest.main()

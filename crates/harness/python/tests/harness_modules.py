"""The harness's Python modules as the tests load them: from the source folder beside this one,
each a fresh module not left in `sys.modules` under its own name."""

import importlib.util
import os

PYDIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(PYDIR, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

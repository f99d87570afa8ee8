"""The job protocol on the runner's side (kg_protocol): what it refuses, and that the runner
reads no field the protocol does not have (a typo in a GPU-only branch would otherwise surface
only on a GPU).

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import ast
import json
import os
import unittest
from dataclasses import asdict, fields

from test_memory import HERE, load

kg_protocol = load("kg_protocol")


def job(**over):
    j = {
        "protocol": kg_protocol.PROTOCOL,
        "job_id": "00ff",
        "problem": "/p.py",
        "kernel": "/k.py",
        "base_kernel": None,
        "base_extensions_dir": None,
        "base_prebuilt": False,
        "prebuilt": False,
        "device": "cuda",
        "cpu_backend": False,
        "precision": "fp32",
        "tolerance": 1e-4,
        "trials": 5,
        "seed": 42,
        "shifted_trials": 1,
        "inputs_on_device": True,
        "count_flops": True,
        "audit": True,
        "build_only": False,
        "timing": {
            "warmup": 3,
            "min_samples": 10,
            "max_samples": 200,
            "budget_s": 10,
            "ci_target_pct": 1.0,
            "l2": "cold",
            "input_sets": 3,
        },
        "result_path": "/r",
        "progress_path": "/q",
        "sandbox": None,
        "spawn_unix": 1.5,
    }
    j.update(over)
    return json.dumps(j)


class ParseJob(unittest.TestCase):
    def test_a_job_round_trips(self):
        text = job()
        parsed = kg_protocol.parse_job(text)
        self.assertEqual(parsed.timing.input_sets, 3)
        self.assertIsInstance(parsed.timing.budget_s, float)
        self.assertEqual(asdict(parsed), json.loads(text))

    def test_another_protocol_version_is_refused_with_what_to_do(self):
        with self.assertRaisesRegex(kg_protocol.ProtocolError, "protocol 99 .* install the harness"):
            kg_protocol.parse_job(job(protocol=99))

    def test_unknown_and_missing_fields_are_named(self):
        with self.assertRaisesRegex(kg_protocol.ProtocolError, "unknown field.*trails"):
            kg_protocol.parse_job(job(trails=5))
        j = json.loads(job())
        del j["seed"]
        with self.assertRaisesRegex(kg_protocol.ProtocolError, "lacks field.*seed"):
            kg_protocol.parse_job(json.dumps(j))
        t = json.loads(job())
        t["timing"]["l3"] = "cold"
        with self.assertRaisesRegex(kg_protocol.ProtocolError, r"job\.timing has unknown field.*l3"):
            kg_protocol.parse_job(json.dumps(t))

    def test_wrong_types_are_named(self):
        with self.assertRaisesRegex(kg_protocol.ProtocolError, r"job\.trials must be int, not str"):
            kg_protocol.parse_job(job(trials="5"))
        with self.assertRaisesRegex(kg_protocol.ProtocolError, r"job\.seed must be int, not bool"):
            kg_protocol.parse_job(job(seed=True))
        with self.assertRaisesRegex(kg_protocol.ProtocolError, r"job\.audit must be bool"):
            kg_protocol.parse_job(job(audit=1))


class RunnerReadsOnlyProtocolFields(unittest.TestCase):
    def test_every_job_attribute_the_runner_reads_exists(self):
        names = {f.name for f in fields(kg_protocol.Job)}
        timing = {f.name for f in fields(kg_protocol.Timing)}
        read, read_timing = set(), set()

        def is_job(node):
            # `job`, `self.job`, `ctx.job`, `self.ctx.job`
            return (isinstance(node, ast.Name) and node.id == "job") or (isinstance(node, ast.Attribute) and node.attr == "job")

        # The runner and the units it hands the job to (`kg_context.Context.job`).
        for name in ("runner", "kg_context", "kg_trials", "kg_precision", "kg_timed"):
            with open(os.path.join(HERE, "..", name + ".py")) as f:
                src = f.read()
            for node in ast.walk(ast.parse(src)):
                if not isinstance(node, ast.Attribute):
                    continue
                base = node.value
                if is_job(base):
                    read.add(node.attr)
                if isinstance(base, ast.Attribute) and base.attr == "timing" and is_job(base.value):
                    read_timing.add(node.attr)
        self.assertTrue(read >= {"kernel", "timing", "precision"}, read)
        self.assertEqual(read - names, set())
        self.assertEqual(read_timing - timing, set())


if __name__ == "__main__":
    unittest.main()

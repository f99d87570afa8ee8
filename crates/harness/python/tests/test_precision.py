"""The precision audit of timed calls (kg_precision.audit_timed), on CPU torch: on non-negative
operands a GEMM on TF32 (or bf16) operands stays under the audit's limit, and what tells it from
an fp32 kernel summing in another order is whose rounding its error is."""

import types
import unittest

import torch
import torch.nn as nn

from harness_modules import load

kg_checks = load("kg_checks")
kg_context = load("kg_context")
kg_precision = load("kg_precision")
kg_precision.kg_checks = kg_checks
kg_precision.kg_work = load("kg_work")


class Matmul(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class SequentialMatmul(nn.Module):
    """A reference whose fp32 error is cuBLAS's on an H100 at K = 4096 (about 8e-7): one
    running sum over k."""

    def forward(self, a, b):
        return sequential(a, b)


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4096, 256)

    def forward(self, x):
        return self.fc(x)


def context():
    job = types.SimpleNamespace(precision="fp32", progress_path=None)
    ctx = kg_context.Context(job, None, None)
    ctx.torch = torch
    ctx.T = ctx.capture(torch)
    ctx.dev = torch.device("cpu")
    return ctx


def split_k(a, b, pieces=8):
    """An honest fp32 GEMM that sums in another order (split-K, the partial sums added last)."""
    k = a.shape[1] // pieces
    return sum(torch.matmul(a[:, p * k : (p + 1) * k], b[p * k : (p + 1) * k]) for p in range(pieces))


def sequential(a, b, chunk=1):
    """An honest fp32 GEMM at its least accurate: one running fp32 sum over k."""
    out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
    for p in range(0, a.shape[1], chunk):
        out += torch.matmul(a[:, p : p + chunk], b[p : p + chunk])
    return out


def narrowed_matmul(fmt):
    return lambda a, b: torch.matmul(kg_checks.narrowed(torch, a, fmt), kg_checks.narrowed(torch, b, fmt))


class TimedAudit(unittest.TestCase):
    def audit(self, model, inputs, candidate_outputs):
        ctx = context()
        precision = kg_precision.Precision(ctx)
        refs = ctx.reference(model, inputs, 0)
        precision.audit_timed(model, 0, inputs, refs, candidate_outputs)
        self.timed = precision.timed_result()["timed"]
        return [f for f in ctx.findings if f["rule"] == "precision-downgrade"]

    def operands(self, seed=1):
        g = torch.Generator().manual_seed(seed)
        # The benchmark's `torch.rand`: non-negative, no cancellation in the sums.
        return [torch.rand(256, 4096, generator=g), torch.rand(4096, 256, generator=g)]

    def test_narrowed_operands_under_the_limit_are_caught_by_whose_rounding_the_error_is(self):
        a, b = self.operands()
        out = narrowed_matmul("tf32")(a, b)
        # Under the limit on these inputs (K = 4096, as the H100's 7.9x cheat): the magnitude
        # alone does not tell.
        exact = torch.matmul(a.double(), b.double())
        err = kg_checks.relative_error(torch, out.reshape(-1), exact.reshape(-1))
        ref_err = kg_checks.relative_error(torch, torch.matmul(a, b).reshape(-1), exact.reshape(-1))
        self.assertLess(err, kg_checks.precision_limit("fp32", ref_err))
        [finding] = self.audit(Matmul(), [a, b], [out])
        self.assertIn("on tf32 operands", finding["message"])
        # The evidence stays in the result: the errors against each narrowed reference.
        [row] = self.timed
        by_format = {n["format"]: n for n in row["narrowed"]}
        self.assertEqual(set(by_format), set(kg_checks.NARROWER_FORMATS["fp32"]))
        self.assertLess(by_format["tf32"]["error"], 0.1 * row["candidate_error"])
        self.assertGreater(by_format["tf32"]["correlation"], 0.99)
        self.assertAlmostEqual(by_format["tf32"]["coefficient"], 1.0, delta=0.02)

    def test_narrowed_operands_under_an_accumulation_error_as_large_as_theirs_are_caught(self):
        # Tensor cores do not accumulate as IEEE fp32 does: their own error, independent of the
        # operands' rounding and here as large as it, leaves the rounding's trace in place.
        a, b = self.operands(5)
        exact = torch.matmul(a.double(), b.double())
        out = narrowed_matmul("tf32")(a, b)
        g = torch.Generator().manual_seed(6)
        noise = torch.randn(out.shape, generator=g, dtype=torch.float64)
        noise *= float(torch.linalg.vector_norm(out.double() - exact)) / float(torch.linalg.vector_norm(noise))
        [finding] = self.audit(Matmul(), [a, b], [(out.double() + noise).float()])
        self.assertIn("on tf32 operands", finding["message"])
        # Noise added on purpose to hide the trace, six times the rounding's own error, against
        # a reference as inaccurate as cuBLAS's fp32 on the H100 (8e-7: the limit is then 4e-5,
        # and the candidate's 3e-5 stays under it): the correlation falls to 0.16, the
        # coefficient stays 1.
        loud = (out.double() + 6 * noise).float()
        exact_err = kg_checks.relative_error(torch, loud.reshape(-1), exact.reshape(-1))
        ref_err = kg_checks.relative_error(torch, sequential(a, b).reshape(-1), exact.reshape(-1))
        self.assertLess(exact_err, kg_checks.precision_limit("fp32", ref_err))
        [finding] = self.audit(SequentialMatmul(), [a, b], [loud])
        self.assertIn("on tf32 operands", finding["message"])
        tf32 = next(n for n in self.timed[0]["narrowed"] if n["format"] == "tf32")
        self.assertLess(tf32["correlation"], 0.25)
        self.assertAlmostEqual(tf32["coefficient"], 1.0, delta=0.1)
        # Half the operands narrowed (only `a`): still its trace.
        half = torch.matmul(kg_checks.narrowed(torch, a, "tf32"), b)
        [finding] = self.audit(Matmul(), [a, b], [half])
        self.assertIn("on tf32 operands", finding["message"])
        # Truncated TF32 or bf16 operands are biased on these sums: past the limit already.
        for fmt in ("tf32 (truncated)", "bf16"):
            with self.subTest(fmt=fmt):
                [finding] = self.audit(Matmul(), [a, b], [narrowed_matmul(fmt)(a, b)])
                self.assertIn("limit", finding["message"])

    def test_tf32_rounded_by_the_kernel_itself_is_caught(self):
        # The operands rounded to nearest by hand (half a unit added to the bits), then any GEMM.
        a, b = self.operands(2)

        def by_hand(x):
            return (x.view(torch.int32) + 0x1000).bitwise_and(~0x1FFF).view(torch.float32)

        self.assertEqual(len(self.audit(Matmul(), [a, b], [torch.matmul(by_hand(a), by_hand(b))])), 1)

    def test_a_layer_with_narrowed_weights_is_caught(self):
        torch.manual_seed(0)
        model = Linear()
        x = torch.rand(64, 4096)
        w = kg_checks.narrowed(torch, model.fc.weight.detach(), "tf32")
        out = torch.nn.functional.linear(kg_checks.narrowed(torch, x, "tf32"), w, model.fc.bias.detach())
        self.assertEqual(len(self.audit(model, [x], [out])), 1)

    def test_fp32_kernels_in_any_summation_order_pass(self):
        a, b = self.operands(3)
        for name, out in (
            ("same", torch.matmul(a, b)),
            ("split-k", split_k(a, b)),
            ("sequential in chunks of 16", sequential(a, b, 16)),
            ("sequential", sequential(a, b)),
        ):
            with self.subTest(name=name):
                self.assertEqual(self.audit(Matmul(), [a, b], [out]), [])
                # Audited all the same: its error (if large enough to ask) follows no rounding.
                [row] = self.timed
                self.assertTrue(all(abs(n["coefficient"]) < 0.05 for n in row["narrowed"]), row)

    def test_a_signed_problem_keeps_the_magnitude_check(self):
        # Centred operands: TF32 is far past the limit, the first check says so.
        g = torch.Generator().manual_seed(4)
        a, b = torch.randn(256, 1024, generator=g), torch.randn(1024, 256, generator=g)
        [finding] = self.audit(Matmul(), [a, b], [narrowed_matmul("tf32")(a, b)])
        self.assertIn("limit", finding["message"])


class Narrowed(unittest.TestCase):
    def test_formats_round_as_the_hardware_does(self):
        # TF32 keeps 10 mantissa bits: a unit in the last place is 2**-10 at 1.0.
        x = torch.tensor([1.0 + 2**-11, 1.0 + 2**-12, 1.0 + 3 * 2**-12, -(1.0 + 3 * 2**-12)])
        self.assertEqual(kg_checks.narrowed(torch, x, "tf32").tolist(), [1.0 + 2**-10, 1.0, 1.0 + 2**-10, -(1.0 + 2**-10)])
        self.assertEqual(kg_checks.narrowed(torch, x, "tf32 (truncated)").tolist(), [1.0, 1.0, 1.0, -1.0])
        self.assertEqual(kg_checks.narrowed(torch, x, "bf16").dtype, torch.float32)


if __name__ == "__main__":
    unittest.main()

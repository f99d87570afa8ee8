"""The op audit's attribution by code (kg_audit.Auditor.classify), on CPU torch: a GPU kernel a
vendor library's name pattern matches is still the candidate's own when the candidate's code
defines it (its extension binary, its Triton kernels); a library's kernel stays the library's.

Run: .venv/bin/python -m unittest discover -s crates/harness/python/tests
"""

import os
import tempfile
import unittest

import torch

from harness_modules import load

kg_audit = load("kg_audit")


class KernelNames(unittest.TestCase):
    def test_the_functions_own_name_from_demangled_and_mangled_names(self):
        ident = kg_audit._kernel_ident
        self.assertEqual(ident("sgemm_tiled(float const*, float const*, float*, int)"), "sgemm_tiled")
        self.assertEqual(ident("void kg::sgemm_tiled<128, 8>(float const*, float*, int)"), "sgemm_tiled")
        self.assertEqual(ident("void (anonymous namespace)::gemm_kernel<float>(float*)"), "gemm_kernel")
        self.assertEqual(ident("_Z11sgemm_tiledPKfS0_Pfi"), "sgemm_tiled")
        self.assertEqual(ident("_ZN2kg11sgemm_tiledILi128EEEvPKfPfi"), "sgemm_tiled")
        self.assertEqual(ident("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn")
        self.assertIsNone(ident("(float)"))


class AttributionByCode(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def auditor(self, binary=None, triton=()):
        a = kg_audit.Auditor(torch, "cpu")
        if binary is not None:
            path = os.path.join(self.dir.name, "ext%d.so" % len(os.listdir(self.dir.name)))
            with open(path, "wb") as f:
                f.write(b"\x7fELF\x00" + binary + b"\x00")
            a.ext_binaries.append(path)
        a.triton_names.update(triton)
        return a

    def classes(self, a, kernel, chain):
        got = []
        a.classify(kernel, 10.0, chain, {}, lambda label, cls, lib, by, us: got.append((cls, lib)))
        return got

    SGEMM = "sgemm_tiled(float const*, float const*, float*, int)"
    OWN = b"_Z11sgemm_tiledPKfS0_Pfi\x00__device_stub__Z11sgemm_tiledPKfS0_Pfi"

    def test_the_candidates_own_kernel_named_like_a_library_is_custom(self):
        a = self.auditor(self.OWN)
        self.assertEqual(self.classes(a, self.SGEMM, ["kg_ext::sgemm#1"]), [("custom", None)])

    def test_by_name_alone_it_would_be_cublas(self):
        a = self.auditor()  # no binary: nothing known about the candidate's code
        self.assertEqual(self.classes(a, self.SGEMM, ["kg_ext::sgemm#1"]), [("vendor", "cuBLAS")])

    def test_the_librarys_name_in_torchs_headers_is_no_call_of_the_library(self):
        # What torch's CUDA headers leave in every extension: status strings, the handle's type
        # inside mangled names, the header's name. None of it is an import of cuBLAS's API.
        a = self.auditor(self.OWN + b"\x00CUBLAS_STATUS_NOT_INITIALIZED\x00_ZN2at4cuda5blasP13cublasContext\x00cublas_v2.h")
        self.assertEqual(self.classes(a, self.SGEMM, ["kg_ext::sgemm#1"]), [("custom", None)])

    def test_an_import_of_cublaslt_is_a_call_of_cublas(self):
        a = self.auditor(self.OWN + b"\x00cublasLtMatmul")
        self.assertEqual(self.classes(a, self.SGEMM, ["kg_ext::sgemm#1"]), [("vendor", "cuBLAS")])

    def test_a_library_kernel_the_extension_does_not_define_stays_the_librarys(self):
        a = self.auditor(self.OWN + b"\x00cublasSgemm_v2")
        self.assertEqual(self.classes(a, "ampere_sgemm_128x64_nn", ["kg_ext::sgemm#1"]), [("vendor", "cuBLAS")])

    def test_an_extension_that_calls_the_library_cannot_claim_a_kernel_by_its_name(self):
        # A binary that calls cuBLAS and also names a function like cuBLAS's kernel: the name
        # proves nothing, the kernel may be the library's.
        a = self.auditor(self.OWN + b"\x00cublasSgemm_v2")
        self.assertEqual(self.classes(a, self.SGEMM, ["kg_ext::sgemm#1"]), [("vendor", "cuBLAS")])

    def test_pytorchs_own_matmul_stays_vendor_whatever_the_extension_defines(self):
        a = self.auditor(self.OWN)
        # Launched by an ATen op, not by the candidate's code.
        self.assertEqual(self.classes(a, self.SGEMM, ["aten::mm", "aten::matmul"]), [("vendor", "cuBLAS")])
        # Outside any call of the candidate's.
        self.assertEqual(self.classes(a, self.SGEMM, []), [("vendor", "cuBLAS")])

    def test_cutlass_kernels_the_extension_instantiates_stay_cutlass(self):
        a = self.auditor(b"N7cutlass6KernelI")
        got = self.classes(a, "void cutlass::Kernel<cutlass::gemm::kernel::Gemm>(Params)", ["kg_ext::mm#1"])
        self.assertEqual([cls for cls, _ in got], ["vendor"])

    def test_a_triton_kernel_of_the_candidate_named_like_a_library_is_custom(self):
        a = self.auditor(triton={"gemm_kernel"})
        self.assertEqual(self.classes(a, "gemm_kernel", []), [("custom", None)])
        self.assertEqual(self.classes(a, "ampere_sgemm_128x64_nn", []), [("vendor", "cuBLAS")])

    def test_triton_kernels_are_found_through_autotune(self):
        class FakeJit:
            pass

        class FakeAutotuner:
            pass

        FakeJit.__module__ = "triton.runtime.jit"
        FakeAutotuner.__module__ = "triton.runtime.autotuner"

        def gemm_kernel():
            pass

        jit = FakeJit()
        jit.fn = gemm_kernel
        tuned = FakeAutotuner()
        tuned.fn = jit
        self.assertEqual(kg_audit._triton_name(tuned), "gemm_kernel")
        self.assertIsNone(kg_audit._triton_name(gemm_kernel))


if __name__ == "__main__":
    unittest.main()

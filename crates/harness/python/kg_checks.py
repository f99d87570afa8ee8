"""The correctness check's pure parts: comparing outputs with bounded temporaries, and the plan
of what the harness keeps on the GPU. `T` is the runner's table of torch functions captured
before any candidate code ran (`Runner.capture`), so a patched `torch.allclose` changes nothing.

Loaded by the harness as a private module and given to the runner as `runner.kg_checks`.
"""

import math

_isinstance = isinstance
_type = type


def finite_or_none(x):
    """`x` as a float, None when it is NaN or infinite (JSON has neither)."""
    x = float(x)
    return x if math.isfinite(x) else None


# Outputs are compared in steps of this many elements: whole-tensor comparisons allocate several
# output-sized temporaries (four copies of a KernelBench-size ReLU output ran the H200 out of
# memory in the middle of a correctness check).
COMPARE_CHUNK = 1 << 26


def compare_chunks(o, r):
    """(flat offset, piece of o, piece of r): flat views in COMPARE_CHUNK steps when both are
    contiguous and of one shape, else the pair whole."""
    if o.numel() > COMPARE_CHUNK and o.shape == r.shape and o.is_contiguous() and r.is_contiguous():
        fo, fr = o.view(-1), r.view(-1)
        for start in range(0, fo.numel(), COMPARE_CHUNK):
            yield start, fo[start : start + COMPARE_CHUNK], fr[start : start + COMPARE_CHUNK]
    else:
        yield 0, o, r


# The share of the GPU's free memory the memory plan fills (`plan_memory`): the rest is for the
# CUDA contexts and the allocator's rounding.
MEMORY_SHARE = 0.9


def plan_memory(set_bytes, input_bytes, available, trials, shifted, input_sets, workers=2, draws=2, share=MEMORY_SHARE):
    """How many copies the judge keeps on the GPU. What is held at once:
    - every trial's inputs and outputs and the shifted sets (`set_bytes` each);
    - the buffers the workers share: one input set per timing set, and the outputs;
    - timing's fresh-content pool: a copy of every timing set and its new draws (`draws`, 0
      without timing; one when memory is short: content then repeats, as `FreshInputs` says);
    - the correctness check's working set: the argument buffers, the judge's copy of the
      outputs, the first trial's outputs (kept for the precision audit) and the comparison's
      chunked scratch; or timing's, if larger: the first trial's outputs, a verified call's copy
      and the reference on its content;
    - each worker's own outputs before it copies them into the shared buffers (`workers`: the
      reference's, the candidate's, the base's), in processes that did not exist when the free
      memory was read.
    Cuts timing sets first, then the pool's draws, then shifted sets, then trials (at least one
    of each that is asked for), to `share` of the memory (the rest: CUDA contexts and the
    allocator's rounding; the workers' outputs are counted). Sized from a KernelBench-size ReLU
    on the H100 (80 GB), which the former plan (no shared buffers, no workers, 80%) let run out
    of memory in its first comparison."""
    budget = share * available
    output_bytes = max(0, set_bytes - input_bytes)
    scratch = 4 * 8 * COMPARE_CHUNK

    def need(t, sh, n, d):
        shared = n * input_bytes + output_bytes
        pool = input_bytes * (n + d) if d else 0
        check = max(input_bytes + 2 * output_bytes + scratch, 3 * output_bytes)
        return set_bytes * (t + sh) + shared + pool + check + workers * output_bytes

    t, sh, n, d = trials, shifted, input_sets, draws
    reduced = []
    while need(t, sh, n, d) > budget and n > 1:
        n -= 1
    while need(t, sh, n, d) > budget and d > 1:
        d -= 1
    while need(t, sh, n, d) > budget and sh > 0:
        sh -= 1
    while need(t, sh, n, d) > budget and t > 1:
        t -= 1
    n = min(n, t)
    needed = need(t, sh, n, d)
    if n < input_sets and n < trials:
        reduced.append(f"{n} of {input_sets} timing input sets")
    if d < draws:
        reduced.append("1 fresh draw of the inputs for timing (content repeats)")
    if sh < shifted:
        reduced.append(f"{sh} of {shifted} shifted-input trials")
    if t < trials:
        reduced.append(f"{t} of {trials} correctness trials")
    return {
        "trials": t,
        "shifted": sh,
        "input_sets": n,
        "draws": d,
        "need_bytes": needed,
        "budget_bytes": budget,  # need_bytes above it: even the fewest copies may not fit
        # The pool's draws may take what the plan left over, and always the ones it counted.
        "draw_bytes": max(d * input_bytes, budget - needed + d * input_bytes),
        "available": available,
        "reduced": reduced,
    }


# The precision audit (`runner.precision_audit`): a candidate's relative error against a float64
# reference may be PRECISION_RATIO times the reference's own, and never needs to be smaller than
# the floor of its precision. Calibrated on the H200 (docs/eval.md): honest fp32 kernels (other
# reduction orders, tiling, split-K, fast-math intrinsics) stayed within 10x of the reference;
# TF32 and fp16 arithmetic on fp32 problems landed 100x to 1000x away.
PRECISION_RATIO = 50.0
PRECISION_FLOOR = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.6e-2}
# On the centred set, a candidate further than this from the float64 reference computes another
# function there (it relies on the benchmark's distribution), not the same one less precisely.
PRECISION_SAME_FUNCTION = 5e-2
# A float64 reference further than this many floors from the reference is another function.
PRECISION_UNRELATED = 100.0
# Elements per output the audit keeps (a random sample beyond this).
PRECISION_SAMPLE = 1 << 22


# Narrower operands (`kg_precision.narrowed_errors`). On the benchmark's non-negative inputs a
# GEMM's sums have no cancellation and TF32 operands' rounding averages out: 7.9e-6 against the
# fp32 reference's 8.4e-7 on a 4096^2 `torch.rand` product, under the floor, so the limit alone
# misses it (a candidate at 7.9x on an H100, fp32 only on the calls it expected audited). What
# gives it away is whose rounding its error is: its deviation d from the exact result contains
# the deviation s of a float64 reference on operands rounded to the narrower format. The
# regression coefficient of d on s, <d,s>/<s,s>, is near 1 for a kernel computing on such
# operands whatever else it adds (the tensor cores' accumulation error, or noise added on
# purpose: independent of s, it moves the coefficient by |noise| / (|s| sqrt(n)), a few
# thousandths over millions of elements, where the correlation would fall with it); to bring it
# down a kernel would need the exact result it skipped. An fp32 kernel's own error, any summation
# order, is independent of the rounding: near 0. A candidate is judged narrowed when the
# coefficient's lower bound (less `PRECISION_EXPLAINED_SIGMAS` standard errors) reaches this
# (0.5 would miss a kernel that narrows one of two operands, whose coefficient is about 0.5)...
PRECISION_EXPLAINED_COEFFICIENT = 0.3
PRECISION_EXPLAINED_SIGMAS = 4.0
PRECISION_EXPLAINED_RATIO = 3.0
# The formats a problem's operands may be narrowed to, per precision (TF32 as the tensor cores
# convert: rounded to nearest or truncated).
NARROWER_FORMATS = {"fp32": ("tf32", "tf32 (truncated)", "bf16", "fp16"), "fp16": (), "bf16": ()}


def precision_limit(precision, reference_error):
    return max(PRECISION_RATIO * reference_error, PRECISION_FLOOR[precision])


def narrowed(torch, x, fmt):
    """`x` (floating) with every value rounded to `fmt` (one of `NARROWER_FORMATS`), same dtype."""
    if fmt in ("tf32", "tf32 (truncated)"):
        bits = x.to(torch.float32).contiguous().view(torch.int32)
        if fmt == "tf32":
            bits = bits + 0x1000  # half a TF32 unit in the last place: round half away from zero
        return bits.bitwise_and(~0x1FFF).view(torch.float32).to(x.dtype)
    narrow = {"bf16": torch.bfloat16, "fp16": torch.float16}[fmt]
    return x.to(narrow).to(x.dtype)


def narrowing_fit(torch, got, exact, narrowed):
    """How `got`'s deviation from `exact` follows `narrowed`'s (all flat; `exact` and `narrowed`
    float64), over the elements where both references are finite: (coefficient, its standard
    error, correlation), or None when either deviation is zero or nothing is finite."""
    finite = torch.isfinite(exact) & torch.isfinite(narrowed)
    n = int(finite.sum())
    if n < 2:
        return None
    e = exact[finite]
    d = got[finite].to(torch.float64) - e
    s = narrowed[finite] - e
    if not bool(torch.isfinite(d).all()):
        return None
    ss, dd = float(torch.dot(s, s)), float(torch.dot(d, d))
    if ss == 0.0 or dd == 0.0:
        return None
    ds = float(torch.dot(d, s))
    coefficient = ds / ss
    residual = max(dd - coefficient * ds, 0.0)
    stderr = (residual / (n - 1)) ** 0.5 / ss**0.5
    return coefficient, stderr, ds / (dd * ss) ** 0.5


def explained_by_narrowing(reference_error, exact_error, coefficient, stderr):
    """Whether a candidate's error is that of narrower operands (`PRECISION_EXPLAINED_*`)."""
    if reference_error is None or exact_error is None or coefficient is None or stderr is None:
        return False
    return (
        exact_error > PRECISION_EXPLAINED_RATIO * reference_error
        and coefficient - PRECISION_EXPLAINED_SIGMAS * stderr >= PRECISION_EXPLAINED_COEFFICIENT
    )


def sample_index(torch, numel, generator, device):
    """None (every element) up to PRECISION_SAMPLE elements, else a random sample's flat index."""
    if numel <= PRECISION_SAMPLE:
        return None
    return torch.randint(0, numel, (PRECISION_SAMPLE,), generator=generator).to(device)


def flat_sample(t, idx):
    flat = t.reshape(-1)
    return flat if idx is None else flat[idx]


def relative_error(torch, got, exact):
    """||got - exact|| / ||exact|| over the elements where `exact` is finite (the absolute
    error's norm when `exact` is all zeros); None when no element is finite or the shapes
    differ."""
    finite = torch.isfinite(exact)
    if not bool(finite.any()):
        return None
    if got.shape != exact.shape:
        return None
    e = exact[finite]
    g = got[finite].to(torch.float64)
    if not bool(torch.isfinite(g).all()):
        return float("inf")
    num = float(torch.linalg.vector_norm(g - e))
    den = float(torch.linalg.vector_norm(e))
    return num / den if den > 0 else num


def first_mismatch(T, torch, tol, outs, refs):
    """None when every output is within tolerance (atol = rtol = tol), else the detail of the
    first output that is not."""
    for k, (o, r) in enumerate(zip(outs, refs)):
        if all(bool(T.allclose(oc, rc, atol=tol, rtol=tol)) for _, oc, rc in compare_chunks(o, r)):
            continue
        return mismatch_detail(T, torch, tol, k, o, r)
    return None


def within_truth(T, torch, tol, outs, refs, exact):
    """The correctness rule's second half: outputs that miss the reference pass when, element by
    element, they are no further from the float64 result (`exact`, the reference's model run in
    float64 on the same inputs) than the reference is, plus the tolerance:
    |out - exact| <= |ref - exact| + tol + tol * |exact|. A reference less accurate than the
    candidate (cuDNN's TF32 convolution against an exact fp32 kernel) then fails no one; a
    candidate as far off as a wrong one stays wrong. Only floating outputs of the reference's
    shape are rescued; any other miss stays a miss."""
    if len(outs) != len(refs) or len(exact) != len(refs):
        return False
    for o, r, e in zip(outs, refs, exact):
        if _type_is_tensor(T, o) and o.shape == r.shape and bool(T.allclose(o, r, atol=tol, rtol=tol)):
            continue
        if not (_type_is_tensor(T, o) and _type_is_tensor(T, e) and o.is_floating_point() and o.shape == r.shape == e.shape):
            return False
        for start in range(0, max(1, o.numel()), COMPARE_CHUNK):
            oc = o.reshape(-1)[start : start + COMPARE_CHUNK].double()
            rc = r.reshape(-1)[start : start + COMPARE_CHUNK].double()
            ec = e.reshape(-1)[start : start + COMPARE_CHUNK].to(device=oc.device, dtype=torch.float64)
            allowed = (rc - ec).abs() + tol + tol * ec.abs()
            ok = T.isfinite(oc) & ((oc - ec).abs() <= allowed)
            if not bool(ok.all()):
                return False
    return True


def _type_is_tensor(T, x):
    return type(x) is T.Tensor


def mismatch_detail(T, torch, tol, k, o, r):
    """Where and by how much output `k` misses, gathered chunk by chunk."""
    n_bad, max_abs, max_rel, flat, nonfinite = 0, None, None, None, 0
    for start, oc, rc in compare_chunks(o, r):
        bad = ~T.isclose(oc, rc, atol=tol, rtol=tol)
        n = int(bad.sum().item())
        if n and flat is None:
            flat = start + int(bad.reshape(-1).to(torch.uint8).argmax().item())
        n_bad += n
        del bad
        diff = (oc.double() - rc.double()).abs() if oc.numel() <= COMPARE_CHUNK else (oc - rc).abs().double()
        finite = T.isfinite(diff)
        if bool(finite.any()):
            m = float(diff[finite].max().item())
            max_abs = m if max_abs is None else max(max_abs, m)
        rel = diff / rc.double().abs().clamp_min(1e-12)
        del diff, finite
        rel_f = T.isfinite(rel)
        if bool(rel_f.any()):
            m = float(rel[rel_f].max().item())
            max_rel = m if max_rel is None else max(max_rel, m)
        del rel, rel_f
        if oc.is_floating_point():
            nonfinite += int((~T.isfinite(oc)).sum().item())
    flat = flat or 0
    index = []
    rem = flat
    for dim in reversed(list(o.shape)):
        index.append(rem % dim if dim else 0)
        rem = rem // dim if dim else 0
    index.reverse()
    of = o.reshape(-1)[flat].item() if o.numel() else None
    rf = r.reshape(-1)[flat].item() if r.numel() else None
    return {
        "output": k,
        "max_abs_error": finite_or_none(max_abs) if max_abs is not None else None,
        "max_rel_error": finite_or_none(max_rel) if max_rel is not None else None,
        "mismatches": n_bad,
        "elements": int(o.numel()),
        "mismatch_share": n_bad / max(1, int(o.numel())),
        "first_mismatch_index": index,
        "expected": finite_or_none(rf) if _isinstance(rf, float) else rf,
        "got": finite_or_none(of) if _isinstance(of, float) else of,
        "nonfinite_outputs": nonfinite,
    }


def _storage_range(T, t):
    st = T.storage(t)
    return st.data_ptr(), st.nbytes()


def overlaps(T, a, b):
    """True when the storages of `a` and `b` share bytes."""
    pa, na = _storage_range(T, a)
    pb, nb = _storage_range(T, b)
    return na > 0 and nb > 0 and pa < pb + nb and pb < pa + na


def structural(T, outs, refs, args, keep, trial):
    """Type, shape, dtype, device and aliasing checks of a call's outputs `outs` against the
    reference's `refs`: the outcome of the first that fails, or None. `args` are the call's
    arguments and `keep` tensors no output may share memory with (earlier outputs, the
    reference's)."""
    if len(outs) != len(refs):
        return {
            "kind": "shape_mismatch",
            "trial": trial,
            "message": f"the reference returns {len(refs)} tensor(s), ModelNew returned {len(outs)}",
            "expected": [list(r.shape) for r in refs],
            "got": [],
        }

    def failed(kind, k, message, **detail):
        return {"kind": kind, "trial": trial, "output": k, "message": message, **detail}

    for k, (o, r) in enumerate(zip(outs, refs)):
        if _type(o) is not T.Tensor:
            return failed(
                "not_a_tensor",
                k,
                f"output {k} is a {_type(o).__module__}.{_type(o).__qualname__}; "
                "ModelNew must return a plain torch.Tensor (no subclasses, no lazy objects)",
            )
        if tuple(o.shape) != tuple(r.shape):
            got, want = list(o.shape), list(r.shape)
            return failed("shape_mismatch", k, f"output {k} has shape {got}, the reference {want}", expected=want, got=got)
        if o.dtype != r.dtype:
            return failed(
                "dtype_mismatch", k, f"output {k} is {o.dtype}, the reference {r.dtype}", expected=str(r.dtype), got=str(o.dtype)
            )
        if o.device != r.device:
            return failed(
                "device_mismatch",
                k,
                f"output {k} is on {o.device}, the reference on {r.device}",
                expected=str(r.device),
                got=str(o.device),
            )
        for j, a in enumerate(args):
            if _isinstance(a, T.Tensor) and overlaps(T, o, a):
                return failed(
                    "output_aliased",
                    k,
                    f"output {k} shares memory with input {j}: compute into a new tensor instead of writing the input in place",
                )
        for j, other in enumerate(outs[:k]):
            if overlaps(T, o, other):
                return failed("output_aliased", k, f"outputs {j} and {k} share memory")
        for p in keep:
            if overlaps(T, o, p):
                return failed(
                    "output_aliased",
                    k,
                    f"output {k} shares memory with a tensor returned by an earlier call or with "
                    "the reference's output: results must not be cached or reused across calls",
                )
    return None

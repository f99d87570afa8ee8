"""The least work a problem needs, counted on the reference before any candidate code exists:
the bytes of its inputs and outputs and its FLOPs. The plausibility floor (`crates/timing`) is
computed from these.

Loaded by the harness as a private module and given to the runner as `runner.kg_work`.
"""

_isinstance = isinstance


def nbytes(T, xs):
    """Bytes of every tensor in `xs`, nested lists and tuples included (each counted once per
    appearance: a tensor passed twice is read twice)."""
    total = 0
    for x in xs:
        if _isinstance(x, T.Tensor):
            total += x.numel() * x.element_size()
        elif _isinstance(x, (list, tuple)):
            total += nbytes(T, x)
    return int(total)


def count_flops(torch, model, inputs):
    """`model(*inputs)`'s FLOPs by torch's own formulas (`flop_counter.flop_registry`, the table
    FlopCounterMode uses: matmuls, convolutions, attention), in a plain dispatch mode.
    FlopCounterMode's mode is wrapped in a dynamo guard whose first use imports torch._dynamo:
    3.7-5.2 s of a GPU job on the H200, against milliseconds here."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class _Count(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):
            return False

        def __init__(self):
            super().__init__()
            self.total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                self.total += int(formula(*args, **kwargs, out_val=out))
            return out

    with torch.no_grad(), _Count() as counter:
        model(*inputs)
    return int(counter.total)

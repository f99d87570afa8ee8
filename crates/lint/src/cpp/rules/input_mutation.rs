//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::{Error, Warning};

// ---------------------------------------------------------------- registry entries

pub(crate) const KG608: RuleMeta = RuleMeta {
    code: "KG608",
    name: "cpp-input-mutation",
    severity: Error,
    summary: "The extension modifies an input or returns it as the output",
    doc: "A host function returns one of its input tensors (in-place compute on the input; returning an out-parameter such as `f(x, out)` ... `return out;` is fine when its kernels only store through `out`, never read it), calls an in-place method (`x.zero_()`, `x.copy_(...)`) on an input, or launches a kernel, calls a helper that launches one, or `cudaMemset`/`cudaMemcpy`s into an input's `data_ptr()` while returning a fresh output. Inputs must stay unchanged: a mutated input can make a later reference run agree with a wrong answer. What counts as an input is traced from the Python call sites: a parameter that `forward` only ever passes the candidate's own buffers (`self.workspace`, a fresh `torch.empty`, partial sums of a split-K reduction) may be written. Allocate an output and write to it.",
    bad: "relu_inplace<<<g, b>>>(x.data_ptr<float>(), n);\nreturn x;",
    good: "auto y = torch::empty_like(x);\nrelu<<<g, b, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\nreturn y;",
};

pub(crate) const KG609: RuleMeta = RuleMeta {
    code: "KG609",
    name: "cpp-unwritten-output",
    severity: Warning,
    summary: "An output from `torch::empty` is returned without being written",
    doc: "A host function returns a tensor allocated with `torch::empty`/`empty_like` that is never handed to a kernel or helper (only its metadata is read, or only a `data_ptr()` taken and never passed on), or returns `torch::empty_like(x)` directly. `empty` memory is whatever the caching allocator held, often the reference's freed result, so the candidate passes without computing. Pass the output to the kernel that fills it.",
    bad: "auto out = torch::empty_like(x);\nreturn out;",
    good: "auto out = torch::empty_like(x);\nk<<<g, b, 0, stream>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);\nreturn out;",
};

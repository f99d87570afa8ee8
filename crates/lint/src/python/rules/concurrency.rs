//! TODO

use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

// ---------------------------------------------------------------- registry entries

pub(crate) const KG403: RuleMeta = RuleMeta {
    code: "KG403",
    name: "side-stream",
    severity: Error,
    summary: "Work is launched on a non-default CUDA stream",
    doc: "`torch.cuda.Stream`, `torch.cuda.stream(...)`, `ExternalStream`, `set_stream` or a `stream=` argument other than the current stream moves work off the stream the timer records on, so the timed region misses it. A side stream that the same function joins back into the current stream before returning (`torch.cuda.current_stream().wait_stream(s)`, `.wait_event(e)` or `torch.cuda.synchronize()`) is a warning: nothing escapes the timer if the join is right, and the runtime escaped-work check decides. CUDA graphs stay errors. Launch on `torch.cuda.current_stream()`.",
    bad: "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    ext.run(x)",
    good: "ext.run(x)  # on the current stream",
};

pub(crate) const KG404: RuleMeta = RuleMeta {
    code: "KG404",
    name: "threads",
    severity: Error,
    summary: "Threads or processes finish work in the background",
    doc: "`threading`, `_thread`, `concurrent.futures`, `multiprocessing` (also `torch.multiprocessing`) and `asyncio` let `forward` return before the work is done, so the timer stops early. Compute synchronously on the current stream.",
    bad: "from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(1)",
    good: "out = ext.run(x)",
};

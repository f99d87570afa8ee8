"""The job the runner reads, as the CLI sends it: the mirror of `kernelgate_eval::protocol::Job`
(crates/eval/src/protocol.rs), field for field; and the result it writes back (`Result`, the
mirror of `RunnerResult`, which refuses a field it does not know). Every default is decided on the Rust side;
here a job of another protocol version, or with a field missing, unknown or of the wrong type,
is refused with a message naming it (a CLI and a harness from different builds).

Loaded by the harness as a private module before any candidate code runs (like kg_audit and
kg_timing), and given to the runner as `runner.kg_protocol`.
"""

import json
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Optional

PROTOCOL = 3


class ProtocolError(ValueError):
    pass


@dataclass
class Timing:
    warmup: int
    min_samples: int
    max_samples: int
    budget_s: float
    ci_target_pct: float
    l2: str
    input_sets: int


@dataclass
class Sandbox:
    read_exec: list
    read_files: list
    read_write: list
    denied_syscalls: dict
    denied_from_candidate: dict
    level: str


@dataclass
class Job:
    protocol: int
    job_id: str
    problem: str
    kernel: str
    base_kernel: Optional[str]
    base_extensions_dir: Optional[str]
    base_prebuilt: bool
    prebuilt: bool
    device: str
    cpu_backend: bool
    precision: str
    tolerance: float
    trials: int
    seed: int
    shifted_trials: int
    inputs_on_device: bool
    count_flops: bool
    audit: bool
    build_only: bool
    timing: Optional[Timing]
    result_path: str
    progress_path: str
    sandbox: Optional[Sandbox]
    spawn_unix: Optional[float]


@dataclass
class Result:
    """What the runner writes back, each value the JSON the CLI's types read: the outcome an
    `Outcome` (tagged by `kind`), findings `{rule, severity, message}`, phases `[name, ms]`,
    the timing samples by series. Answers before the job is read carry only the first four."""

    outcome: dict
    findings: list
    phases: list
    timing: Optional[dict] = None
    seed: Optional[int] = None
    device: Optional[str] = None
    torch: Optional[str] = None
    machine: Optional[dict] = None
    trials_run: Optional[int] = None
    work: Optional[dict] = None
    bandwidth_gbs: Optional[float] = None
    audit: Optional[dict] = None
    memory: Optional[dict] = None
    precision_audit: Optional[dict] = None
    extensions: list = field(default_factory=list)
    extensions_dir: Optional[str] = None
    precompiled_header: Optional[str] = None

    def wire(self):
        """The JSON object of the result file: every field by name (shallow: no copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# JSON types each annotation accepts (bool is not an int here, an int is a float).
_ACCEPTS = {
    int: (int,),
    float: (int, float),
    str: (str,),
    bool: (bool,),
    list: (list,),
    dict: (dict,),
}


def _build(cls, value, where):
    if not isinstance(value, dict):
        raise ProtocolError(f"{where} must be an object, not {type(value).__name__}")
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ProtocolError(
            f"{where} has unknown field(s) {', '.join(unknown)}: the CLI and the harness are from different builds"
        )
    missing = [n for n in names if n not in value]
    if missing:
        raise ProtocolError(f"{where} lacks field(s) {', '.join(missing)}: the CLI and the harness are from different builds")
    out = {}
    for f in fields(cls):
        v = value[f.name]
        optional = getattr(f.type, "__origin__", None) is not None  # Optional[X]
        base = f.type.__args__[0] if optional else f.type
        if v is None and optional:
            out[f.name] = None
        elif is_dataclass(base):
            out[f.name] = _build(base, v, f"{where}.{f.name}")
        elif isinstance(v, bool) and base is not bool:
            raise ProtocolError(f"{where}.{f.name} must be {base.__name__}, not bool")
        elif not isinstance(v, _ACCEPTS[base]):
            raise ProtocolError(f"{where}.{f.name} must be {base.__name__}, not {type(v).__name__}")
        else:
            out[f.name] = float(v) if base is float else v
    return cls(**out)


def parse_job(text):
    """The job from its JSON text; ProtocolError when it is not this protocol's."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ProtocolError(f"the job is not JSON: {e}") from None
    if not isinstance(value, dict) or value.get("protocol") != PROTOCOL:
        got = value.get("protocol") if isinstance(value, dict) else None
        raise ProtocolError(
            f"the job speaks protocol {got!r} and this harness {PROTOCOL}: install the harness built with this kernelgate"
        )
    return _build(Job, value, "job")

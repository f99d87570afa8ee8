//! The model of a kernel repository: problems, candidate kernels, configuration, and the
//! small vocabulary (precision, backend, findings) every later stage of the pipeline shares.

pub mod audit;
pub mod config;
pub mod dataset;
pub mod deps;
pub mod directive;
pub mod efficiency;
pub mod finding;
pub mod hash;
pub mod kernel;
pub mod problem;
pub mod ran_on;
pub mod sandbox;
pub mod source;
pub mod target;
pub mod types;

pub use audit::{
    AuditClock, AuditEntry, ExtensionCalls, MemoryUse, NarrowedError, OpAudit, OpClass,
    PrecisionAudit, ReferenceCheck, TimedPrecisionAudit,
};
pub use config::{Condition, Config, ConfigError, Device, L2Mode, LintConfig, LintLevel};
pub use dataset::{DatasetError, DatasetSpec};
pub use deps::{Dependencies, DiskTree, SourceTree};
pub use efficiency::{Bound, Efficiency};
pub use finding::{Finding, Severity, PROBLEM_RUNTIME_RULES};
pub use kernel::{
    discover, kernel_properties, Kernel, KernelError, KernelMapper, KernelSelector, MappedBy,
};
pub use problem::{LookupError, Problem, ProblemError, ProblemSet};
pub use ran_on::RanOn;
pub use sandbox::SandboxLevel;
pub use source::{read_source, SourceError};
pub use target::{classify, KernelTarget};
pub use types::{Backend, Precision};

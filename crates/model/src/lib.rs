//! The model of a kernel repository: problems, candidate kernels, configuration, and the
//! small vocabulary (precision, backend, findings) every later stage of the pipeline shares.

pub mod finding;
pub mod types;

pub use finding::{Finding, Severity};
pub use types::{Backend, Precision};

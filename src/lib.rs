//! Library half of the `kernelgate` package: the `pr` pipeline, exposed for integration tests.
//! The CLI (`src/main.rs`, `src/cli.rs`, `src/cmd/`) stays in the binary.

pub mod baseline;
pub mod pr;

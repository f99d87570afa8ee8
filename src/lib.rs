//! Library half of the `kernelgate` package: the `pr` gate and the `baseline` run, exposed for
//! integration tests and callers other than the CLI.
//! The CLI (`src/main.rs`, `src/cli.rs`, `src/cmd/`) stays in the binary.

pub mod baseline;
pub mod git;
pub mod history;
pub mod ops;
pub mod pr;
pub mod table;
pub mod time;

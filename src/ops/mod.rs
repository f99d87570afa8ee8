//! The commands as library operations (cargo's `ops`): each takes an options struct and
//! returns a typed result; `src/cmd/*` parse flags into the options, call one op and print.

pub mod eval;
pub mod history;
pub mod kernels;
pub mod lint;
pub mod problems;
pub mod publish;

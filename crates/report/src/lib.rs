//! The report of a gate run: the `report.json` schema (`kernelgate.report/1`) and its
//! renderings (`comment.md`, `summary.md`, `results.sarif`, check-run payloads).
//!
//! Plain data only: the pipeline fills a [`Report`], everything else reads it.

mod io;
mod schema;

pub use io::{merge, ReportError};
pub use schema::*;

//! The CLI's integration tests, one binary (a link per test file cost CI minutes): each module
//! is one area of the gate, `common` the helpers they share.

mod common;

mod action_docs;
mod agreement;
mod audit;
mod changes;
mod demo;
mod eval;
mod history;
mod judge;
mod judgment;
mod lint;
mod lint_cpp;
mod lint_snapshots;
mod model;
mod pr;
mod protocol;
mod publish;
mod sandbox;
mod sarif;
mod sources;
mod timing;
mod timing_integrity;
mod ux;
mod version;
mod workflows;

//! The performance history of the default branch (docs/history.md).
//!
//! One record per kernel and per problem reference per commit and hardware ([`record`]), kept as
//! JSON Lines, one file per hardware key ([`store`]); a change-point test over each series
//! ([`drift`]); a static dashboard ([`dashboard`]); exports for Bencher and
//! github-action-benchmark ([`export`]).

pub mod dashboard;
pub mod drift;
pub mod export;
pub mod record;
pub mod series;
pub mod store;

pub use drift::{detect, Drift, DriftRule};
pub use record::{from_baselines, from_report, Commit, Record, SeriesKind};
pub use series::{Series, SeriesKey};
pub use store::{Filter, Store, StoreError};

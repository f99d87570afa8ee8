//! Records grouped into series: one kernel (or reference) on one hardware key, in commit order.

use crate::record::{Record, SeriesKind};
use kernelgate_model::Precision;
pub use kernelgate_timing::baseline::hardware_label;
use serde::Serialize;
use std::collections::BTreeMap;

/// Which series a record belongs to. Driver, CUDA and torch are not part of it: an upgrade of the
/// runner that moves every kernel is exactly what the history must show.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SeriesKey {
    pub problem: String,
    pub kind: SeriesKind,
    pub name: String,
    pub device: String,
    pub precision: Precision,
}

impl SeriesKey {
    pub fn of(r: &Record) -> SeriesKey {
        SeriesKey {
            problem: r.problem.clone(),
            kind: r.kind,
            name: r.name.clone(),
            device: r.device.clone(),
            precision: r.precision,
        }
    }

    /// `NVIDIA_H200 fp32`: the hardware label of the series (also its store file's stem).
    pub fn hardware(&self) -> String {
        hardware_label(&self.device, self.precision)
    }
}

/// One series' records, oldest first (one per commit).
#[derive(Debug, Clone)]
pub struct Series {
    pub key: SeriesKey,
    pub points: Vec<Record>,
}

/// Groups `records` (in store order: the order the default branch's runs appended them) into
/// series. Commit order is the order of first appearance; a later record for the same slot
/// replaces an earlier one (a re-run of the same commit).
pub fn group(records: &[Record]) -> (Vec<String>, Vec<Series>) {
    let mut commits: Vec<String> = Vec::new();
    let mut position: BTreeMap<&str, usize> = BTreeMap::new();
    for r in records {
        if !position.contains_key(r.commit.as_str()) {
            position.insert(&r.commit, commits.len());
            commits.push(r.commit.clone());
        }
    }
    let mut by_key: BTreeMap<SeriesKey, BTreeMap<usize, Record>> = BTreeMap::new();
    for r in records {
        by_key
            .entry(SeriesKey::of(r))
            .or_default()
            .insert(position[r.commit.as_str()], r.clone());
    }
    let series = by_key
        .into_iter()
        .map(|(key, points)| Series {
            key,
            points: points.into_values().collect(),
        })
        .collect();
    (commits, series)
}

//! Reading, writing and merging `report.json`.

use crate::schema::{Report, SCHEMA};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read report `{path}`: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot write `{path}`: {error}")]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "`{path}` is not a kernelgate report: {error} (produce one with `kernelgate pr --out DIR`)"
    )]
    Parse {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error(
        "`{path}` has schema `{found}`, this kernelgate reads `{SCHEMA}`; publish it with the kernelgate version that wrote it"
    )]
    Schema { path: PathBuf, found: String },
    #[error("cannot merge reports: {0}")]
    Merge(String),
}

impl Report {
    /// Read and check the schema version.
    pub fn read(path: &Path) -> Result<Report, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|error| ReportError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_json(&text, path)
    }

    /// Parse `text` (named `path` in errors).
    pub fn from_json(text: &str, path: &Path) -> Result<Report, ReportError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| ReportError::Parse {
                path: path.to_path_buf(),
                error,
            })?;
        let found = value
            .get("schema")
            .and_then(|s| s.as_str())
            .unwrap_or("")
            .to_string();
        if major(&found) != major(SCHEMA) {
            return Err(ReportError::Schema {
                path: path.to_path_buf(),
                found,
            });
        }
        serde_json::from_value(value).map_err(|error| ReportError::Parse {
            path: path.to_path_buf(),
            error,
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises") + "\n"
    }

    /// Write through a temporary file and rename, so a reader (or a crash) never sees half a file.
    pub fn write_atomic(&self, path: &Path) -> Result<(), ReportError> {
        write_atomic(path, self.to_json().as_bytes())
    }
}

/// `kernelgate.report/1.2` → `kernelgate.report/1`: minor versions only add optional fields.
fn major(schema: &str) -> &str {
    match schema.rsplit_once('/') {
        Some((name, version)) => {
            &schema[..name.len() + 1 + version.split('.').next().unwrap_or("").len()]
        }
        None => schema,
    }
}

pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let err = |error| ReportError::Write {
        path: path.to_path_buf(),
        error,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// Join shard reports of one run into one report. The shards must agree on repo and head SHA;
/// rows are ordered by path; the merged report is complete only when every shard is and all
/// `n` shards are present.
pub fn merge(reports: Vec<Report>) -> Result<Report, ReportError> {
    let mut iter = reports.into_iter();
    let mut out = iter
        .next()
        .ok_or_else(|| ReportError::Merge("no reports given".into()))?;
    let mut shards_seen: Vec<u32> = out.run.shard.map(|s| vec![s.0]).unwrap_or_default();
    let expected = out.run.shard.map(|s| s.1);
    for r in iter {
        if r.run.head_sha != out.run.head_sha || r.run.repo != out.run.repo {
            return Err(ReportError::Merge(format!(
                "shards come from different runs ({}@{} vs {}@{}); merge only the reports of one workflow run",
                out.run.repo, out.run.head_sha, r.run.repo, r.run.head_sha
            )));
        }
        if let Some((i, _)) = r.run.shard {
            if shards_seen.contains(&i) {
                return Err(ReportError::Merge(format!("shard {i} given twice")));
            }
            shards_seen.push(i);
        }
        out.run.complete &= r.run.complete;
        for level in r.run.sandbox {
            out.run.add_sandbox_level(level);
        }
        out.run.started_at = min_str(&out.run.started_at, &r.run.started_at);
        out.run.finished_at = match (out.run.finished_at.take(), r.run.finished_at) {
            (Some(a), Some(b)) => Some(if a >= b { a } else { b }),
            (a, b) => a.or(b),
        };
        if out.run.hardware.gpu.is_empty() {
            out.run.hardware = r.run.hardware;
        }
        for k in r.kernels {
            if !out
                .kernels
                .iter()
                .any(|o| o.path == k.path && o.precision == k.precision)
            {
                out.kernels.push(k);
            }
        }
        for c in r.reference_changes {
            if !out.reference_changes.contains(&c) {
                out.reference_changes.push(c);
            }
        }
        for o in r.problem_observations {
            out.observe(o);
        }
        for c in r.other_changes {
            if !out.other_changes.contains(&c) {
                out.other_changes.push(c);
            }
        }
        for c in r.config_changes {
            if !out.config_changes.contains(&c) {
                out.config_changes.push(c);
            }
        }
        if out.run.config.is_none() {
            out.run.config = r.run.config;
        }
    }
    if let Some(n) = expected {
        if shards_seen.len() as u32 != n {
            out.run.complete = false;
        }
    }
    out.run.shard = None;
    out.kernels.sort_by(|a, b| {
        a.path
            .cmp(&b.path)
            .then(a.precision.as_str().cmp(b.precision.as_str()))
    });
    out.finalize();
    Ok(out)
}

fn min_str(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => a.min(b).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::*;
    use kernelgate_model::{Backend, Precision};

    fn shard(i: u32, n: u32, paths: &[&str]) -> Report {
        let mut r = Report::new(RunInfo {
            repo: "o/r".into(),
            head_sha: "h".into(),
            started_at: format!("2026-01-01T00:0{i}:00Z"),
            shard: Some((i, n)),
            complete: true,
            ..Default::default()
        });
        for p in paths {
            let mut k = KernelRow::new(
                *p,
                "level1/1_X.py",
                Backend::Cuda,
                Precision::Fp32,
                Change::Modified,
                OutcomeSummary::new(OutcomeKind::Correct, ""),
            );
            k.speedup_eager = Some(Interval::point(2.0));
            r.kernels.push(k);
        }
        r.finalize();
        r
    }

    #[test]
    fn write_atomic_round_trips_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/report.json");
        let r = shard(1, 1, &["kernels/a.py"]);
        r.write_atomic(&p).unwrap();
        assert_eq!(Report::read(&p).unwrap(), r);
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("report.json")]);
    }

    #[test]
    fn wrong_schema_and_garbage_name_the_file() {
        let p = Path::new("x/report.json");
        let e = Report::from_json(r#"{"schema":"kernelgate.report/2","run":{}}"#, p).unwrap_err();
        assert!(matches!(e, ReportError::Schema { .. }));
        assert!(
            e.to_string().contains("x/report.json")
                && e.to_string().contains("kernelgate.report/2")
        );
        let e = Report::from_json("not json", p).unwrap_err();
        assert!(e.to_string().contains("x/report.json"), "{e}");
        // A minor version with extra fields is accepted.
        let ok = r#"{"schema":"kernelgate.report/1.3","run":{},"new_field":1}"#;
        assert!(Report::from_json(ok, p).is_ok());
    }

    #[test]
    fn merge_keeps_the_judging_config_and_its_changes_once() {
        let judged = |mut r: Report| {
            r.run.config = Some(ConfigSource::Trusted {
                path: ".kernelgate-trusted/kernelgate.toml".into(),
            });
            r.config_changes = vec![ConfigChange {
                key: "sandbox.enabled".into(),
                base: true.into(),
                head: false.into(),
                applies: ConfigApplies::AfterMerge,
            }];
            r
        };
        let m = merge(vec![
            judged(shard(1, 2, &["kernels/a.py"])),
            judged(shard(2, 2, &["kernels/b.py"])),
        ])
        .unwrap();
        assert_eq!(m.config_changes.len(), 1);
        assert!(matches!(m.run.config, Some(ConfigSource::Trusted { .. })));
    }

    #[test]
    fn merge_joins_shards_sorted_and_recomputes_summary() {
        let m = merge(vec![
            shard(2, 2, &["kernels/c.py", "kernels/a.py"]),
            shard(1, 2, &["kernels/b.py"]),
        ])
        .unwrap();
        let paths: Vec<_> = m.kernels.iter().map(|k| k.path.as_str()).collect();
        assert_eq!(paths, ["kernels/a.py", "kernels/b.py", "kernels/c.py"]);
        assert_eq!(m.summary.total, 3);
        assert!(m.run.complete);
        assert_eq!(m.run.shard, None);
        assert_eq!(m.run.started_at, "2026-01-01T00:01:00Z");
    }

    #[test]
    fn merge_with_missing_shard_is_incomplete_and_duplicates_rejected() {
        let m = merge(vec![shard(1, 3, &["a"]), shard(2, 3, &["b"])]).unwrap();
        assert!(!m.run.complete);
        assert!(merge(vec![shard(1, 2, &["a"]), shard(1, 2, &["b"])]).is_err());
        let mut other = shard(2, 2, &["b"]);
        other.run.head_sha = "zzz".into();
        let e = merge(vec![shard(1, 2, &["a"]), other]).unwrap_err();
        assert!(e.to_string().contains("different runs"), "{e}");
        assert!(merge(vec![]).is_err());
    }
}

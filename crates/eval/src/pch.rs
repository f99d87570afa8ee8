//! torch's extension header, precompiled once per runner (`kernelgate pch`): where the entries
//! live, how they are built, and how a job gets them (read-only, on its runner's `CPATH`).
//!
//! The build and its checks are the harness's `kg_pch.py`, run as a trusted script (never in a
//! candidate's process); a job's sandbox grants the root read and execute only, so no
//! candidate can write or replace an entry that later builds would read (docs/sandbox.md).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::child::{run_script, LaunchError, Script, ScriptEnd};

/// Overrides where the entries live; `off` gives jobs none.
pub const PCH_DIR_ENV: &str = "KERNELGATE_PCH_DIR";

/// The precompiled headers' root: `$KERNELGATE_PCH_DIR`, else `kernelgate/pch` in
/// `$XDG_CACHE_HOME` or `~/.cache`; `None` when it is `off` or no home is known.
pub fn pch_root() -> Option<PathBuf> {
    pch_root_from(|var| std::env::var_os(var).filter(|v| !v.is_empty()))
}

fn pch_root_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(dir) = var(PCH_DIR_ENV) {
        return (dir != "off").then(|| PathBuf::from(dir));
    }
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("kernelgate").join("pch"))
}

/// The root a job is given: only one that exists (the sandbox grants real paths), made
/// absolute (the child works in its own directory).
pub(crate) fn job_pch_root() -> Option<PathBuf> {
    pch_root()
        .filter(|p| p.is_dir())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// How `kernelgate pch` ended.
#[derive(Debug)]
pub enum PchBuild {
    /// The script's last words (the entry, its size, other entries).
    Done(String),
    Failed(String),
}

/// Builds this torch's entry under `root` with `python` unless it exists (`kg_pch.build`).
/// The script's progress goes to stderr.
pub fn build_pch(
    python: &Path,
    harness: &Path,
    root: &Path,
    scratch: &Path,
) -> Result<PchBuild, LaunchError> {
    std::fs::create_dir_all(root)?;
    let ended = run_script(Script {
        python,
        harness: Some(harness),
        // The header, nvcc's side-by-side wrapper (kg_nvcc.py), then the interpreter's bytecode
        // (kg_bytecode.py): each says what it did.
        code: "import sys, kernelgate_harness as h\nheader = h.pch_module().main(sys.argv[1:])\n\
               nvcc = h.nvcc_module()\nprint('nvcc side by side:', nvcc.install(sys.argv[1], nvcc.SOURCE))\n\
               sys.exit(h.bytecode_module().main(sys.argv[1:]) or header)\n",
        args: vec![root.as_os_str().to_owned()],
        dir: scratch,
        // Two variants, each one full parse of the header: a minute or two on a small machine.
        limit: Duration::from_secs(30 * 60),
        // gcc needs 1-2 GiB per variant; each runs in its own process, so RLIMIT_AS would
        // not sum them: the watchdog watches the group's resident memory.
        memory_limit_bytes: 16 << 30,
        rlimit_as: false,
        env: Vec::new(),
    })?;
    Ok(match ended {
        ScriptEnd::Exited {
            status,
            stdout_tail,
        } if status.success() => PchBuild::Done(stdout_tail.trim().to_string()),
        ScriptEnd::Exited {
            status,
            stdout_tail,
        } => PchBuild::Failed(format!("{status}: {}", stdout_tail.trim())),
        ScriptEnd::TimedOut => PchBuild::Failed("it ran past 30 minutes".into()),
        ScriptEnd::MemoryKilled { rss_bytes } => PchBuild::Failed(format!(
            "killed at {:.1} GiB resident memory",
            rss_bytes as f64 / (1u64 << 30) as f64
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_root_is_the_variable_else_the_user_cache_and_off_gives_none() {
        assert_eq!(
            pch_root_from(vars(&[(PCH_DIR_ENV, "/srv/pch"), ("HOME", "/home/u")])),
            Some(PathBuf::from("/srv/pch"))
        );
        assert_eq!(
            pch_root_from(vars(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/home/u")])),
            Some(PathBuf::from("/c/kernelgate/pch"))
        );
        assert_eq!(
            pch_root_from(vars(&[("HOME", "/home/u")])),
            Some(PathBuf::from("/home/u/.cache/kernelgate/pch"))
        );
        assert_eq!(pch_root_from(vars(&[(PCH_DIR_ENV, "off")])), None);
        assert_eq!(pch_root_from(vars(&[])), None);
    }
}

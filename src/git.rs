//! A thin wrapper around the `git` binary. We spawn git rather than link libgit2 so the gate sees
//! exactly what the user's git sees (config, shallow clones, alternates) and builds with no C deps.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run `git` ({0}); install git and make sure it is on PATH")]
    Spawn(std::io::Error),
    #[error("{dir} is not inside a git repository; run `kernelgate pr` from a clone of the kernel repository (or pass --repo)")]
    NotARepo { dir: PathBuf },
    /// `detail` says what to do: a typo of a name, a commit not fetched, a shallow clone.
    #[error("{detail}")]
    MissingCommit {
        rev: String,
        dir: PathBuf,
        detail: String,
    },
    #[error("no common ancestor between `{base}` and `{head}` in {dir}; {detail}")]
    NoMergeBase {
        base: String,
        head: String,
        dir: PathBuf,
        detail: String,
    },
    #[error("`git {args}` failed in {dir}: {stderr}")]
    Failed {
        args: String,
        dir: PathBuf,
        stderr: String,
    },
    #[error("unexpected output from `git {args}`: {detail}")]
    Parse { args: String, detail: String },
}

/// A git repository worked on through the `git` command line.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
}

/// One entry of `git diff --name-status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawChange {
    Added(String),
    Modified(String),
    Deleted(String),
    /// `from` → `to`, with git's similarity score (0-100).
    Renamed {
        from: String,
        to: String,
        score: u8,
    },
    /// A copy keeps the source; the destination is new.
    Copied {
        from: String,
        to: String,
    },
    /// A type change (file ↔ symlink) or anything else we treat as a modification.
    Other(String),
}

impl Git {
    /// Opens the repository containing `dir`.
    pub fn open(dir: &Path) -> Result<Git, GitError> {
        let git = Git {
            dir: dir.to_path_buf(),
        };
        match git.output(&["rev-parse", "--show-toplevel"]) {
            Ok(out) => {
                let top = String::from_utf8_lossy(&out).trim().to_string();
                Ok(Git {
                    dir: PathBuf::from(top),
                })
            }
            Err(GitError::Failed { .. }) => Err(GitError::NotARepo {
                dir: dir.to_path_buf(),
            }),
            Err(e) => Err(e),
        }
    }

    /// The worktree root.
    pub fn root(&self) -> &Path {
        &self.dir
    }

    fn output(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let out = Command::new("git")
            .arg("--no-pager")
            .args(["-c", "core.quotepath=off", "-c", "color.ui=false"])
            .args(args)
            .current_dir(&self.dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .output()
            .map_err(GitError::Spawn)?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(GitError::Failed {
                args: args.join(" "),
                dir: self.dir.clone(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// Resolves `rev` to a full commit id; a missing commit gets the fetch-depth advice.
    pub fn resolve(&self, rev: &str) -> Result<String, GitError> {
        let spec = format!("{rev}^{{commit}}");
        match self.output(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ]) {
            Ok(out) => Ok(String::from_utf8_lossy(&out).trim().to_string()),
            Err(GitError::Failed { .. }) => Err(GitError::MissingCommit {
                rev: rev.to_string(),
                dir: self.dir.clone(),
                detail: self.missing_detail(rev),
            }),
            Err(e) => Err(e),
        }
    }

    /// The commit `rev` names: its full id, committer date (RFC 3339, UTC) and subject.
    pub fn commit(&self, rev: &str) -> Result<kernelgate_history::Commit, GitError> {
        let sha = self.resolve(rev)?;
        let out = self.output(&["show", "-s", "--format=%ct%x00%s", &sha])?;
        let text = String::from_utf8_lossy(&out);
        let (secs, subject) = text
            .trim_end()
            .split_once('\0')
            .unwrap_or((text.trim(), ""));
        // UTC, so dates from committers in different zones compare and sort as text.
        let date = crate::time::rfc3339(secs.trim().parse().unwrap_or(0));
        Ok(kernelgate_history::Commit {
            sha,
            date,
            subject: subject.to_string(),
        })
    }

    /// The fetch URL of remote `name`, when the remote exists.
    pub fn remote_url(&self, name: &str) -> Option<String> {
        let out = self.output(&["remote", "get-url", "--", name]).ok()?;
        let url = String::from_utf8_lossy(&out).trim().to_string();
        (!url.is_empty()).then_some(url)
    }

    /// True when this clone is shallow (it lacks older history).
    pub fn is_shallow(&self) -> bool {
        self.output(&["rev-parse", "--is-shallow-repository"])
            .is_ok_and(|o| String::from_utf8_lossy(&o).trim() == "true")
    }

    /// Why `rev` resolves to nothing, and what to do. A shallow clone is blamed only when the
    /// clone is shallow; a name (not a commit id) that exists nowhere is a typo until shown
    /// otherwise.
    fn missing_detail(&self, rev: &str) -> String {
        let dir = self.dir.display();
        let looks_like_id = rev.len() >= 7 && rev.chars().all(|c| c.is_ascii_hexdigit());
        if self.is_shallow() {
            return format!(
                "`{rev}` is not in this clone of {dir}, which is shallow (it lacks older history): \
                 in GitHub Actions use `actions/checkout` with `fetch-depth: 0`, or run \
                 `git fetch --unshallow` (or `git fetch origin {rev}`) before `kernelgate pr`"
            );
        }
        if looks_like_id {
            return format!(
                "commit `{rev}` is not in this clone of {dir}: fetch it with `git fetch origin {rev}` \
                 (in GitHub Actions, `actions/checkout` with `fetch-depth: 0`), or check the id"
            );
        }
        let names: Vec<String> = self
            .output(&[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads",
                "refs/remotes",
                "refs/tags",
            ])
            .map(|o| {
                String::from_utf8_lossy(&o)
                    .lines()
                    .map(str::to_string)
                    .filter(|n| !n.ends_with("/HEAD"))
                    .collect()
            })
            .unwrap_or_default();
        let known = if names.is_empty() {
            String::new()
        } else {
            let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
            format!(
                " (this clone has: {}{})",
                shown.join(", "),
                if names.len() > 8 { ", ..." } else { "" }
            )
        };
        format!(
            "`{rev}` does not exist in {dir}: no branch, tag or commit has that name{known}. \
             Check the spelling of --base/--head; a branch of the remote may need `git fetch origin`"
        )
    }

    /// True when `rev` names a commit in this clone.
    pub fn has(&self, rev: &str) -> bool {
        self.resolve(rev).is_ok()
    }

    pub fn merge_base(&self, base: &str, head: &str) -> Result<String, GitError> {
        match self.output(&["merge-base", base, head]) {
            Ok(out) => Ok(String::from_utf8_lossy(&out).trim().to_string()),
            Err(GitError::Failed { .. }) => Err(GitError::NoMergeBase {
                base: base.to_string(),
                head: head.to_string(),
                dir: self.dir.clone(),
                detail: if self.is_shallow() {
                    "the clone is shallow and lacks the history that joins them: fetch it with \
                     `git fetch --unshallow` or `fetch-depth: 0` in `actions/checkout`"
                        .into()
                } else {
                    "they share no history: check that --base and --head name branches of the \
                     same repository"
                        .into()
                },
            }),
            Err(e) => Err(e),
        }
    }

    /// Files changed between two commits, renames detected.
    pub fn diff(&self, from: &str, to: &str) -> Result<Vec<RawChange>, GitError> {
        let args = [
            "diff",
            "--name-status",
            "-z",
            "--no-ext-diff",
            "--find-renames",
            "-M",
            from,
            to,
            "--",
        ];
        let out = self.output(&args)?;
        parse_name_status(&out).map_err(|detail| GitError::Parse {
            args: args.join(" "),
            detail,
        })
    }

    /// Every file tracked at `rev`.
    pub fn ls_files(&self, rev: &str) -> Result<Vec<String>, GitError> {
        let out = self.output(&["ls-tree", "-r", "-z", "--name-only", rev])?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect())
    }

    /// The content of `path` at `rev`.
    pub fn show(&self, rev: &str, path: &str) -> Result<Vec<u8>, GitError> {
        self.output(&["show", &format!("{rev}:{path}")])
    }

    /// The content of the file `path` at `rev`, `None` when `rev` has no file there.
    pub fn file_at(&self, rev: &str, path: &str) -> Result<Option<Vec<u8>>, GitError> {
        let listed = self.output(&["ls-tree", "-z", "--full-tree", rev, "--", path])?;
        // `<mode> blob <id>\t<path>`: a blob only (a directory of that name is no file).
        let is_blob = listed
            .split(|b| *b == 0)
            .any(|e| String::from_utf8_lossy(e).split_whitespace().nth(1) == Some("blob"));
        if !is_blob {
            return Ok(None);
        }
        self.show(rev, path).map(Some)
    }

    /// The files of commit `rev` as a [`SourceTree`], for the dependency sets of its kernels
    /// (`kernelgate_model::deps`): one listing, and one `git cat-file --batch` for every read.
    /// Only regular files count: a symbolic link (which could name any file of the machine,
    /// and the set's files are granted to the sandboxed child) or a submodule is no source.
    pub fn tree(&self, rev: &str) -> Result<GitTree<'_>, GitError> {
        let out = self.output(&["ls-tree", "-r", "-z", "--full-tree", rev])?;
        let files = out
            .split(|b| *b == 0)
            .filter_map(|entry| {
                // `<mode> <type> <object>\t<path>`
                let entry = String::from_utf8_lossy(entry);
                let (meta, path) = entry.split_once('\t')?;
                let regular = meta.starts_with("100644 blob") || meta.starts_with("100755 blob");
                regular.then(|| path.to_string())
            })
            .collect();
        Ok(GitTree {
            git: self,
            rev: rev.to_string(),
            files,
            reader: std::cell::RefCell::new(None),
        })
    }
}

/// The files of one commit, read through one long-lived `git cat-file --batch`.
pub struct GitTree<'g> {
    git: &'g Git,
    rev: String,
    files: std::collections::BTreeSet<String>,
    reader: std::cell::RefCell<Option<CatFile>>,
}

struct CatFile {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Drop for CatFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl CatFile {
    fn start(dir: &Path) -> std::io::Result<CatFile> {
        use std::process::Stdio;
        let mut child = Command::new("git")
            .args(["--no-pager", "cat-file", "--batch"])
            .current_dir(dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().ok_or(std::io::ErrorKind::BrokenPipe)?;
        let stdout = child.stdout.take().ok_or(std::io::ErrorKind::BrokenPipe)?;
        Ok(CatFile {
            child,
            stdin,
            stdout: std::io::BufReader::new(stdout),
        })
    }

    /// `<sha> blob <size>\n<bytes>\n`, or `<name> missing\n`.
    fn read(&mut self, object: &str) -> std::io::Result<Option<Vec<u8>>> {
        use std::io::{BufRead, Read, Write};
        writeln!(self.stdin, "{object}")?;
        self.stdin.flush()?;
        let mut header = String::new();
        self.stdout.read_line(&mut header)?;
        let mut fields = header.split_whitespace();
        let (_, kind, size) = (fields.next(), fields.next(), fields.next());
        let Some(size) = size.and_then(|s| s.parse::<usize>().ok()) else {
            return Ok(None);
        };
        let mut bytes = vec![0; size + 1];
        self.stdout.read_exact(&mut bytes)?;
        bytes.pop();
        Ok((kind == Some("blob")).then_some(bytes))
    }
}

impl kernelgate_model::SourceTree for GitTree<'_> {
    fn is_file(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        if !self.files.contains(path) || path.contains('\n') {
            return None;
        }
        let mut reader = self.reader.borrow_mut();
        if reader.is_none() {
            *reader = CatFile::start(self.git.root()).ok();
        }
        let object = format!("{}:{path}", self.rev);
        match reader.as_mut()?.read(&object) {
            Ok(bytes) => bytes,
            Err(_) => {
                // A broken pipe: the next read starts a fresh reader; this one asks git alone.
                *reader = None;
                self.git.show(&self.rev, path).ok()
            }
        }
    }

    fn list_dir(&self, dir: &str) -> Vec<String> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        self.files
            .range(prefix.clone()..)
            .take_while(|f| f.starts_with(&prefix))
            .filter(|f| !f[prefix.len()..].contains('/'))
            .cloned()
            .collect()
    }
}

/// Parses `git diff --name-status -z`: `STATUS\0path\0`, or `Rnnn\0from\0to\0` for renames/copies.
pub fn parse_name_status(out: &[u8]) -> Result<Vec<RawChange>, String> {
    let mut fields = out
        .split(|b| *b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned());
    let mut changes = Vec::new();
    while let Some(status) = fields.next() {
        if status.is_empty() {
            continue;
        }
        let mut path = || {
            fields
                .next()
                .filter(|p| !p.is_empty())
                .ok_or_else(|| format!("status `{status}` without a path"))
        };
        let change = match status.as_bytes()[0] {
            b'A' => RawChange::Added(path()?),
            b'M' => RawChange::Modified(path()?),
            b'D' => RawChange::Deleted(path()?),
            b'R' => {
                let score = status[1..].parse().unwrap_or(0);
                let from = path()?;
                let to = path()?;
                RawChange::Renamed { from, to, score }
            }
            b'C' => {
                let from = path()?;
                let to = path()?;
                RawChange::Copied { from, to }
            }
            b'T' | b'U' | b'X' => RawChange::Other(path()?),
            _ => return Err(format!("unknown status `{status}`")),
        };
        changes.push(change);
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_name_status_with_renames() {
        let raw = b"M\0a.py\0R087\0old/x.py\0new/x.py\0A\0b c.py\0D\0gone.py\0";
        let got = parse_name_status(raw).unwrap();
        assert_eq!(
            got,
            vec![
                RawChange::Modified("a.py".into()),
                RawChange::Renamed {
                    from: "old/x.py".into(),
                    to: "new/x.py".into(),
                    score: 87
                },
                RawChange::Added("b c.py".into()),
                RawChange::Deleted("gone.py".into()),
            ]
        );
    }

    #[test]
    fn truncated_output_is_an_error() {
        assert!(parse_name_status(b"R100\0only-one\0").is_err());
    }
}

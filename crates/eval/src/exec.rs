//! The last step between fork and exec of a job's child: its descriptors and the `execve`.
//!
//! The child keeps 0, 1 and 2 and the descriptors its spawner names ([`ExecPlan::keep`]),
//! moved to 3, 4, ... in that order; every other descriptor is closed at exec, whatever
//! kernelgate inherited from its own parent (an open log file of the runner, a socket) or
//! opened for another job. The `execve` is made here rather than by `std::process::Command`,
//! whose error pipe may sit on a number the kept descriptors take: when the `execve` fails,
//! what was moved is put back so `Command::spawn` still reports the error.
//!
//! Everything is allocated by [`ExecPlan::new`] in the parent; [`ExecPlan::exec`] only makes
//! system calls.

use std::ffi::{CString, OsStr};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How many descriptors a child may be given (3 to 3 + MAX_KEPT - 1).
pub const MAX_KEPT: usize = 16;

/// The first descriptor number a kept descriptor is not placed at.
pub(crate) fn first_free_fd(kept: usize) -> RawFd {
    3 + kept as RawFd
}

/// What the child execs, with which environment, keeping which descriptors.
pub(crate) struct ExecPlan {
    program: CString,
    _argv: Vec<CString>,
    _envp: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp_ptrs: Vec<*const libc::c_char>,
    keep: [RawFd; MAX_KEPT],
    kept: usize,
}

// SAFETY: the raw pointers point into the CStrings the plan owns, which never move or change
// after `new`; the plan is only read (in the forked child).
unsafe impl Send for ExecPlan {}
unsafe impl Sync for ExecPlan {}

#[derive(Debug, thiserror::Error)]
pub enum ExecPlanError {
    #[error(
        "a child may keep at most {MAX_KEPT} descriptors besides 0, 1 and 2 ({0} were asked); \
         pass fewer (one pipe can carry several streams)"
    )]
    TooManyKept(usize),
    #[error(
        "`{0}` is not a program on the child's PATH; give the interpreter's full path \
         (KERNELGATE_PYTHON or `[harness] python`)"
    )]
    NotFound(String),
    #[error("an argument or environment variable of the child holds a NUL byte; remove it")]
    Nul,
}

impl ExecPlan {
    /// The plan of `cmd` as it stands (program, arguments, an environment made with
    /// `env_clear`), keeping `keep` as 3, 4, ...: call it after the last `env`/`arg`.
    pub(crate) fn new(
        cmd: &std::process::Command,
        keep: &[RawFd],
    ) -> Result<ExecPlan, ExecPlanError> {
        if keep.len() > MAX_KEPT {
            return Err(ExecPlanError::TooManyKept(keep.len()));
        }
        let env: Vec<(&OsStr, &OsStr)> = cmd
            .get_envs()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        let path = env
            .iter()
            .find(|(k, _)| *k == "PATH")
            .map(|(_, v)| *v)
            .unwrap_or_default();
        let program = resolve(Path::new(cmd.get_program()), path)
            .ok_or_else(|| ExecPlanError::NotFound(cmd.get_program().to_string_lossy().into()))?;
        let c = |b: &[u8]| CString::new(b).map_err(|_| ExecPlanError::Nul);
        let program = c(program.as_os_str().as_bytes())?;
        let mut argv = vec![c(cmd.get_program().as_bytes())?];
        for a in cmd.get_args() {
            argv.push(c(a.as_bytes())?);
        }
        let mut envp = Vec::with_capacity(env.len());
        for (k, v) in env {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            envp.push(c(&kv)?);
        }
        let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let mut fds = [-1; MAX_KEPT];
        fds[..keep.len()].copy_from_slice(keep);
        Ok(ExecPlan {
            argv_ptrs: ptrs(&argv),
            envp_ptrs: ptrs(&envp),
            program,
            _argv: argv,
            _envp: envp,
            keep: fds,
            kept: keep.len(),
        })
    }

    /// Places the kept descriptors at 3, 4, ..., marks every other one above 2 close-on-exec
    /// and execs. Returns only when `execve` failed, with everything it moved put back.
    ///
    /// # Safety
    /// Between fork and exec only: system calls on descriptors the process holds.
    pub(crate) unsafe fn exec(&self) -> std::io::Error {
        let n = self.kept;
        let base = first_free_fd(n);
        // Every kept descriptor above the targets first, so placing one never overwrites another.
        let mut high = [-1; MAX_KEPT];
        for (h, &fd) in high.iter_mut().zip(&self.keep[..n]) {
            *h = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, base);
            if *h < 0 {
                return std::io::Error::last_os_error();
            }
        }
        // Whatever holds a target now (std's error pipe, another descriptor) moves above them.
        let mut saved = [-1; MAX_KEPT];
        for (i, slot) in saved.iter_mut().enumerate().take(n) {
            let target = 3 + i as RawFd;
            if libc::fcntl(target, libc::F_GETFD) != -1 {
                *slot = libc::fcntl(target, libc::F_DUPFD_CLOEXEC, base);
            }
        }
        for (i, &h) in high[..n].iter().enumerate() {
            // dup2 leaves the copy without close-on-exec: it survives the exec.
            if libc::dup2(h, 3 + i as RawFd) < 0 {
                let e = std::io::Error::last_os_error();
                restore(&saved[..n]);
                return e;
            }
        }
        close_on_exec_from(base);
        libc::execve(
            self.program.as_ptr(),
            self.argv_ptrs.as_ptr(),
            self.envp_ptrs.as_ptr(),
        );
        let e = std::io::Error::last_os_error();
        restore(&saved[..n]);
        e
    }
}

/// Puts back what held the targets 3, 4, ... before they were taken (close-on-exec, as std's
/// pipe was), and closes those that were free.
unsafe fn restore(saved: &[RawFd]) {
    for (i, &fd) in saved.iter().enumerate() {
        let target = 3 + i as RawFd;
        if fd >= 0 {
            libc::dup3(fd, target, libc::O_CLOEXEC);
        } else {
            libc::close(target);
        }
    }
}

/// `program` as `execvp` would find it on `path` (a name without `/`), else itself.
fn resolve(program: &Path, path: &OsStr) -> Option<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Some(program.to_path_buf());
    }
    std::env::split_paths(path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access on a NUL-terminated path.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// Marks every descriptor from `first` up close-on-exec.
///
/// # Safety
/// System calls only.
pub(crate) unsafe fn close_on_exec_from(first: RawFd) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    let done = libc::syscall(
        libc::SYS_close_range,
        first as libc::c_uint,
        libc::c_uint::MAX,
        CLOSE_RANGE_CLOEXEC,
    ) == 0;
    if !done {
        // Before Linux 5.11: one by one, up to the descriptor limit.
        for fd in first..open_max() {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// Closes every descriptor but those in `keep`.
///
/// # Safety
/// System calls only; the caller holds no other descriptor it still needs.
pub(crate) unsafe fn close_all_but(keep: &[RawFd]) {
    let mut sorted = [-1; 4];
    let n = keep.len().min(sorted.len());
    sorted[..n].copy_from_slice(&keep[..n]);
    sorted[..n].sort_unstable();
    let mut from: RawFd = 0;
    for &k in sorted[..n].iter().filter(|&&k| k >= 0) {
        if k > from {
            close_range(from, k - 1);
        }
        from = from.max(k + 1);
    }
    close_range(from, RawFd::MAX);
}

unsafe fn close_range(first: RawFd, last: RawFd) {
    if libc::syscall(
        libc::SYS_close_range,
        first as libc::c_uint,
        last as libc::c_uint,
        0 as libc::c_uint,
    ) != 0
    {
        for fd in first..last.min(open_max()).saturating_add(1) {
            libc::close(fd);
        }
    }
}

/// The descriptor limit (what a loop over descriptors must reach).
unsafe fn open_max() -> RawFd {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur != libc::RLIM_INFINITY {
        r.rlim_cur.min(1 << 20) as RawFd
    } else {
        1 << 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_on_the_childs_path() {
        let found = resolve(Path::new("sh"), OsStr::new("/nonexistent:/bin:/usr/bin")).unwrap();
        assert!(found.ends_with("sh") && found.is_absolute(), "{found:?}");
        assert_eq!(
            resolve(Path::new("kg-no-such-program"), OsStr::new("/bin")),
            None
        );
        assert_eq!(
            resolve(Path::new("./x/python"), OsStr::new("")),
            Some(PathBuf::from("./x/python"))
        );
    }
}

//! Every process of a job in one PID namespace, so that every process of the job dies with it.
//!
//! The CLI's child (the *launcher*: outside the namespace, in the job's process group, the
//! process `std::process::Child` waits for) unshares a PID namespace after its user namespace
//! and forks the namespace's *init*; the init forks the process that is confined and execs the
//! interpreter. The init reaps whatever is orphaned in the namespace, tells the CLI how the
//! interpreter ended ([`InitLink::ended`]) and then waits for the CLI, which counts what is
//! still running (the job's strays) and kills the init. When the init dies, the kernel kills
//! every process of the namespace: whatever session, process group or environment a process
//! gave itself, and however often it forked. Nothing the candidate can write decides what is
//! killed.
//!
//! Launcher and init are forks of the CLI that never exec: they make system calls only, run
//! outside the Landlock domain and seccomp filter of the job (which the exec'ing process
//! enters after the fork), stay non-dumpable like the CLI, and hold no descriptor but their
//! report pipe to the CLI. As a namespace's init, the init ignores every signal from inside it.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::exec::close_all_but;

/// The launcher forked the init: the init's pid (in the CLI's namespace).
const STARTED: u32 = 1;
/// The interpreter ended: its raw wait status.
const ENDED: u32 = 2;
const RECORD: usize = 8;

/// How long the init waits for the CLI after the interpreter ended before it ends the
/// namespace itself; the CLI kills it as soon as it has counted what is left, so this only
/// bounds a CLI that died in between.
const LINGER_S: libc::time_t = 30;

/// The pipe a job's launcher and init report on: the CLI keeps the read end (non-blocking),
/// the child's side gets the write end (close-on-exec: the interpreter never holds it).
pub(crate) struct ReportPipe {
    pub(crate) read: OwnedFd,
    pub(crate) write: OwnedFd,
}

impl ReportPipe {
    pub(crate) fn new() -> std::io::Result<ReportPipe> {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 fills the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(read.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(read.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Ok(ReportPipe { read, write })
    }
}

/// The process that goes on to exec, and the descriptor on which it tells the init that it
/// failed before its exec (the init then ends at once instead of waiting for the CLI).
pub(crate) struct ExecWatch {
    fd: RawFd,
}

impl ExecWatch {
    /// Tells the init that the exec will not happen.
    ///
    /// # Safety
    /// Between fork and exec only.
    pub(crate) unsafe fn failed(&self) {
        let b = [1u8];
        libc::write(self.fd, b.as_ptr().cast(), 1);
    }
}

/// Enters a new PID namespace and forks its init; returns in the init's child, which goes on
/// to be confined and exec. `report` is the write end of the [`ReportPipe`], `cli_end` its read
/// end (closed here), `first_free` the lowest descriptor the exec step does not place a kept
/// descriptor at. Needs a user namespace entered before (CAP_SYS_ADMIN in it).
///
/// # Safety
/// Between fork and exec only: system calls, no allocation; the launcher and the init never
/// return (they `_exit`).
pub(crate) unsafe fn fork_init(
    report: RawFd,
    cli_end: RawFd,
    first_free: RawFd,
) -> std::io::Result<ExecWatch> {
    if libc::unshare(libc::CLONE_NEWPID) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let init = libc::fork();
    if init < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if init > 0 {
        launcher(report, init);
    }
    // The init: pid 1 of the namespace.
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    libc::prctl(libc::PR_SET_NAME, c"kg-job-init".as_ptr());
    let mut watch = [-1; 2];
    if libc::pipe2(watch.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
        libc::_exit(1);
    }
    let worker = libc::fork();
    if worker == 0 {
        libc::close(watch[0]);
        libc::close(report);
        libc::close(cli_end);
        let mut fd = watch[1];
        if fd < first_free {
            // Out of the way of the descriptors the exec step places at 3, 4, ...
            fd = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, first_free);
            libc::close(watch[1]);
        }
        return Ok(ExecWatch { fd });
    }
    if worker < 0 {
        libc::_exit(1);
    }
    init_main(report, watch[0], worker)
}

/// The launcher: tells the CLI the init's pid, waits for the init and ends as it did.
unsafe fn launcher(report: RawFd, init: libc::pid_t) -> ! {
    libc::prctl(libc::PR_SET_NAME, c"kg-job".as_ptr());
    write_record(report, STARTED, init);
    close_all_but(&[]);
    let mut status = 0;
    loop {
        let r = libc::waitpid(init, &mut status, 0);
        if r == init {
            break;
        }
        if r < 0 && errno() != libc::EINTR {
            libc::_exit(1);
        }
    }
    if libc::WIFSIGNALED(status) {
        reraise(libc::WTERMSIG(status));
    }
    libc::_exit(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        1
    })
}

/// The init: waits for the worker's exec, reaps until the worker ended, reports how, and
/// stays until the CLI kills it (at most [`LINGER_S`]).
unsafe fn init_main(report: RawFd, watch: RawFd, worker: libc::pid_t) -> ! {
    close_all_but(&[report, watch]);
    let mut b = 0u8;
    let n = loop {
        let n = libc::read(watch, (&mut b as *mut u8).cast(), 1);
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        break n;
    };
    libc::close(watch);
    // EOF: the exec closed the watch (or the worker died); a byte: it failed before its exec.
    let reached_exec = n == 0;
    let mut status = 0;
    loop {
        let mut st = 0;
        let r = libc::waitpid(-1, &mut st, 0);
        if r == worker {
            status = st;
            break;
        }
        if r < 0 && errno() != libc::EINTR {
            break;
        }
    }
    if !reached_exec {
        // Spawning reports the error; the launcher must end for it to be read.
        libc::_exit(0);
    }
    write_record(report, ENDED, status);
    let deadline = now_s() + LINGER_S;
    while now_s() < deadline {
        while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        libc::nanosleep(&pause, std::ptr::null_mut());
    }
    libc::_exit(0)
}

unsafe fn write_record(fd: RawFd, kind: u32, value: i32) {
    let mut rec = [0u8; RECORD];
    rec[..4].copy_from_slice(&kind.to_ne_bytes());
    rec[4..].copy_from_slice(&value.to_ne_bytes());
    // Eight bytes: one atomic pipe write.
    libc::write(fd, rec.as_ptr().cast(), RECORD);
}

/// Ends this process by `sig`, as the process it mirrors ended (no core: the launcher is a
/// copy of the CLI).
unsafe fn reraise(sig: libc::c_int) -> ! {
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &none);
    let mut act: libc::sigaction = std::mem::zeroed();
    act.sa_sigaction = libc::SIG_DFL;
    libc::sigaction(sig, &act, std::ptr::null_mut());
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigaddset(&mut set, sig);
    libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    libc::kill(libc::getpid(), sig);
    libc::_exit(128 + sig)
}

unsafe fn now_s() -> libc::time_t {
    let mut t: libc::timespec = std::mem::zeroed();
    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t);
    t.tv_sec
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The CLI's side: what the launcher and the init reported, and the namespace's processes.
pub(crate) struct InitLink {
    read: OwnedFd,
    buf: [u8; RECORD],
    have: usize,
    /// The init's pid in the CLI's namespace, once the launcher forked it.
    pub(crate) init: Option<i32>,
    /// The interpreter's raw wait status, once it ended.
    pub(crate) ended: Option<i32>,
    /// `/proc/<init>/ns/pid` as the kernel names it (`pid:[4026532...]`).
    ns: Option<OsString>,
}

impl InitLink {
    pub(crate) fn new(read: OwnedFd) -> InitLink {
        InitLink {
            read,
            buf: [0; RECORD],
            have: 0,
            init: None,
            ended: None,
            ns: None,
        }
    }

    /// Takes what the pipe holds now; never waits.
    pub(crate) fn poll(&mut self) {
        loop {
            // SAFETY: reading into the unfilled part of our own buffer.
            let n = unsafe {
                libc::read(
                    self.read.as_raw_fd(),
                    self.buf[self.have..].as_mut_ptr().cast(),
                    RECORD - self.have,
                )
            };
            if n <= 0 {
                return;
            }
            self.have += n as usize;
            if self.have == RECORD {
                self.have = 0;
                let kind = u32::from_ne_bytes(self.buf[..4].try_into().expect("4 bytes"));
                let value = i32::from_ne_bytes(self.buf[4..].try_into().expect("4 bytes"));
                match kind {
                    STARTED => self.init = Some(value),
                    ENDED => self.ended = Some(value),
                    _ => {}
                }
            }
        }
    }

    /// The namespace's identity, read once the init is known.
    fn namespace(&mut self) -> Option<&OsString> {
        if self.ns.is_none() {
            let init = self.init?;
            let link = std::fs::read_link(format!("/proc/{init}/ns/pid")).ok()?;
            // The init has not unshared yet (it always has once it is forked): not ours.
            let own = std::fs::read_link("/proc/self/ns/pid").ok();
            if own.as_deref() == Some(link.as_path()) {
                return None;
            }
            self.ns = Some(link.into_os_string());
        }
        self.ns.as_ref()
    }

    /// The processes of the job's namespace but its init, by their pid in the CLI's namespace.
    pub(crate) fn members(&mut self) -> Vec<i32> {
        let init = self.init;
        let Some(ns) = self.namespace().cloned() else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| Some(pid) != init)
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                    .is_ok_and(|l| l.as_os_str() == ns.as_os_str())
            })
            .collect()
    }

    /// Kills the init (the kernel then kills the rest of the namespace) and gives the launcher
    /// up to `grace` to reap it and end; the caller then kills the process group.
    pub(crate) fn kill(&mut self, child: &mut std::process::Child, grace: std::time::Duration) {
        self.poll();
        let Some(init) = self.init else { return };
        // SAFETY: the init is the launcher's child, not reaped while the launcher lives, so
        // its pid is still its own; ESRCH is fine.
        unsafe {
            libc::kill(init, libc::SIGKILL);
        }
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

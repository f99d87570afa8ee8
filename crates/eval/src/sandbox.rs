//! The sandbox around every job's child (compile and run share it): Landlock confines the file
//! system, TCP, abstract UNIX sockets and signals; a user and network namespace cuts every other
//! socket and the child's capabilities in the host namespace, and a PID namespace
//! (`crate::pidns`) holds every process of the job; seccomp denies the syscalls that reach other
//! processes or the kernel (ptrace, `process_vm_*`, mount, bpf, keyrings, ...) and UNIX sockets
//! by path (`connect()` and datagram `socket(AF_UNIX)`, which Landlock does not cover).
//!
//! Everything that allocates (opening the allowed paths, building the ruleset and the BPF
//! program) happens in the parent in [`Confinement::prepare`]; between fork and exec the child
//! only makes system calls.

use landlock::{
    make_bitflags, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Environment variable that switches the sandbox off (`off`, for debugging only) or makes it
/// required (`required`); it overrides `[sandbox]` in kernelgate.toml.
pub const SANDBOX_ENV: &str = "KERNELGATE_SANDBOX";

/// What the run asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// As much as the kernel offers; an unavailable sandbox is recorded, not an error.
    #[default]
    Auto,
    /// An unavailable sandbox fails the job.
    Required,
    /// No sandbox (debugging); recorded as `off` on every row.
    Off,
}

impl SandboxMode {
    /// The mode from `[sandbox]` in kernelgate.toml, overridden by [`SANDBOX_ENV`].
    pub fn resolve(enabled: bool, required: bool) -> Result<SandboxMode, SandboxError> {
        let from_config = match (enabled, required) {
            (false, _) => SandboxMode::Off,
            (true, true) => SandboxMode::Required,
            (true, false) => SandboxMode::Auto,
        };
        match std::env::var(SANDBOX_ENV).ok().as_deref().map(str::trim) {
            None | Some("") => Ok(from_config),
            Some("off") | Some("0") => Ok(SandboxMode::Off),
            Some("auto") | Some("on") | Some("1") => Ok(SandboxMode::Auto),
            Some("required") => Ok(SandboxMode::Required),
            Some(other) => Err(SandboxError::BadEnv(other.to_string())),
        }
    }
}

/// How well one job's child was confined; recorded on every row (the model owns the type).
pub use kernelgate_model::SandboxLevel;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "{SANDBOX_ENV}={0} is not a sandbox mode: use `auto`, `required` or `off` (debugging only)"
    )]
    BadEnv(String),
    #[error(
        "the sandbox is required ([sandbox] required = true or {SANDBOX_ENV}=required) but \
         unavailable: {0}; run on a Linux kernel with Landlock enabled (5.13 or later, `lsm=landlock` \
         on the kernel command line), or set required = false to run unconfined"
    )]
    Required(String),
    #[error("cannot build the sandbox's Landlock rules: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("cannot build the sandbox's seccomp filter: {0}")]
    Seccomp(#[from] seccompiler::Error),
}

/// Marks this process non-dumpable: processes of the same user (a candidate outside the
/// sandbox, or with it off) can then neither read its environment (the workflow token) through
/// `/proc/<pid>/environ` nor its memory nor attach to it. Call early in `main`.
pub fn make_this_process_undumpable() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// The file-system policy of one job. The runner's audit hook reports against the same lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Read and execute beneath these (system, interpreter, CUDA toolkit).
    pub read_exec: Vec<PathBuf>,
    /// Read these files only (problem, kernel, base kernel, the harness extension).
    pub read_files: Vec<PathBuf>,
    /// Read and write beneath these (the job's directory, a shared extensions cache, devices).
    pub read_write: Vec<PathBuf>,
}

/// System directories every child reads and executes from.
/// Not `/dev`: as root a child could read raw disks there; it gets the devices it needs.
/// Not `/opt`: the Actions runner keeps its `.credentials` and work directories there; an
/// interpreter or CUDA toolkit installed under it is granted by its own prefix
/// ([`interpreter_roots`], [`toolchain_roots`]).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys",
];

/// Device nodes and directories a job writes: the null devices, shared memory (torch's
/// DataLoader, NCCL) and the NVIDIA driver's nodes (added by [`Policy::for_job`]).
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/shm",
];

impl Policy {
    /// The policy for a job whose child runs `python` with the harness extension `harness` in
    /// `job_dir`, reading `read_files` (a directory among them: everything beneath it) and also
    /// writing beneath `extra_rw` (the job's torch extensions directory).
    pub fn for_job(
        python: &Path,
        harness: &Path,
        job_dir: &Path,
        read_files: &[&Path],
        extra_rw: &[&Path],
    ) -> Policy {
        let mut read_exec: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
        read_exec.extend(interpreter_roots(python));
        read_exec.extend(toolchain_roots());
        let mut read_write: Vec<PathBuf> = WRITABLE_DEVICES.iter().map(PathBuf::from).collect();
        if let Ok(entries) = std::fs::read_dir("/dev") {
            let mut nvidia: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("nvidia"))
                .map(|e| e.path())
                .collect();
            nvidia.sort();
            read_write.extend(nvidia);
        }
        read_write.push(job_dir.to_path_buf());
        read_write.extend(extra_rw.iter().map(|p| p.to_path_buf()));
        let (dirs, mut files): (Vec<PathBuf>, Vec<PathBuf>) = read_files
            .iter()
            .map(|p| p.to_path_buf())
            .partition(|p| p.is_dir());
        read_exec.extend(dirs);
        files.push(harness.to_path_buf());
        let canon = |v: Vec<PathBuf>| -> Vec<PathBuf> {
            let mut out: Vec<PathBuf> = Vec::new();
            for p in v {
                // Landlock follows symlinks to the inode: the report speaks of real paths too.
                let Ok(real) = std::fs::canonicalize(&p) else {
                    continue;
                };
                if !out.contains(&real) {
                    out.push(real);
                }
            }
            out
        };
        Policy {
            read_exec: canon(read_exec),
            read_files: canon(files),
            read_write: canon(read_write),
        }
    }

    /// True when the child may read `path` (a real path).
    pub fn allows_read(&self, path: &Path) -> bool {
        self.read_files.iter().any(|f| f == path)
            || self
                .read_exec
                .iter()
                .chain(&self.read_write)
                .any(|root| path.starts_with(root))
    }

    /// True when the child may write `path` (a real path).
    pub fn allows_write(&self, path: &Path) -> bool {
        self.read_write.iter().any(|root| path.starts_with(root))
    }

    /// The lists for the runner's audit hook, plus the syscalls seccomp denies.
    /// The lists as the runner's audit hook checks them, with the level the launcher reached.
    pub fn grant(&self, level: &SandboxLevel) -> crate::protocol::SandboxGrant {
        let s = |v: &[PathBuf]| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        crate::protocol::SandboxGrant {
            read_exec: s(&self.read_exec),
            read_files: s(&self.read_files),
            read_write: s(&self.read_write),
            denied_syscalls: denied_syscalls()
                .map(|(n, nr)| (n.to_string(), *nr))
                .collect(),
            denied_from_candidate: DENIED_FROM_CANDIDATE
                .iter()
                .map(|(n, nr)| (n.to_string(), *nr))
                .collect(),
            level: level.to_string(),
        }
    }
}

/// The interpreter's prefixes and import path (site-packages, editable installs), asked of the
/// interpreter itself once per process.
fn interpreter_roots(python: &Path) -> Vec<PathBuf> {
    static CACHE: OnceLock<std::sync::Mutex<BTreeMap<PathBuf, Vec<PathBuf>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(python) {
        return v.clone();
    }
    let script = "import sys\nfor p in [sys.prefix, sys.base_prefix, sys.exec_prefix, \
                  sys.base_exec_prefix, *sys.path]:\n    print(p)";
    let mut cmd = Command::new(python);
    cmd.args(["-c", script]).env_clear();
    for (k, v) in std::env::vars() {
        // The import path the child will have: its environment, with PYTHONPATH.
        if crate::child::passes_to_child(&k) || k == "PYTHONPATH" {
            cmd.env(k, v);
        }
    }
    let mut roots = Vec::new();
    if let Ok(out) = cmd.stderr(std::process::Stdio::null()).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let p = PathBuf::from(line.trim());
            // `sys.path[0]` is the working directory for `-c`; the checkout must not come with it.
            if p.is_absolute() && p != std::env::current_dir().unwrap_or_default() {
                roots.push(p);
            }
        }
    }
    // The interpreter's own directory, in case it lives outside its prefix.
    if let Some(bin) = std::fs::canonicalize(python)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        roots.push(bin);
    }
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(python.to_path_buf(), roots.clone());
    roots
}

/// The CUDA toolkit, the compilers and the libraries the runner points at, wherever they are
/// installed (`/opt/nvidia/...`): the prefix of `$CUDA_HOME`/`$CUDA_PATH`, of the `nvcc` on
/// `PATH` (what torch's `_find_cuda_home` falls back on) and of `$CC`, `$CXX` and
/// `$CUDAHOSTCXX` when they are paths, and the directories of `$LD_LIBRARY_PATH`. Only these:
/// never all of `/opt`.
fn toolchain_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var).filter(|d| !d.is_empty()) {
            roots.push(PathBuf::from(d));
        }
    }
    let prefix = |exe: &Path| -> Option<PathBuf> {
        let real = std::fs::canonicalize(exe).ok()?;
        // `<prefix>/bin/<tool>`: the prefix holds its headers and libraries too.
        let bin = real.parent()?;
        Some(if bin.file_name().is_some_and(|n| n == "bin") {
            bin.parent()?.to_path_buf()
        } else {
            bin.to_path_buf()
        })
    };
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let nvcc = dir.join("nvcc");
            if nvcc.is_file() {
                roots.extend(prefix(&nvcc));
                break;
            }
        }
    }
    // The libraries the runner's environment tells the loader to find (CUDA's, MKL's), each
    // directory exactly as it is listed.
    if let Some(path) = std::env::var_os("LD_LIBRARY_PATH") {
        roots.extend(std::env::split_paths(&path).filter(|d| d.is_absolute() && d.is_dir()));
    }
    for var in ["CC", "CXX", "CUDAHOSTCXX"] {
        if let Some(v) = std::env::var_os(var) {
            let p = PathBuf::from(v);
            if p.is_absolute() {
                roots.extend(prefix(&p));
            }
        }
    }
    roots
}

/// Syscalls denied with `EPERM`: they reach other processes (ptrace, `process_vm_*`,
/// `pidfd_getfd`), the kernel (modules, kexec, bpf, keyrings, perf events) or the mount table.
/// `perf_event_open` is safe to deny: `torch.profiler` on the CPU does not use it. The same
/// on every architecture; x86-64 adds its port-I/O calls (`ARCH_DENIED_SYSCALLS`).
const DENIED_SYSCALLS: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("fsconfig", libc::SYS_fsconfig),
    ("fspick", libc::SYS_fspick),
    ("setns", libc::SYS_setns),
    ("unshare", libc::SYS_unshare),
    ("bpf", libc::SYS_bpf),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("syslog", libc::SYS_syslog),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
];

/// Syscalls the runner denies from the candidate's import on (a second seccomp filter, on every
/// thread, that the process cannot lift): torch's own start-up needs them, so they cannot be
/// denied at exec. `sched_setaffinity`: a candidate widening its CPU mask would be timed on CPUs
/// the reference in the same process never had, and load a neighbour's CPU lane; MKL's core
/// count at torch's import pins the thread to each CPU in turn, before the candidate exists.
pub const DENIED_FROM_CANDIDATE: &[(&str, i64)] =
    &[("sched_setaffinity", libc::SYS_sched_setaffinity)];

#[cfg(target_arch = "x86_64")]
const ARCH_DENIED_SYSCALLS: &[(&str, i64)] =
    &[("iopl", libc::SYS_iopl), ("ioperm", libc::SYS_ioperm)];
#[cfg(not(target_arch = "x86_64"))]
const ARCH_DENIED_SYSCALLS: &[(&str, i64)] = &[];

/// Every denied syscall of this architecture, by name and number.
fn denied_syscalls() -> impl Iterator<Item = &'static (&'static str, i64)> {
    DENIED_SYSCALLS.iter().chain(ARCH_DENIED_SYSCALLS)
}

/// Namespace flags a `clone` may not carry: a namespace nested in the job's would hold
/// processes the CLI does not count as the job's (memory, strays), though they die with it.
/// `CLONE_NEWTIME` is left out: for `clone` those bits are the exit signal.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// The job's seccomp filters: the denied syscalls, `connect()`, datagram `socket(AF_UNIX, ...)`
/// and namespace flags of `clone` with `EPERM`; `clone3` (whose flags a filter cannot read) with
/// `ENOSYS`, on which glibc falls back on `clone`, as under Docker's default profile.
///
/// A UNIX socket reaches a path only through `connect()` or, for a datagram socket, a send with
/// an address; Landlock covers neither. So `connect()` is refused whatever the socket (TCP and
/// UDP have no interface in the job's network namespace anyway) and datagram UNIX sockets are not
/// made; stream and seqpacket ones are, since the CUDA driver's start needs
/// `socket(AF_UNIX, SOCK_SEQPACKET)` to succeed (error 304 otherwise, on an H100) and takes a
/// refused `connect()` to its MPS pipe as "no MPS". Unconnected, such a socket sends nowhere.
/// `socketpair(AF_UNIX)` stays allowed: it reaches no path, only the two ends it makes.
fn seccomp_programs() -> Result<Vec<BpfProgram>, SandboxError> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let backend = seccompiler::Error::Backend;
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(backend)?;
    // An empty rule list matches the syscall whatever its arguments.
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied_syscalls().map(|(_, nr)| (*nr, Vec::new())).collect();
    let arg_is = |index: u8, op: SeccompCmpOp, value: u64| -> Result<SeccompRule, SandboxError> {
        let cond =
            SeccompCondition::new(index, SeccompCmpArgLen::Qword, op, value).map_err(backend)?;
        Ok(SeccompRule::new(vec![cond]).map_err(backend)?)
    };
    rules.insert(libc::SYS_connect, Vec::new());
    // The socket type's low bits (the rest are SOCK_CLOEXEC and SOCK_NONBLOCK).
    const SOCK_TYPE_MASK: u64 = 0xf;
    let unix_datagram = SeccompRule::new(vec![
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::AF_UNIX as u64,
        )
        .map_err(backend)?,
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
            libc::SOCK_DGRAM as u64,
        )
        .map_err(backend)?,
    ])
    .map_err(backend)?;
    rules.insert(libc::SYS_socket, vec![unix_datagram]);
    rules.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&f| arg_is(0, SeccompCmpOp::MaskedEq(f), f))
            .collect::<Result<_, _>>()?,
    );
    let denied = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(backend)?;
    let no_clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(backend)?;
    Ok(vec![
        denied.try_into().map_err(backend)?,
        no_clone3.try_into().map_err(backend)?,
    ])
}

/// The Landlock ABI the rules are written for (Linux 6.12+); older kernels get what they have.
const TARGET_ABI: ABI = ABI::V7;

/// What this kernel's Landlock enforces, probed once: `Err` when there is no Landlock at all,
/// else the layers it lacks.
fn landlock_support() -> &'static Result<Vec<&'static str>, String> {
    static SUPPORT: OnceLock<Result<Vec<&'static str>, String>> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        if let Err(e) = hard()
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|r| r.create())
        {
            return Err(format!("Landlock is not enabled in this kernel: {e}"));
        }
        let mut missing = Vec::new();
        if hard()
            .handle_access(make_bitflags!(AccessNet::{BindTcp | ConnectTcp}))
            .and_then(|r| r.create())
            .is_err()
        {
            missing.push("Landlock TCP rules (ABI 4)");
        }
        if hard()
            .scope(Scope::from_all(ABI::V6))
            .and_then(|r| r.create())
            .is_err()
        {
            missing.push("Landlock signal and abstract-socket scoping (ABI 6)");
        }
        Ok(missing)
    })
}

/// The id maps a child writes after entering its own user namespace: the same ids inside, so
/// file ownership and `getuid()` look as before, and no capability in the host namespace.
struct IdMaps {
    uid_map: CString,
    gid_map: CString,
}

impl IdMaps {
    fn current() -> IdMaps {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        IdMaps {
            uid_map: CString::new(format!("{uid} {uid} 1")).expect("no NUL"),
            gid_map: CString::new(format!("{gid} {gid} 1")).expect("no NUL"),
        }
    }

    /// Enters a new user and network namespace. Only system calls: runs between fork and exec.
    fn enter(&self) -> Result<(), (&'static str, i32)> {
        let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        // SAFETY: plain system calls on constant C strings and owned buffers.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                return Err(("unshare(CLONE_NEWUSER|CLONE_NEWNET)", errno()));
            }
            let write = |path: &[u8], text: &[u8]| -> bool {
                let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return false;
                }
                let ok = libc::write(fd, text.as_ptr().cast(), text.len()) == text.len() as isize;
                libc::close(fd);
                ok
            };
            if !write(b"/proc/self/setgroups\0", b"deny") {
                return Err(("writing /proc/self/setgroups", errno()));
            }
            if !write(b"/proc/self/uid_map\0", self.uid_map.as_bytes()) {
                return Err(("writing /proc/self/uid_map", errno()));
            }
            if !write(b"/proc/self/gid_map\0", self.gid_map.as_bytes()) {
                return Err(("writing /proc/self/gid_map", errno()));
            }
        }
        Ok(())
    }
}

/// Whether this process can give its children their own user, network and PID namespace,
/// probed once in a forked child (AppArmor or sysctls may forbid it).
fn namespaces_support() -> &'static Result<(), String> {
    static SUPPORT: OnceLock<Result<(), String>> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let maps = IdMaps::current();
        // SAFETY: the forked child only makes system calls and leaves with _exit.
        unsafe {
            let pid = libc::fork();
            if pid < 0 {
                return Err(format!("fork: {}", std::io::Error::last_os_error()));
            }
            if pid == 0 {
                let code = match maps.enter() {
                    Ok(()) if libc::unshare(libc::CLONE_NEWPID) != 0 => {
                        1 + (std::io::Error::last_os_error().raw_os_error().unwrap_or(0) & 0x7f)
                    }
                    // The namespace's first process: its init.
                    Ok(()) => match libc::fork() {
                        0 => libc::_exit(0),
                        p if p > 0 => {
                            let mut st = 0;
                            libc::waitpid(p, &mut st, 0);
                            if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 {
                                0
                            } else {
                                1 + libc::EINVAL
                            }
                        }
                        _ => {
                            1 + (std::io::Error::last_os_error().raw_os_error().unwrap_or(0) & 0x7f)
                        }
                    },
                    Err((_, e)) => 1 + (e & 0x7f),
                };
                libc::_exit(code);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
                Some(0) => Ok(()),
                Some(c) => Err(format!(
                    "no user namespace: {}",
                    std::io::Error::from_raw_os_error(c - 1)
                )),
                None => Err("the namespace probe died".into()),
            }
        }
    })
}

/// A job's confinement, prepared in the parent ([`Confinement::prepare`], the one entry point:
/// everything that can fail is done there) and entered by the child between fork and exec:
/// [`Confinement::enter_namespaces`], the PID namespace (`crate::pidns`, when
/// [`Confinement::pid_namespace`]), then [`Confinement::restrict`].
pub struct Confinement {
    level: SandboxLevel,
    namespaces: Option<IdMaps>,
    /// The ruleset's descriptor: the child adds its own `/proc/<pid>` to it before enforcing.
    ruleset: Option<OwnedFd>,
    seccomp: Vec<BpfProgram>,
    /// A PID namespace of its own: not for a job that may use the GPU, whose driver builds
    /// `/proc/<pid>` paths from the pid it sees, which a namespace makes another process's.
    pid_namespace: bool,
}

impl Confinement {
    /// The confinement of a child under `policy`, and the level it runs at.
    pub fn prepare(
        mode: SandboxMode,
        policy: &Policy,
        gpu: bool,
    ) -> Result<Confinement, SandboxError> {
        let none = |level| Confinement {
            level,
            namespaces: None,
            ruleset: None,
            seccomp: Vec::new(),
            pid_namespace: false,
        };
        if mode == SandboxMode::Off {
            return Ok(none(SandboxLevel::Off));
        }
        let seccomp = seccomp_programs();
        let level = level_for(
            mode,
            landlock_support(),
            namespaces_support(),
            seccomp.as_ref().err().map(|e| e.to_string()),
        )?;
        if matches!(level, SandboxLevel::Unavailable(_)) {
            return Ok(none(level));
        }
        Ok(Confinement {
            level,
            namespaces: namespaces_support().is_ok().then(IdMaps::current),
            ruleset: landlock_ruleset(policy)?.into(),
            seccomp: seccomp.unwrap_or_default(),
            pid_namespace: !gpu,
        })
    }

    /// Leaves Landlock to the child's own processes: the harness's judge and the workers it
    /// starts each enforce a ruleset of their own (`kernelgate_harness`), so a worker is not
    /// nested in the judge's domain (where it could not write its own `/proc/<pid>`, which the
    /// CUDA driver does, nor be kept from the judge by Landlock's scoping: sibling domains are).
    /// The judge's ruleset scopes abstract sockets but not signals (`Scoping::Judge`): it stops
    /// its workers between their timed calls; the workers' scope both, so none signals the judge.
    /// Returns the rulesets, the judge's first, then `workers` more; none without Landlock.
    pub fn defer_landlock(
        &mut self,
        policy: &Policy,
        workers: usize,
    ) -> Result<Vec<OwnedFd>, SandboxError> {
        if self.ruleset.take().is_none() {
            return Ok(Vec::new());
        }
        let Some(own) = Option::<OwnedFd>::from(landlock_ruleset_scoped(policy, Scoping::Judge)?)
        else {
            return Ok(Vec::new());
        };
        let mut fds = vec![own];
        for _ in 0..workers {
            if let Some(fd) = Option::<OwnedFd>::from(landlock_ruleset(policy)?) {
                fds.push(fd);
            }
        }
        Ok(fds)
    }

    /// The level the child runs at.
    pub fn level(&self) -> &SandboxLevel {
        &self.level
    }

    /// The child gets a PID namespace of its own (it has a user namespace to make it in).
    pub fn pid_namespace(&self) -> bool {
        self.namespaces.is_some() && self.pid_namespace
    }

    /// Enters the user and network namespace.
    ///
    /// # Safety
    /// Between fork and exec only: system calls on what the parent allocated.
    pub unsafe fn enter_namespaces(&self) -> std::io::Result<()> {
        if let Some(maps) = &self.namespaces {
            maps.enter()
                .map_err(|(_, e)| std::io::Error::from_raw_os_error(e))?;
        }
        Ok(())
    }

    /// Enforces Landlock and seccomp on this process, for good.
    ///
    /// # Safety
    /// Between fork and exec only: system calls on what the parent allocated.
    pub unsafe fn restrict(&self) -> std::io::Result<()> {
        if let Some(fd) = &self.ruleset {
            kernelgate_confine::restrict_self_with_own_proc(fd.as_raw_fd())?;
        }
        for p in &self.seccomp {
            seccompiler::apply_filter(p)
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))?;
        }
        Ok(())
    }
}

/// The level a job gets from what this machine supports: no Landlock is `unavailable` (an
/// error when required); any other missing layer is `partial`.
fn level_for(
    mode: SandboxMode,
    landlock: &Result<Vec<&'static str>, String>,
    namespaces: &Result<(), String>,
    seccomp_error: Option<String>,
) -> Result<SandboxLevel, SandboxError> {
    let missing_landlock = match (mode, landlock) {
        (SandboxMode::Off, _) => return Ok(SandboxLevel::Off),
        (SandboxMode::Required, Err(reason)) => return Err(SandboxError::Required(reason.clone())),
        (SandboxMode::Auto, Err(reason)) => return Ok(SandboxLevel::Unavailable(reason.clone())),
        (_, Ok(m)) => m,
    };
    let mut missing: Vec<String> = missing_landlock.iter().map(|s| s.to_string()).collect();
    if let Err(reason) = namespaces {
        missing.push(format!("network and PID namespaces ({reason})"));
    }
    if let Some(e) = seccomp_error {
        missing.push(format!("seccomp ({e})"));
    }
    Ok(if missing.is_empty() {
        SandboxLevel::Full
    } else {
        SandboxLevel::Partial(format!("missing: {}", missing.join(", ")))
    })
}

/// The Landlock ruleset of `policy`, created (with its rules) in the parent.
/// Which of Landlock's scopes a ruleset sets. Every process that can run candidate code gets
/// all of them; the judge (which never does) may signal outside its domain, so that it can stop
/// its workers (sibling domains) between their timed calls (`kg_judge.Worker.pause`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scoping {
    All,
    Judge,
}

fn landlock_ruleset(policy: &Policy) -> Result<RulesetCreated, SandboxError> {
    landlock_ruleset_scoped(policy, Scoping::All)
}

fn landlock_ruleset_scoped(
    policy: &Policy,
    scoping: Scoping,
) -> Result<RulesetCreated, SandboxError> {
    let all = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    let file_only = AccessFs::from_file(TARGET_ABI);
    let rule = |p: &Path, access: landlock::BitFlags<AccessFs>| -> Option<PathBeneath<PathFd>> {
        let fd = PathFd::new(p).ok()?;
        // Directory rights on a file are an error: a file rule keeps the file rights only.
        let access = if p.is_dir() {
            access
        } else {
            access & file_only
        };
        Some(PathBeneath::new(fd, access))
    };
    let mut rules: Vec<PathBeneath<PathFd>> = Vec::new();
    rules.extend(policy.read_exec.iter().filter_map(|p| rule(p, read)));
    rules.extend(
        policy
            .read_files
            .iter()
            .filter_map(|p| rule(p, AccessFs::ReadFile | AccessFs::Execute)),
    );
    rules.extend(policy.read_write.iter().filter_map(|p| rule(p, all)));
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .handle_access(make_bitflags!(AccessNet::{BindTcp | ConnectTcp}))?
        .scope(match scoping {
            Scoping::All => Scope::from_all(TARGET_ABI),
            Scoping::Judge => Scope::AbstractUnixSocket.into(),
        })?
        .create()?
        .add_rules(rules.into_iter().map(Ok::<_, landlock::RulesetError>))?;
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(job: &Path, checkout: &Path) -> Policy {
        let problem = checkout.join("problem.py");
        let kernel = checkout.join("kernel.py");
        std::fs::write(&problem, "").unwrap();
        std::fs::write(&kernel, "").unwrap();
        let python = crate::find_python(Path::new("."));
        Policy::for_job(&python, &kernel, job, &[&problem, &kernel], &[])
    }

    #[test]
    fn the_job_dir_is_writable_and_the_rest_of_the_checkout_is_not_readable() {
        let job = tempfile::tempdir().unwrap();
        let checkout = tempfile::tempdir().unwrap();
        let p = policy(job.path(), checkout.path());
        let job = std::fs::canonicalize(job.path()).unwrap();
        let checkout = std::fs::canonicalize(checkout.path()).unwrap();
        assert!(p.allows_write(&job.join("work/x.o")));
        assert!(p.allows_read(&job.join("work/x.o")));
        assert!(p.allows_read(&checkout.join("kernel.py")));
        assert!(p.allows_read(&checkout.join("problem.py")));
        assert!(!p.allows_write(&checkout.join("kernel.py")));
        assert!(!p.allows_read(&checkout.join("secret.txt")));
        assert!(!p.allows_read(&checkout.join("kernel.py.bak")));
        assert!(!p.allows_read(Path::new("/root/.ssh/id_rsa")));
        assert!(!p.allows_read(Path::new("/home")));
        // The Actions runner's credentials and work directories, other jobs' temporary files.
        assert!(!p.allows_read(Path::new("/opt/actions-runner/.credentials")));
        assert!(!p.allows_read(Path::new("/opt")));
        assert!(!p.allows_read(Path::new("/tmp/another-job/secret")));
        assert!(p.allows_read(Path::new("/usr/include/stdio.h")));
        assert!(p.allows_read(Path::new("/proc/cpuinfo")));
        assert!(!p.allows_write(Path::new("/usr/lib/x.pth")));
        assert!(!p.allows_write(Path::new("/etc/passwd")));
        assert!(p.allows_write(Path::new("/dev/null")));
        assert!(p.allows_write(Path::new("/dev/shm/torch_1")));
        assert!(!p.allows_write(Path::new("/dev/sda")));
    }

    #[test]
    fn the_interpreters_site_packages_are_readable_not_writable() {
        let python = crate::find_python(Path::new("."));
        let job = tempfile::tempdir().unwrap();
        let checkout = tempfile::tempdir().unwrap();
        let p = policy(job.path(), checkout.path());
        let out = Command::new(&python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
            .unwrap();
        let site = std::fs::canonicalize(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
        assert!(p.allows_read(&site.join("torch/__init__.py")), "{p:?}");
        assert!(!p.allows_write(&site.join("evil.pth")));
    }

    #[test]
    fn levels_read_as_the_report_writes_them() {
        assert_eq!(SandboxLevel::Full.to_string(), "full");
        assert_eq!(SandboxLevel::Off.to_string(), "off");
        assert_eq!(
            SandboxLevel::Unavailable("no Landlock".into()).to_string(),
            "unavailable (no Landlock)"
        );
        assert_eq!(
            SandboxLevel::Partial("missing: x".into()).to_string(),
            "partial (missing: x)"
        );
    }

    #[test]
    fn no_landlock_is_unavailable_or_an_error_when_required() {
        let none: Result<Vec<&'static str>, String> = Err("no Landlock".into());
        let ok_ns = Ok(());
        assert_eq!(
            level_for(SandboxMode::Auto, &none, &ok_ns, None).unwrap(),
            SandboxLevel::Unavailable("no Landlock".into())
        );
        let err = level_for(SandboxMode::Required, &none, &ok_ns, None).unwrap_err();
        assert!(err.to_string().contains("no Landlock"), "{err}");
        assert_eq!(
            level_for(SandboxMode::Off, &none, &ok_ns, None).unwrap(),
            SandboxLevel::Off
        );
        let old = Ok(vec!["Landlock TCP rules (ABI 4)"]);
        let level = level_for(
            SandboxMode::Required,
            &old,
            &Err("no user namespace: EPERM".into()),
            None,
        )
        .unwrap();
        assert_eq!(
            level.to_string(),
            "partial (missing: Landlock TCP rules (ABI 4), network and PID namespaces (no user namespace: EPERM))"
        );
        assert_eq!(
            level_for(SandboxMode::Auto, &Ok(vec![]), &ok_ns, None).unwrap(),
            SandboxLevel::Full
        );
    }

    /// The machines kernelgate runs on (Linux 6.18, Landlock ABI 7, user namespaces) get
    /// every layer; a regression here would silently weaken every job.
    #[test]
    fn this_machine_supports_every_layer() {
        assert_eq!(landlock_support(), &Ok(vec![]));
        assert_eq!(namespaces_support(), &Ok(()));
    }

    #[test]
    fn the_seccomp_program_builds_for_this_machine() {
        let p = seccomp_programs().unwrap();
        assert!(p[0].len() > denied_syscalls().count());
        assert_eq!(p.len(), 2);
    }
}

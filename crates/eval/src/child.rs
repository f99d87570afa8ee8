//! The child process: an allow-listed environment, own process group (and PID namespace),
//! limits, the descriptors it may keep, and the authenticated result file.
//!
//! Nothing the child could have replaced is read back by path: its stdout and stderr are read
//! through the descriptors the CLI created them with, the result and progress files are opened
//! in the job's directory (held open since the spawn) without following a link or waiting on a
//! FIFO and only when they are regular files, and supervision polls: it never waits on a
//! descriptor, file or process the child controls.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::exec::{self, ExecPlan, ExecPlanError};
use crate::outcome::ExitInfo;
use crate::pidns::{self, InitLink, ReportPipe};
use crate::protocol::Job;
use crate::sandbox::{self, Confinement, SandboxError, SandboxLevel, SandboxMode};

/// Bytes of stdout/stderr kept in the result.
pub const TAIL_BYTES: u64 = 4096;

/// The most the CLI reads of a job's result file; a larger one is not the harness's.
const RESULT_MAX_BYTES: u64 = 64 << 20;

/// How a job's child is started and limited.
pub struct Launch<'a> {
    pub python: &'a Path,
    pub harness: &'a Path,
    pub job: Job,
    pub dir: &'a Path,
    pub compile_timeout: Duration,
    pub run_timeout: Duration,
    pub memory_limit_bytes: u64,
    /// Enforce memory with `RLIMIT_AS` (CPU) or an RSS watchdog (CUDA needs a huge address space).
    pub rlimit_as: bool,
    pub env: Vec<(String, String)>,
    pub sandbox: SandboxMode,
    /// Files the child reads besides its own directory and the system (problem, kernels).
    pub read_files: Vec<PathBuf>,
    /// Directories outside the job's own that the child writes (a shared extensions cache).
    pub write_dirs: Vec<PathBuf>,
    /// Say on stderr when the child starts compiling and running.
    pub progress: bool,
    /// The CPUs the child runs on ([`crate::JobSpec::cpus`]); `None`: those the CLI may use.
    pub cpus: Option<Vec<usize>>,
    /// Descriptors the child keeps, as 3, 4, ... in this order (a result pipe's write end);
    /// every other descriptor but 0, 1 and 2 is closed in the child. They must stay open until
    /// [`spawn`] returns; the caller then closes its own copies. At most [`exec::MAX_KEPT`].
    pub keep_fds: Vec<BorrowedFd<'a>>,
    /// The job may use the GPU: the layers not yet proven under the CUDA driver stay off
    /// ([`Confinement::prepare`]).
    pub gpu: bool,
    /// Workers the harness starts beside its judge: Landlock is then the child's own to
    /// enforce, one ruleset for the judge and one per worker ([`Confinement::defer_landlock`]),
    /// kept as descriptors after `keep_fds` and named in `KERNELGATE_LANDLOCK_FDS`. 0: the
    /// child is confined here, before its exec.
    pub judge_workers: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Exec(#[from] ExecPlanError),
}

/// What supervision saw.
pub enum Ended {
    /// The child wrote a result that carries our HMAC.
    Result(String),
    Forged,
    NoResult,
    Timeout {
        phase: String,
        limit: Duration,
    },
    MemoryKilled {
        rss_bytes: u64,
    },
}

pub struct Report {
    pub ended: Ended,
    pub exit: ExitInfo,
    /// Last phase the child announced (`setup`, `compile`, `run`); `None` when it never started.
    pub phase: Option<String>,
    pub stdout_tail: String,
    pub stderr_tail: String,
    /// Processes of this job still running outside its process group when it ended (they left
    /// with `setsid`/`setpgid`); they were killed.
    pub strays: usize,
    pub sandbox: SandboxLevel,
}

/// Variables a child's environment takes from kernelgate's by exact name, and why:
/// `PATH` (the interpreter's directory is put first), `USER`/`LOGNAME` (`getpass.getuser()`:
/// torch's and Triton's cache names), `LANG`/`LANGUAGE`/`TZ` (the locale and time zone the
/// tools print in), `LD_LIBRARY_PATH` (CUDA and MKL libraries outside the linker's defaults),
/// `CC`/`CXX`/`CUDAHOSTCXX` (the compilers torch's extension builds use), `CPATH`/
/// `C_INCLUDE_PATH`/`CPLUS_INCLUDE_PATH`/`LIBRARY_PATH` (headers and libraries of those
/// builds), `MAX_JOBS` (ninja's parallelism), `PYTHONHOME`/`PYTHONIOENCODING`/`PYTHONUTF8`/
/// `PYTHONNOUSERSITE`/`PYTHONFAULTHANDLER`/`PYTHONHASHSEED` (how the interpreter starts and
/// prints; not `PYTHONSTARTUP`, `PYTHONINSPECT`, `PYTHONBREAKPOINT`, `PYTHONUSERBASE` or
/// `PYTHONPYCACHEPREFIX`, which run or load code from elsewhere, nor `PYTHONPATH`, which the
/// launcher sets itself), `KERNELGATE_AUDIT_PROFILER` (the op audit's A/B switch).
/// `HOME`, `TMPDIR` and the caches are set to the job's directory by [`command`].
const PASSED_NAMES: &[&str] = &[
    "PATH",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "CUDAHOSTCXX",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "MAX_JOBS",
    "PYTHONHOME",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONNOUSERSITE",
    "PYTHONFAULTHANDLER",
    "PYTHONHASHSEED",
    "KERNELGATE_AUDIT_PROFILER",
];

/// Prefixes of the variables a child takes, and why: `LC_` (the locale), `CUDA_`, `NVIDIA_`,
/// `CUBLAS_`, `CUDNN_` (the CUDA toolkit and driver: `CUDA_HOME`, `CUDA_VISIBLE_DEVICES`,
/// `CUBLAS_WORKSPACE_CONFIG`), `NVCC_` (`NVCC_PREPEND_FLAGS`, `NVCC_CCBIN`), `TORCH_`,
/// `PYTORCH_`, `TORCHINDUCTOR_` (torch's settings: `TORCH_CUDA_ARCH_LIST`, `PYTORCH_NVCC`),
/// `TRITON_` (Triton's), `OMP_`, `KMP_`, `MKL_`, `OPENBLAS_` (the CPU math libraries' threads),
/// `ROCM_`, `HIP_` (the ROCm toolkit of HIP kernels).
const PASSED_PREFIXES: &[&str] = &[
    "LC_",
    "CUDA_",
    "NVIDIA_",
    "CUBLAS_",
    "CUDNN_",
    "NVCC_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "OMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "ROCM_",
    "HIP_",
];

/// Words that make a name a secret even under an allowed prefix or in [`CHILD_ENV_VAR`]
/// (`TORCH_HUB_TOKEN`, `CUDA_API_KEY`), matched against the name's `_`-separated parts.
const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "KEY",
    "KEYS",
    "APIKEY",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PAT",
    "CRED",
    "CREDS",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "COOKIE",
    "DSN",
    "JWT",
    "WEBHOOK",
    "PRIVATE",
    "SESSION",
    "SIGNATURE",
];

/// Names (comma-separated) a runner passes to its jobs' children beyond the allow-list, for a
/// toolchain variable kernelgate does not know; names that look like secrets are still dropped.
/// Set in the workflow's environment only: a pull request cannot change it.
pub const CHILD_ENV_VAR: &str = "KERNELGATE_CHILD_ENV";

/// The descriptors of the Landlock rulesets a child enforces itself ([`Launch::judge_workers`]):
/// the judge's first, then one per worker.
pub const LANDLOCK_FDS_ENV: &str = "KERNELGATE_LANDLOCK_FDS";

/// Whether a variable of kernelgate's environment passes to a child: an allow-list of names and
/// prefixes ([`PASSED_NAMES`], [`PASSED_PREFIXES`], the names in [`CHILD_ENV_VAR`]), never a
/// name with a secret's word in it. Everything else (the runner's and CI's variables, tokens,
/// DSNs, webhooks, `SSH_AUTH_SOCK`, `DBUS_SESSION_BUS_ADDRESS`, `XDG_RUNTIME_DIR`, proxies,
/// `LD_PRELOAD`) stays behind.
pub fn passes_to_child(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    if up.split('_').any(|part| SECRET_WORDS.contains(&part)) {
        return false;
    }
    PASSED_NAMES.contains(&up.as_str())
        || PASSED_PREFIXES.iter().any(|p| up.starts_with(p))
        || std::env::var(CHILD_ENV_VAR).is_ok_and(|list| list.split(',').any(|n| n.trim() == name))
}

/// A child started and confined, importing torch while it waits for its job: `pr` starts the
/// next job's process while the GPU is busy with the current one. The job (and the clock of
/// its limits) starts with [`Spawned::supervise`]; dropping it kills the process and every
/// process of its job.
pub struct Spawned {
    child: Option<std::process::Child>,
    pgid: i32,
    /// The job's PID namespace (every process of the job dies with its init); `None` where the
    /// sandbox has no user namespace to make one in.
    init: Option<InitLink>,
    key: [u8; 32],
    job: Job,
    /// The job's directory, held open: its files are opened relative to it.
    dir: OwnedFd,
    /// The files the CLI gave the child as stdout and stderr, read through these descriptors.
    stdout: File,
    stderr: File,
    compile_timeout: Duration,
    run_timeout: Duration,
    memory_limit_bytes: u64,
    rlimit_as: bool,
    level: SandboxLevel,
    progress: bool,
}

/// How long the CLI gives a job's launcher to reap its killed init (the kernel first kills
/// every process of the namespace) before it kills the launcher too.
const TEARDOWN_GRACE: Duration = Duration::from_secs(2);

/// Starts the child process, confined and limited, without its job.
pub fn spawn(launch: Launch<'_>) -> Result<Spawned, LaunchError> {
    let dir = launch.dir;
    prepare_dir(dir, Some(launch.harness))?;
    let result_path = dir.join("result.json");
    let progress_path = dir.join("progress");
    let (stdout_w, stdout) = capture_file(&dir.join("stdout.txt"))?;
    let (stderr_w, stderr) = capture_file(&dir.join("stderr.txt"))?;
    let dir_fd = open_dir(dir)?;

    let mut job = launch.job;
    job.result_path = result_path.display().to_string();
    job.progress_path = progress_path.display().to_string();

    let key: [u8; 32] = rand::random();
    let mut cmd = command(&Limits {
        python: launch.python,
        dir,
        memory_limit_bytes: launch.memory_limit_bytes,
        rlimit_as: launch.rlimit_as,
        cpus: launch.cpus.as_deref(),
    });
    cmd.arg("-c")
        .arg("import kernelgate_harness as h; h.main()")
        .stdin(Stdio::piped())
        .stdout(stdout_w)
        .stderr(stderr_w);
    for (k, v) in &launch.env {
        cmd.env(k, v);
    }
    let read_files: Vec<&Path> = launch.read_files.iter().map(PathBuf::as_path).collect();
    let write_dirs: Vec<&Path> = launch.write_dirs.iter().map(PathBuf::as_path).collect();
    let policy =
        sandbox::Policy::for_job(launch.python, launch.harness, dir, &read_files, &write_dirs);
    let mut confinement = Confinement::prepare(launch.sandbox, &policy, launch.gpu)?;
    let level = confinement.level().clone();
    let rulesets = if launch.judge_workers > 0 {
        confinement.defer_landlock(&policy, launch.judge_workers)?
    } else {
        Vec::new()
    };
    if !rulesets.is_empty() {
        let first = 3 + launch.keep_fds.len();
        let fds: Vec<String> = (first..first + rulesets.len())
            .map(|n| n.to_string())
            .collect();
        cmd.env(LANDLOCK_FDS_ENV, fds.join(","));
    }
    // The runner's audit hook reports against the same lists the kernel enforces.
    job.sandbox = Some(policy.grant(&level));
    let keep: Vec<RawFd> = launch
        .keep_fds
        .iter()
        .map(|fd| fd.as_raw_fd())
        .chain(rulesets.iter().map(|fd| fd.as_raw_fd()))
        .collect();
    let (child, init) = spawn_confined(cmd, confinement, &keep)?;
    drop(rulesets);
    let pgid = child.id() as i32;
    Ok(Spawned {
        child: Some(child),
        pgid,
        init,
        key,
        job,
        dir: dir_fd,
        stdout,
        stderr,
        compile_timeout: launch.compile_timeout,
        run_timeout: launch.run_timeout,
        memory_limit_bytes: launch.memory_limit_bytes,
        rlimit_as: launch.rlimit_as,
        level,
        progress: launch.progress,
    })
}

/// Starts `cmd` (made by [`command`]) confined: `confinement`'s namespaces, its own PID
/// namespace when it has a user namespace to make one in ([`pidns`]), Landlock and seccomp,
/// then the exec keeping `keep` as 3, 4, ... Returns the launcher (the process group's leader)
/// and, with a PID namespace, the link to its init.
fn spawn_confined(
    mut cmd: Command,
    confinement: Confinement,
    keep: &[RawFd],
) -> Result<(std::process::Child, Option<InitLink>), LaunchError> {
    let plan = ExecPlan::new(&cmd, keep)?;
    let report = confinement
        .pid_namespace()
        .then(ReportPipe::new)
        .transpose()?;
    let (report_w, report_r) = report
        .as_ref()
        .map_or((-1, -1), |r| (r.write.as_raw_fd(), r.read.as_raw_fd()));
    let first_free = exec::first_free_fd(keep.len());
    // SAFETY: system calls only between fork and exec (unshare, fork, open/write/close, prctl,
    // landlock, seccomp, fcntl/dup2, execve); everything was allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            confinement.enter_namespaces()?;
            let watch = if report_w >= 0 {
                Some(pidns::fork_init(report_w, report_r, first_free)?)
            } else {
                None
            };
            let failed = |e: std::io::Error| {
                if let Some(w) = &watch {
                    w.failed();
                }
                e
            };
            confinement.restrict().map_err(failed)?;
            Err(failed(plan.exec()))
        });
    }
    if report.is_none() {
        // No PID namespace: what leaves the group is found as an orphan re-parented here.
        become_subreaper();
    }
    // Held across the spawn: a concurrent job's sweep must not see this group before it is live.
    let mut live = LIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    let child = cmd.spawn()?;
    live.push(child.id() as i32);
    drop(live);
    let init = report.map(|ReportPipe { read, write }| {
        drop(write);
        InitLink::new(read)
    });
    Ok((child, init))
}

/// A new file for a captured stream: the end the child writes, and the CLI's own read-only
/// descriptor of the same file (opened before the child exists), which [`tail_of`] reads.
fn capture_file(path: &Path) -> std::io::Result<(File, File)> {
    let w = File::create(path)?;
    let r = File::open(path)?;
    Ok((w, r))
}

/// The job's directory as a descriptor its files are opened relative to.
fn open_dir(dir: &Path) -> std::io::Result<OwnedFd> {
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: open on a NUL-terminated path; the descriptor is owned by the OwnedFd.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just opened, owned here alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A file of the job's directory as the CLI reads it back.
#[derive(Debug, PartialEq, Eq)]
enum JobFile {
    Missing,
    /// A link, a FIFO, a device or a directory: something the child put there.
    NotRegular,
    TooLarge,
    Bytes(Vec<u8>),
}

/// Reads `name` in the job's directory `dir` without following a link or waiting on a FIFO,
/// when it is a regular file of at most `max` bytes.
fn read_job_file(dir: &OwnedFd, name: &str, max: u64) -> JobFile {
    let Ok(c) = CString::new(name) else {
        return JobFile::Missing;
    };
    // SAFETY: openat on our directory descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ELOOP) => JobFile::NotRegular,
            _ => JobFile::Missing,
        };
    }
    // SAFETY: just opened, owned here alone.
    let file = unsafe { File::from_raw_fd(fd) };
    let Ok(meta) = file.metadata() else {
        return JobFile::Missing;
    };
    if !meta.file_type().is_file() {
        return JobFile::NotRegular;
    }
    if meta.len() > max {
        return JobFile::TooLarge;
    }
    let mut bytes = Vec::new();
    match file.take(max + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 > max => JobFile::TooLarge,
        Ok(_) => JobFile::Bytes(bytes),
        Err(_) => JobFile::Missing,
    }
}

/// What every child of the harness shares, candidate job or trusted script.
struct Limits<'a> {
    python: &'a Path,
    /// The child's own directory: `py/` (the extension), `work/` (cwd, TMPDIR), caches.
    dir: &'a Path,
    memory_limit_bytes: u64,
    rlimit_as: bool,
    /// CPU affinity; torch, OpenMP and MKL get as many threads.
    cpus: Option<&'a [usize]>,
}

/// `dir/py` holding the harness extension, and `dir/work`.
fn prepare_dir(dir: &Path, harness: Option<&Path>) -> std::io::Result<()> {
    let pydir = dir.join("py");
    std::fs::create_dir_all(&pydir)?;
    std::fs::create_dir_all(dir.join("work"))?;
    match harness {
        Some(h) => std::os::unix::fs::symlink(h, pydir.join("kernelgate_harness.abi3.so")),
        None => Ok(()),
    }
}

/// The child's command: an allow-listed environment ([`passes_to_child`]), the extension on
/// `PYTHONPATH`, `HOME` and caches in its directory, its own process group, the memory limit,
/// death with the CLI, and no descriptor but 0, 1 and 2 past its exec.
fn command(l: &Limits<'_>) -> Command {
    let (dir, work) = (l.dir, l.dir.join("work"));
    let mut cmd = Command::new(l.python);
    cmd.current_dir(&work).env_clear().process_group(0);
    let inherited_pythonpath = std::env::var("PYTHONPATH").unwrap_or_default();
    for (k, v) in std::env::vars() {
        if passes_to_child(&k) {
            cmd.env(k, v);
        }
    }
    let pydir = dir.join("py");
    let pythonpath = if inherited_pythonpath.is_empty() {
        pydir.display().to_string()
    } else {
        format!("{}:{inherited_pythonpath}", pydir.display())
    };
    // Tools installed beside the interpreter (ninja in a venv) must be found, as if activated.
    if let Some(bin) = l.python.parent().filter(|d| !d.as_os_str().is_empty()) {
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", bin.display()));
    }
    cmd.env("PYTHONPATH", pythonpath)
        // What reads `~` (a cache, a config file) finds the job's own directory.
        .env("HOME", dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .env("TMPDIR", &work)
        .env("TRITON_CACHE_DIR", dir.join("triton"))
        // Every cache a compiler or driver keeps lands in the job's directory, the one place the
        // sandbox lets the child write.
        .env("TRITON_HOME", dir)
        .env("CUDA_CACHE_PATH", dir.join("cuda_cache"))
        .env("XDG_CACHE_HOME", dir.join("cache"));
    // The set is made here: nothing allocates between fork and exec.
    let affinity = l.cpus.map(|cpus| {
        let threads = cpus.len().max(1).to_string();
        for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"] {
            cmd.env(var, &threads);
        }
        cpu_set(cpus)
    });
    let (limit, rlimit_as) = (l.memory_limit_bytes, l.rlimit_as);
    // SAFETY: only async-signal-safe calls (setrlimit, sched_setaffinity, prctl, fcntl,
    // close_range) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Nothing of kernelgate's but 0, 1 and 2 survives the exec: not a descriptor it
            // inherited from its own parent, nor another job's (a job's exec step keeps its own).
            exec::close_on_exec_from(3);
            if let Some(set) = &affinity {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if rlimit_as && limit > 0 {
                let r = libc::rlimit {
                    rlim_cur: limit as libc::rlim_t,
                    rlim_max: limit as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // Die with the CLI: no orphaned GPU jobs.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd
}

/// `cpus` as the kernel's CPU set (CPUs past the set's size, 1024, are left out).
fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bit array; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu < libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is within the set (checked above).
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
    }
    set
}

/// The CPUs this process may run on, in order (what the child's sets are cut from); `None`
/// when the kernel does not say.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: sched_getaffinity fills the zeroed set it is given.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if ok != 0 {
        return None;
    }
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is within the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    (!cpus.is_empty()).then_some(cpus)
}

/// A trusted script of the harness extension (the repository's own references, never a
/// candidate): started like a job, in its own process group under the memory limit, with one
/// wall-clock limit. Its stderr is the user's (progress); its stdout is kept for errors.
pub struct Script<'a> {
    pub python: &'a Path,
    /// The harness extension, put on the script's `PYTHONPATH`; `None` when it needs none.
    pub harness: Option<&'a Path>,
    /// Python source run with `-c`; `args` follow it in `sys.argv`.
    pub code: &'a str,
    pub args: Vec<std::ffi::OsString>,
    pub dir: &'a Path,
    /// The wall-clock limit of `run_script`; a streamed script's caller times each step.
    pub limit: Duration,
    pub memory_limit_bytes: u64,
    /// Enforce memory with `RLIMIT_AS` (CPU) or an RSS watchdog (CUDA needs a huge address space).
    pub rlimit_as: bool,
    /// Set on top of the allow-listed environment (`CUDA_VISIBLE_DEVICES=""` to keep it off the GPU).
    pub env: Vec<(&'a str, &'a str)>,
}

/// How a [`Script`] ended.
#[derive(Debug)]
pub enum ScriptEnd {
    Exited {
        status: std::process::ExitStatus,
        stdout_tail: String,
    },
    TimedOut,
    MemoryKilled {
        rss_bytes: u64,
    },
}

/// Runs a [`Script`] to its end; the process group goes with it whatever happens.
pub fn run_script(script: Script<'_>) -> Result<ScriptEnd, LaunchError> {
    let stdout_path = script.dir.join("stdout.txt");
    let mut cmd = script_command(&script)?;
    cmd.stdout(File::create(&stdout_path)?)
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn()?;
    let pgid = child.id() as i32;
    let started = Instant::now();
    let limit = script.memory_limit_bytes;
    let ended = loop {
        if let Some(status) = child.try_wait()? {
            break ScriptEnd::Exited {
                status,
                stdout_tail: tail(&stdout_path),
            };
        }
        if started.elapsed() > script.limit {
            break ScriptEnd::TimedOut;
        }
        if !script.rlimit_as && limit > 0 {
            let rss = group_rss_bytes(pgid);
            if rss > limit {
                break ScriptEnd::MemoryKilled { rss_bytes: rss };
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    kill_group(pgid);
    let _ = child.wait();
    Ok(ended)
}

/// The command of a [`Script`]: the job's launcher, its directory prepared, stdin closed.
fn script_command(script: &Script<'_>) -> Result<Command, LaunchError> {
    prepare_dir(script.dir, script.harness)?;
    let mut cmd = command(&Limits {
        python: script.python,
        dir: script.dir,
        memory_limit_bytes: script.memory_limit_bytes,
        rlimit_as: script.rlimit_as,
        cpus: None,
    });
    cmd.env("TORCHINDUCTOR_CACHE_DIR", script.dir.join("inductor"))
        .envs(script.env.iter().copied())
        .arg("-c")
        .arg(script.code)
        .args(&script.args)
        .stdin(Stdio::null());
    Ok(cmd)
}

/// A [`Script`] whose stdout is read line by line while it runs, for callers that give each
/// step its own limit (`kernelgate problems --check`). Its process group is killed when it is
/// finished or dropped; `Script::limit` is not enforced here: the caller's `recv_timeout` is.
pub struct StreamingScript {
    child: std::process::Child,
    pgid: i32,
    /// Each line the script prints on stdout; disconnected when stdout closes.
    pub lines: std::sync::mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

/// Starts a [`Script`] with its stdout streamed ([`StreamingScript::lines`]) and its stderr kept.
pub fn spawn_streaming(script: Script<'_>) -> Result<StreamingScript, LaunchError> {
    use std::io::BufRead;
    let mut cmd = script_command(&script)?;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let pgid = child.id() as i32;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    Ok(StreamingScript {
        child,
        pgid,
        lines,
        stderr: Some(stderr),
    })
}

impl StreamingScript {
    /// Kills the script's process group and returns how it ended and its stderr.
    pub fn finish(mut self) -> (Option<std::process::ExitStatus>, String) {
        let status = self.end();
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        (status, stderr)
    }

    /// Kills the group once: a reaped group's id may be reused.
    fn end(&mut self) -> Option<std::process::ExitStatus> {
        if self.pgid > 0 {
            kill_group(self.pgid);
            self.pgid = 0;
        }
        self.child.wait().ok()
    }
}

impl Drop for StreamingScript {
    fn drop(&mut self) {
        self.end();
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // Never supervised (its turn never came): the process and every process of its job go.
        if let Some(mut child) = self.child.take() {
            let _ = end_job(&mut child, self.pgid, self.init.as_mut());
            forget_group(self.pgid);
        }
    }
}

impl Spawned {
    /// Hands the child its job and supervises it: limits per phase, memory, the result's HMAC,
    /// and what the job left running.
    pub fn supervise(mut self) -> Result<Report, LaunchError> {
        let mut child = self.child.take().expect("supervised once");
        let pgid = self.pgid;
        let (compile_timeout, run_timeout) = (self.compile_timeout, self.run_timeout);
        let (limit, rlimit_as) = (self.memory_limit_bytes, self.rlimit_as);
        self.job.spawn_unix = Some(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        );
        {
            let mut stdin = child.stdin.take().expect("stdin is piped");
            let mut msg = hex::encode(self.key);
            msg.push('\n');
            msg.push_str(&serde_json::to_string(&self.job).expect("a job serialises"));
            // On a thread of its own: a child that never reads its stdin must not hold the
            // limits' clock. A child that died closes the pipe (the write fails, the thread
            // ends); that is reported from its exit status.
            std::thread::spawn(move || {
                let _ = stdin.write_all(msg.as_bytes());
            });
        }

        let mut phase: Option<String> = None;
        let mut compile_spent = Duration::ZERO;
        let mut run_spent = Duration::ZERO;
        let mut last = Instant::now();
        let mut last_rss_check = Instant::now();
        let mut ended: Option<Ended> = None;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if let Some(init) = &mut self.init {
                init.poll();
                if init.ended.is_some() {
                    // The interpreter ended; its init waits for the count below.
                    break None;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
            let now = Instant::now();
            let dt = now - last;
            last = now;
            if let JobFile::Bytes(p) = read_job_file(&self.dir, "progress", 64) {
                let p = String::from_utf8_lossy(&p).trim().to_string();
                if self.progress && phase.as_deref() != Some(p.as_str()) {
                    match p.as_str() {
                        "compile" => eprintln!("  importing the kernel (compiling its extension can take a minute)..."),
                        "run" if phase.as_deref() == Some("compile") => eprintln!("  running the kernel: correctness trials, then timing and the op audit when asked..."),
                        _ => {}
                    }
                }
                phase = Some(p);
            }
            if phase.as_deref() == Some("compile") {
                compile_spent += dt;
            } else {
                run_spent += dt;
            }
            if compile_spent > compile_timeout {
                ended = Some(Ended::Timeout {
                    phase: "compile".into(),
                    limit: compile_timeout,
                });
            } else if run_spent > run_timeout {
                ended = Some(Ended::Timeout {
                    phase: "run".into(),
                    limit: run_timeout,
                });
            } else if !rlimit_as && limit > 0 && now - last_rss_check > Duration::from_millis(100) {
                last_rss_check = now;
                let rss = match &mut self.init {
                    Some(init) => namespace_rss_bytes(init),
                    None => group_rss_bytes(pgid),
                };
                if rss > limit {
                    ended = Some(Ended::MemoryKilled { rss_bytes: rss });
                }
            }
            if ended.is_some() {
                break None;
            }
        };
        // What the job left running outside its group (with a PID namespace, counted before
        // its init is killed, which kills them); then everything goes.
        let mut strays = match &mut self.init {
            Some(init) => count_strays(init, pgid),
            None => 0,
        };
        let own = end_job(&mut child, pgid, self.init.as_mut())?;
        forget_group(pgid);
        if self.init.is_none() {
            strays = kill_strays(pgid);
        }
        let status = status.unwrap_or(own);
        let exit = match self.init.as_ref().and_then(|i| i.ended) {
            // How the interpreter itself ended, as its init saw it.
            Some(raw) => ExitInfo {
                code: libc::WIFEXITED(raw).then(|| libc::WEXITSTATUS(raw)),
                signal: libc::WIFSIGNALED(raw).then(|| libc::WTERMSIG(raw)),
            },
            None => ExitInfo {
                code: status.code(),
                signal: status.signal(),
            },
        };
        let ended = match ended {
            Some(e) => e,
            None => read_result(&self.dir, &self.key),
        };
        Ok(Report {
            ended,
            exit,
            phase,
            stdout_tail: tail_of(&self.stdout),
            stderr_tail: tail_of(&self.stderr),
            strays,
            sandbox: self.level.clone(),
        })
    }
}

/// Kills every process of a job and reaps its launcher: the init first (the kernel kills the
/// namespace with it, and the launcher reaps it within [`TEARDOWN_GRACE`]), then the group.
/// Returns how the launcher ended.
fn end_job(
    child: &mut std::process::Child,
    pgid: i32,
    init: Option<&mut InitLink>,
) -> std::io::Result<std::process::ExitStatus> {
    if let Some(init) = init {
        init.kill(child, TEARDOWN_GRACE);
    }
    kill_group(pgid);
    child.wait()
}

fn forget_group(pgid: i32) {
    LIVE_GROUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|g| *g != pgid);
}

/// Process groups of the jobs running now (`pr` runs one job per GPU at once): their members
/// are not strays of another job (without a PID namespace).
static LIVE_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Makes this process the subreaper of what it spawns, for jobs without a PID namespace: a
/// candidate's process that leaves its group (`setsid`) and is orphaned is re-parented here
/// instead of to init, so the sweep after the job finds it.
fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: prctl with integer arguments only.
    ONCE.call_once(|| unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    });
}

/// One line of `/proc/<pid>/stat`: state, parent and process group.
fn proc_stat(pid: i32) -> Option<(char, i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

/// The processes of the job's namespace still running outside its process group (they left it
/// with `setsid`/`setpgid`): what the job would have left behind.
fn count_strays(init: &mut InitLink, job_pgid: i32) -> usize {
    init.poll();
    init.members()
        .into_iter()
        .filter(|&pid| matches!(proc_stat(pid), Some((state, _, pgrp)) if state != 'Z' && pgrp != job_pgid))
        .count()
}

/// Without a PID namespace: kills and reaps the orphans re-parented to us (the subreaper) from
/// a group that is neither ours nor a running job's, after the job's group was killed. Returns
/// how many were still running outside the job's group (zombies do not count). No variable or
/// other mark a process could set decides what is killed.
fn kill_strays(job_pgid: i32) -> usize {
    // SAFETY: getpid/getpgrp have no memory effects.
    let (me, my_pgid) = unsafe { (libc::getpid(), libc::getpgrp()) };
    let mut escaped = std::collections::HashSet::new();
    for _round in 0..100 {
        let live = LIVE_GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut found = false;
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Some((state, ppid, pgrp)) = proc_stat(pid) else {
                continue;
            };
            if ppid != me || pgrp == my_pgid || live.contains(&pgrp) || pid == me {
                continue;
            }
            found = true;
            if state != 'Z' && pgrp != job_pgid {
                escaped.insert(pid);
            }
            // SAFETY: signalling and reaping our own child; ESRCH/ECHILD are fine.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
        if !found {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    escaped.len()
}

fn kill_group(pgid: i32) {
    // SAFETY: signalling our own child's process group; ESRCH (already gone) is fine.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// `VmRSS` of a process, in bytes.
fn rss_bytes(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Resident memory of every process of the job's namespace (the interpreter and everything it
/// started, in its group or not), the init aside (a copy of the CLI).
fn namespace_rss_bytes(init: &mut InitLink) -> u64 {
    init.members().into_iter().map(rss_bytes).sum()
}

/// Resident memory of every process in the group (the Python child and what it spawned).
fn group_rss_bytes(pgid: i32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: getpgid has no memory effects.
        if unsafe { libc::getpgid(pid) } != pgid {
            continue;
        }
        total += rss_bytes(pid);
    }
    total
}

/// The job's result: `result.json` in its directory, read as [`read_job_file`] reads, with our
/// HMAC. Anything but a regular file there is forged.
fn read_result(dir: &OwnedFd, key: &[u8]) -> Ended {
    let bytes = match read_job_file(dir, "result.json", RESULT_MAX_BYTES) {
        JobFile::Bytes(b) => b,
        JobFile::Missing => return Ended::NoResult,
        JobFile::NotRegular | JobFile::TooLarge => return Ended::Forged,
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Ended::Forged;
    };
    verify_result(&text, key)
}

fn verify_result(text: &str, key: &[u8]) -> Ended {
    let Some((tag, payload)) = text.split_once('\n') else {
        return Ended::Forged;
    };
    let Ok(tag) = hex::decode(tag.trim()) else {
        return Ended::Forged;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return Ended::Forged;
    };
    mac.update(payload.as_bytes());
    match mac.verify_slice(&tag) {
        Ok(()) => Ended::Result(payload.to_string()),
        Err(_) => Ended::Forged,
    }
}

/// The last [`TAIL_BYTES`] of a captured stream, read through the descriptor the CLI created
/// it with (the child may have replaced the file's name), lossily decoded.
fn tail_of(f: &File) -> String {
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(TAIL_BYTES);
    let mut buf = vec![0u8; (len - start) as usize];
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], start + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    with_ellipsis(&buf, start > 0)
}

fn with_ellipsis(buf: &[u8], cut: bool) -> String {
    let s = String::from_utf8_lossy(buf).into_owned();
    if cut {
        format!("...{s}")
    } else {
        s
    }
}

/// The last [`TAIL_BYTES`] of a trusted script's captured stream, lossily decoded.
pub fn tail(path: &PathBuf) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(TAIL_BYTES);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    with_ellipsis(&buf, start > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_given_cpus_runs_on_them_with_as_many_threads() {
        let allowed = allowed_cpus().expect("this process's CPU set");
        // The last allowed CPU alone (a lane of one), and the whole set.
        for cpus in [vec![*allowed.last().unwrap()], allowed.clone()] {
            let dir = tempfile::tempdir().unwrap();
            prepare_dir(dir.path(), None).unwrap();
            let mut cmd = command(&Limits {
                python: Path::new("python3"),
                dir: dir.path(),
                memory_limit_bytes: 0,
                rlimit_as: false,
                cpus: Some(&cpus),
            });
            let out = cmd
                .arg("-c")
                .arg("import os; print(sorted(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])")
                .output()
                .expect("python3 runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let n = cpus.len();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                format!("{cpus:?} {n} {n}")
            );
        }
        // No set: the child keeps the CLI's CPUs and the environment's thread settings.
        let dir = tempfile::tempdir().unwrap();
        prepare_dir(dir.path(), None).unwrap();
        let out = command(&Limits {
            python: Path::new("python3"),
            dir: dir.path(),
            memory_limit_bytes: 0,
            rlimit_as: false,
            cpus: None,
        })
        .arg("-c")
        .arg("import os; print(sorted(os.sched_getaffinity(0)))")
        .output()
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{allowed:?}")
        );
    }

    /// The process whose pid the script wrote to `pid_file` is gone (or a zombie).
    fn assert_background_process_gone(pid_file: &Path) {
        let bg: i32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let state = proc_stat(bg).map(|(s, _, _)| s);
        assert!(
            matches!(state, None | Some('Z')),
            "background process {bg} survived: {state:?}"
        );
    }

    fn script<'a>(dir: &'a Path, code: &'a str, limit: Duration, memory: u64) -> Script<'a> {
        Script {
            python: Path::new("/bin/sh"),
            harness: Some(Path::new("/bin/true")),
            code,
            args: vec!["sh".into()],
            dir,
            limit,
            memory_limit_bytes: memory,
            rlimit_as: false,
            env: Vec::new(),
        }
    }

    #[test]
    fn a_script_runs_in_its_own_group_under_the_limits_of_a_job() {
        let dir = tempfile::tempdir().unwrap();
        // Exits: status and stdout come back; the extension is on PYTHONPATH, in the job's layout.
        let code = "echo \"$PYTHONPATH|$TMPDIR\"; exit 3";
        let ended = run_script(script(dir.path(), code, Duration::from_secs(30), 0)).unwrap();
        let ScriptEnd::Exited {
            status,
            stdout_tail,
        } = ended
        else {
            panic!("{ended:?}")
        };
        assert_eq!(status.code(), Some(3));
        assert!(stdout_tail.contains("/py|"), "{stdout_tail}");
        assert!(stdout_tail.trim_end().ends_with("/work"), "{stdout_tail}");
        // Past the limit: stopped, with what it started in the background.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("bg.pid");
        let code = format!("sleep 60 & echo $! > {}; wait", pid_file.display());
        let ended = run_script(script(dir.path(), &code, Duration::from_millis(500), 0)).unwrap();
        assert!(matches!(ended, ScriptEnd::TimedOut), "{ended:?}");
        assert_background_process_gone(&pid_file);
    }

    #[test]
    fn a_streamed_script_gives_its_lines_as_printed_and_its_group_dies_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("bg.pid");
        let code = format!(
            "echo \"first $KG_TEST_VAR\"; echo oops >&2; \
             sleep 60 & echo $! > {}; echo second; wait",
            pid_file.display()
        );
        let mut s = script(dir.path(), &code, Duration::from_secs(30), 0);
        s.harness = None;
        s.env = vec![("KG_TEST_VAR", "set")];
        let streamed = spawn_streaming(s).unwrap();
        let first = streamed
            .lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap();
        assert_eq!(first, "first set", "the script's extra variable is set");
        let second = streamed
            .lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap();
        assert_eq!(second, "second");
        // Still running (the background sleep): finishing kills the whole group.
        let (status, stderr) = streamed.finish();
        assert!(status.is_some_and(|s| !s.success()), "{status:?}");
        assert_eq!(stderr.trim(), "oops");
        assert_background_process_gone(&pid_file);
        assert!(
            !dir.path().join("py/kernelgate_harness.abi3.so").exists(),
            "no harness asked for, none linked"
        );
    }

    #[test]
    fn a_script_over_its_memory_limit_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        // The shell and its sleep hold a few MiB: a 1 MiB limit is exceeded at once.
        let ended = run_script(script(
            dir.path(),
            "sleep 30",
            Duration::from_secs(20),
            1 << 20,
        ))
        .unwrap();
        assert!(matches!(ended, ScriptEnd::MemoryKilled { .. }), "{ended:?}");
    }

    #[test]
    fn sandbox_environment_is_an_allow_list() {
        for v in [
            "GITHUB_TOKEN",
            "GITHUB_WORKSPACE",
            "ACTIONS_RUNTIME_TOKEN",
            "RUNNER_TEMP",
            "AWS_SECRET_ACCESS_KEY",
            "HF_TOKEN",
            "my_password",
            "NPM_AUTH",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "PYTHONBREAKPOINT",
            // Secrets named in none of the words a deny-list knew.
            "DEPLOY_PAT",
            "SENTRY_DSN",
            "API_JWT",
            "SLACK_WEBHOOK_URL",
            "AWS_CREDS",
            "DB_PASS",
            // Under an allowed prefix, still a secret.
            "TORCH_HUB_TOKEN",
            "CUDA_API_KEY",
            // Sockets and preloads of the runner's session.
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
            "XDG_RUNTIME_DIR",
            "LD_PRELOAD",
            "HTTPS_PROXY",
            "HOME",
        ] {
            assert!(!passes_to_child(v), "{v} must stay behind");
        }
        for v in [
            "PATH",
            "LANG",
            "LC_ALL",
            "TZ",
            "CUDA_HOME",
            "CUDA_PATH",
            "LD_LIBRARY_PATH",
            "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES",
            "TORCH_CUDA_ARCH_LIST",
            "PYTORCH_NVCC",
            "TRITON_CACHE_DIR",
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "CXX",
            "MAX_JOBS",
            "KERNELGATE_AUDIT_PROFILER",
        ] {
            assert!(passes_to_child(v), "{v} must pass");
        }
    }

    #[test]
    fn sandbox_child_environment_holds_only_the_allow_list_and_home_is_the_job() {
        let dir = tempfile::tempdir().unwrap();
        prepare_dir(dir.path(), None).unwrap();
        // This process's own environment stands in for the runner's: a name the deny-list
        // missed must not reach the child.
        std::env::set_var("KG_UNIT_DEPLOY_PAT", "pat-123");
        let out = command(&Limits {
            python: Path::new("/bin/sh"),
            dir: dir.path(),
            memory_limit_bytes: 0,
            rlimit_as: false,
            cpus: None,
        })
        .arg("-c")
        .arg("env")
        .output()
        .unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        assert!(!env.contains("pat-123"), "{env}");
        assert!(
            env.lines()
                .any(|l| l == format!("HOME={}", dir.path().display())),
            "{env}"
        );
        for line in env.lines() {
            let name = line.split('=').next().unwrap();
            let ours = [
                "HOME",
                "PYTHONPATH",
                "PYTHONDONTWRITEBYTECODE",
                "PYTHONUNBUFFERED",
                "TMPDIR",
                "XDG_CACHE_HOME",
                "PWD",
                "SHLVL",
                "_",
            ];
            assert!(
                passes_to_child(name) || ours.contains(&name),
                "{name} reached the child"
            );
        }
    }

    #[test]
    fn sandbox_job_files_are_read_without_following_links_or_waiting_on_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "outside-secret").unwrap();
        std::fs::write(dir.path().join("plain"), "run").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
        let fifo = CString::new(dir.path().join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("big"), vec![b'x'; 100]).unwrap();
        let fd = open_dir(dir.path()).unwrap();
        assert_eq!(
            read_job_file(&fd, "plain", 64),
            JobFile::Bytes(b"run".to_vec())
        );
        assert_eq!(read_job_file(&fd, "link", 64), JobFile::NotRegular);
        // A FIFO with no writer: a blocking open would wait forever.
        let t = Instant::now();
        assert_eq!(read_job_file(&fd, "fifo", 64), JobFile::NotRegular);
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(read_job_file(&fd, "sub", 64), JobFile::NotRegular);
        assert_eq!(read_job_file(&fd, "big", 64), JobFile::TooLarge);
        assert_eq!(read_job_file(&fd, "none", 64), JobFile::Missing);
        assert_eq!(read_job_file(&fd, "../escape", 64), JobFile::Missing);
    }

    #[test]
    fn sandbox_stream_tails_come_from_the_descriptor_not_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout.txt");
        let (mut w, f) = capture_file(&path).unwrap();
        w.write_all(b"the child's own output").unwrap();
        // The child replaces the name with a link to a secret: the tail is still its output.
        std::fs::write(dir.path().join("secret"), "outside-secret").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), &path).unwrap();
        assert_eq!(tail_of(&f), "the child's own output");
    }

    #[test]
    fn sandbox_result_needs_the_right_key_and_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path()).unwrap();
        let p = dir.path().join("result.json");
        let key = [7u8; 32];
        let payload = r#"{"outcome":{"kind":"passed"}}"#;
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(payload.as_bytes());
        let tag = hex::encode(mac.finalize().into_bytes());
        assert!(matches!(read_result(&fd, &key), Ended::NoResult));
        std::fs::write(&p, format!("{tag}\n{payload}")).unwrap();
        assert!(matches!(read_result(&fd, &key), Ended::Result(s) if s == payload));
        assert!(matches!(read_result(&fd, &[8u8; 32]), Ended::Forged));
        std::fs::write(&p, format!("{tag}\n{payload} ")).unwrap();
        assert!(matches!(read_result(&fd, &key), Ended::Forged));
        // A signed result elsewhere, linked in its place, is not read.
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::write(&elsewhere, format!("{tag}\n{payload}")).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &p).unwrap();
        assert!(matches!(read_result(&fd, &key), Ended::Forged));
    }

    /// `code` run by the test's Python in `dir`, confined as a job is (sandbox required, its
    /// own PID namespace), keeping `keep`; stdout in `dir/out`.
    fn confined(dir: &Path, code: &str, keep: &[RawFd]) -> (std::process::Child, InitLink) {
        let python = crate::find_python(Path::new("."));
        prepare_dir(dir, None).unwrap();
        let mut cmd = command(&Limits {
            python: &python,
            dir,
            memory_limit_bytes: 0,
            rlimit_as: false,
            cpus: None,
        });
        cmd.arg("-c")
            .arg(code)
            .stdin(Stdio::null())
            .stdout(File::create(dir.join("out")).unwrap())
            .stderr(File::create(dir.join("err")).unwrap());
        let policy = sandbox::Policy::for_job(&python, Path::new("/bin/true"), dir, &[], &[]);
        let confinement = Confinement::prepare(SandboxMode::Required, &policy, false).unwrap();
        assert!(confinement.pid_namespace());
        let (child, init) = spawn_confined(cmd, confinement, keep).unwrap();
        (child, init.expect("a PID namespace"))
    }

    /// Waits for the interpreter's end as its init reports it (raw wait status).
    fn ended(init: &mut InitLink) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            init.poll();
            if let Some(raw) = init.ended {
                return raw;
            }
            assert!(Instant::now() < deadline, "the job never ended");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn output(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("out")).unwrap_or_default()
            + &std::fs::read_to_string(dir.join("err")).unwrap_or_default()
    }

    #[test]
    fn sandbox_every_process_of_a_job_dies_with_it_whatever_it_calls_itself() {
        let dir = tempfile::tempdir().unwrap();
        // A double-forked daemon in a session of its own, with a made-up job tag.
        let code = r#"
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.environ["KERNELGATE_JOB"] = "0123456789abcdef"
        with open("daemon.tmp", "w") as f:
            f.write(os.readlink("/proc/self"))
        os.rename("daemon.tmp", "daemon.pid")
        time.sleep(60)
        open("still-alive", "w").close()
    os._exit(0)
os.waitpid(pid, 0)
while not os.path.exists("daemon.pid"):
    time.sleep(0.01)
"#;
        let (mut child, mut init) = confined(dir.path(), code, &[]);
        let pgid = child.id() as i32;
        let raw = ended(&mut init);
        assert!(
            libc::WIFEXITED(raw) && libc::WEXITSTATUS(raw) == 0,
            "{}",
            output(dir.path())
        );
        assert_eq!(
            count_strays(&mut init, pgid),
            1,
            "the daemon left the job's group"
        );
        end_job(&mut child, pgid, Some(&mut init)).unwrap();
        forget_group(pgid);
        let daemon: i32 = std::fs::read_to_string(dir.path().join("work/daemon.pid"))
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            matches!(proc_stat(daemon).map(|(s, _, _)| s), None | Some('Z')),
            "the daemon {daemon} outlived its job"
        );
        assert!(!dir.path().join("work/still-alive").exists());
    }

    #[test]
    fn sandbox_exit_codes_and_signals_pass_through_the_pid_namespace() {
        for (code, exit, signal) in [
            ("import os; os._exit(3)", Some(3), None),
            (
                "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
                None,
                Some(libc::SIGSEGV),
            ),
            ("import os; os.abort()", None, Some(libc::SIGABRT)),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (mut child, mut init) = confined(dir.path(), code, &[]);
            let pgid = child.id() as i32;
            let raw = ended(&mut init);
            assert_eq!(
                libc::WIFEXITED(raw).then(|| libc::WEXITSTATUS(raw)),
                exit,
                "{code}"
            );
            assert_eq!(
                libc::WIFSIGNALED(raw).then(|| libc::WTERMSIG(raw)),
                signal,
                "{code}"
            );
            end_job(&mut child, pgid, Some(&mut init)).unwrap();
            forget_group(pgid);
        }
    }

    #[test]
    fn sandbox_kept_descriptors_come_as_3_4_and_every_other_one_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let mut fds = [-1; 2];
        // SAFETY: pipe2 fills the array; both ends are owned below.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: just created.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A descriptor kernelgate inherited from its parent: open across exec.
        let inherited_path = dir.path().join("inherited.log");
        let inherited = File::create(&inherited_path).unwrap();
        // SAFETY: dup of a descriptor we hold (without close-on-exec).
        let leaked = unsafe { libc::dup(inherited.as_raw_fd()) };
        assert!(leaked > 2);
        let code = format!(
            r#"
import os
os.write(3, b"kept")
for fd in ({leaked}, 4):
    try:
        os.write(fd, b"PWNED")
        print(fd, "written")
    except OSError as e:
        print(fd, "closed", e.errno)
"#
        );
        let job = dir.path().join("job");
        let (mut child, mut init) = confined(&job, &code, &[w.as_raw_fd()]);
        drop(w);
        let pgid = child.id() as i32;
        ended(&mut init);
        end_job(&mut child, pgid, Some(&mut init)).unwrap();
        forget_group(pgid);
        // SAFETY: closing our own duplicate.
        unsafe { libc::close(leaked) };
        let mut got = String::new();
        File::from(r).read_to_string(&mut got).unwrap();
        assert_eq!(got, "kept", "{}", output(&job));
        let out = output(&job);
        assert!(out.contains(&format!("{leaked} closed 9")), "{out}");
        assert!(out.contains("4 closed 9"), "{out}");
        assert_eq!(std::fs::read_to_string(&inherited_path).unwrap(), "");
    }

    #[test]
    fn sandbox_unix_sockets_by_path_are_refused_and_socketpairs_work() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let sock = outside.path().join("agent.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        let code = format!(
            r#"
import socket
a, b = socket.socketpair()
a.send(b"x")
print("pair", b.recv(1).decode())
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({:?})
    s.send(b"exfiltrated")
    print("CONNECTED")
except OSError as e:
    print("refused", e.errno)
"#,
            sock.display().to_string()
        );
        let (mut child, mut init) = confined(dir.path(), &code, &[]);
        let pgid = child.id() as i32;
        ended(&mut init);
        end_job(&mut child, pgid, Some(&mut init)).unwrap();
        forget_group(pgid);
        let out = output(dir.path());
        assert!(out.contains("pair x"), "{out}");
        assert!(out.contains("refused 1"), "{out}");
        assert!(
            listener.accept().is_err(),
            "the socket's server saw a connection"
        );
    }
}

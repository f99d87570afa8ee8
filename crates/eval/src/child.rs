//! The child process: scrubbed environment, own process group, limits, and the authenticated
//! result file.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::outcome::ExitInfo;
use crate::protocol::Job;
use crate::sandbox::{self, SandboxError, SandboxLevel, SandboxMode};

/// Bytes of stdout/stderr kept in the result.
pub const TAIL_BYTES: u64 = 4096;

/// How the child is started and limited.
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
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
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

/// Environment variables the child never sees: CI tokens and anything named like a secret.
pub fn is_secret_var(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    up.starts_with("GITHUB_")
        || up.starts_with("ACTIONS_")
        || up.starts_with("RUNNER_")
        || ["TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE"]
            .iter()
            .any(|w| up.contains(w))
        // Python start-up hooks would run before the harness.
        || matches!(up.as_str(), "PYTHONSTARTUP" | "PYTHONINSPECT" | "PYTHONPATH")
}

/// A child started and confined, importing torch while it waits for its job: `pr` starts the
/// next job's process while the GPU is busy with the current one. The job (and the clock of
/// its limits) starts with [`Spawned::supervise`]; dropping it kills the process.
pub struct Spawned {
    child: Option<std::process::Child>,
    pgid: i32,
    key: [u8; 32],
    tag: String,
    job: Job,
    result_path: PathBuf,
    progress_path: PathBuf,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    compile_timeout: Duration,
    run_timeout: Duration,
    memory_limit_bytes: u64,
    rlimit_as: bool,
    level: SandboxLevel,
    progress: bool,
}

/// Starts the child process, confined and limited, without its job.
pub fn spawn(launch: Launch<'_>) -> Result<Spawned, LaunchError> {
    let dir = launch.dir;
    prepare_dir(dir, Some(launch.harness))?;
    let result_path = dir.join("result.json");
    let progress_path = dir.join("progress");
    let stdout_path = dir.join("stdout.txt");
    let stderr_path = dir.join("stderr.txt");

    let mut job = launch.job;
    job.result_path = result_path.display().to_string();
    job.progress_path = progress_path.display().to_string();

    let key: [u8; 32] = rand::random();
    // Every process of this job inherits the tag, so strays are found wherever they went.
    let tag = hex::encode(rand::random::<[u8; 8]>());
    become_subreaper();
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
        .stdout(File::create(&stdout_path)?)
        .stderr(File::create(&stderr_path)?);
    for (k, v) in &launch.env {
        cmd.env(k, v);
    }
    cmd.env(JOB_TAG_VAR, &tag);
    let read_files: Vec<&Path> = launch.read_files.iter().map(PathBuf::as_path).collect();
    let write_dirs: Vec<&Path> = launch.write_dirs.iter().map(PathBuf::as_path).collect();
    let policy =
        sandbox::Policy::for_job(launch.python, launch.harness, dir, &read_files, &write_dirs);
    // The runner's audit hook reports against the same lists the kernel enforces.
    let level = sandbox::confine(&mut cmd, launch.sandbox, &policy)?;
    job.sandbox = Some(policy.grant(&level));
    // Held across the spawn: a concurrent job's sweep must not see this group before it is live.
    let mut live = LIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    let child = cmd.spawn()?;
    let pgid = child.id() as i32;
    live.push(pgid);
    drop(live);
    Ok(Spawned {
        child: Some(child),
        pgid,
        key,
        tag,
        job,
        result_path,
        progress_path,
        stdout_path,
        stderr_path,
        compile_timeout: launch.compile_timeout,
        run_timeout: launch.run_timeout,
        memory_limit_bytes: launch.memory_limit_bytes,
        rlimit_as: launch.rlimit_as,
        level,
        progress: launch.progress,
    })
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

/// The child's command: scrubbed environment, the extension on `PYTHONPATH`, caches in its
/// directory, its own process group, the memory limit and death with the CLI.
fn command(l: &Limits<'_>) -> Command {
    let (dir, work) = (l.dir, l.dir.join("work"));
    let mut cmd = Command::new(l.python);
    cmd.current_dir(&work).env_clear().process_group(0);
    let inherited_pythonpath = std::env::var("PYTHONPATH").unwrap_or_default();
    for (k, v) in std::env::vars() {
        if !is_secret_var(&k) {
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
    // SAFETY: only async-signal-safe calls (setrlimit, sched_setaffinity, prctl) between fork
    // and exec.
    unsafe {
        cmd.pre_exec(move || {
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
    /// Set on top of the scrubbed environment (`CUDA_VISIBLE_DEVICES=""` to keep it off the GPU).
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
        // Never supervised (its turn never came): the process and its group go.
        if let Some(mut child) = self.child.take() {
            kill_group(self.pgid);
            let _ = child.wait();
            forget_group(self.pgid);
        }
    }
}

impl Spawned {
    /// Hands the child its job and supervises it: limits per phase, memory, the result's HMAC,
    /// and the sweep for processes it left behind.
    pub fn supervise(mut self) -> Result<Report, LaunchError> {
        let mut child = self.child.take().expect("supervised once");
        let pgid = self.pgid;
        let (compile_timeout, run_timeout) = (self.compile_timeout, self.run_timeout);
        let (limit, rlimit_as) = (self.memory_limit_bytes, self.rlimit_as);
        let progress_path = self.progress_path.clone();
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
            // A child that died while it waited closes the pipe: that is reported from its exit
            // status.
            let _ = stdin.write_all(msg.as_bytes());
        }

        let mut phase: Option<String> = None;
        let mut compile_spent = Duration::ZERO;
        let mut run_spent = Duration::ZERO;
        let mut last = Instant::now();
        let mut last_rss_check = Instant::now();
        let mut ended: Option<Ended> = None;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            std::thread::sleep(Duration::from_millis(10));
            let now = Instant::now();
            let dt = now - last;
            last = now;
            if let Ok(p) = std::fs::read_to_string(&progress_path) {
                let p = p.trim().to_string();
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
                let rss = group_rss_bytes(pgid);
                if rss > limit {
                    ended = Some(Ended::MemoryKilled { rss_bytes: rss });
                }
            }
            if ended.is_some() {
                kill_group(pgid);
                break child.wait()?;
            }
        };
        // Whatever the candidate left behind (compilers, daemons) goes with the job.
        kill_group(pgid);
        forget_group(pgid);
        let strays = kill_strays(pgid, &self.tag);

        let ended = match ended {
            Some(e) => e,
            None => read_result(&self.result_path, &self.key),
        };
        Ok(Report {
            ended,
            exit: ExitInfo {
                code: status.code(),
                signal: status.signal(),
            },
            phase,
            stdout_tail: tail(&self.stdout_path),
            stderr_tail: tail(&self.stderr_path),
            strays,
            sandbox: self.level.clone(),
        })
    }
}

fn forget_group(pgid: i32) {
    LIVE_GROUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|g| *g != pgid);
}

/// The environment variable that tags every process of one job.
const JOB_TAG_VAR: &str = "KERNELGATE_JOB";

/// Process groups of the jobs running now (`pr` runs one job per GPU at once): their members
/// are not strays.
static LIVE_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Makes this process the subreaper of what it spawns: a candidate's process that leaves its
/// group (`setsid`) and is orphaned is re-parented here instead of to init, so the sweep after
/// the job finds it even if it cleared its environment.
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

/// The job tag in a process's environment (`prefix` is `KERNELGATE_JOB=`): `Some("")` when it
/// has none, `None` when unreadable.
fn proc_tag(pid: i32, prefix: &[u8]) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        env.split(|b| *b == 0)
            .find_map(|kv| kv.strip_prefix(prefix))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default(),
    )
}

/// Kills and reaps what the job left running outside its process group after the group was
/// killed: processes carrying its tag anywhere, and untagged orphans re-parented to us from a
/// group that is neither ours nor a running job's. Returns how many were still running
/// outside the job's group (zombies and the group's own dying members do not count).
fn kill_strays(job_pgid: i32, tag: &str) -> usize {
    // SAFETY: getpid/getpgrp have no memory effects.
    let (me, my_pgid) = unsafe { (libc::getpid(), libc::getpgrp()) };
    let mut escaped = std::collections::HashSet::new();
    let prefix = format!("{JOB_TAG_VAR}=");
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
            let ours = match proc_tag(pid, prefix.as_bytes()) {
                Some(t) if t == tag => true,
                // Another job's process, or one of ours (git) in our own group.
                Some(t) if !t.is_empty() => false,
                _ => ppid == me && pgrp != my_pgid && !live.contains(&pgrp),
            };
            if !ours || pid == me {
                continue;
            }
            found = true;
            if state != 'Z' && pgrp != job_pgid {
                escaped.insert(pid);
            }
            // SAFETY: signalling and reaping a process of this job; ESRCH/ECHILD are fine.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                if ppid == me {
                    libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
                }
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
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(kb) = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
            {
                total += kb * 1024;
            }
        }
    }
    total
}

fn read_result(path: &Path, key: &[u8]) -> Ended {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ended::NoResult;
    };
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

/// The last [`TAIL_BYTES`] of a captured stream, lossily decoded.
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
    let s = String::from_utf8_lossy(&buf).into_owned();
    if start > 0 {
        format!("...{s}")
    } else {
        s
    }
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
    fn secrets_are_scrubbed_and_ordinary_variables_kept() {
        for v in [
            "GITHUB_TOKEN",
            "GITHUB_WORKSPACE",
            "ACTIONS_RUNTIME_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "HF_TOKEN",
            "my_password",
            "NPM_AUTH",
            "PYTHONPATH",
        ] {
            assert!(is_secret_var(v), "{v} must be scrubbed");
        }
        for v in [
            "PATH",
            "HOME",
            "CUDA_HOME",
            "LD_LIBRARY_PATH",
            "CUDA_VISIBLE_DEVICES",
            "TORCH_CUDA_ARCH_LIST",
        ] {
            assert!(!is_secret_var(v), "{v} must be kept");
        }
    }

    #[test]
    fn result_needs_the_right_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r");
        let key = [7u8; 32];
        let payload = r#"{"outcome":{"kind":"passed"}}"#;
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(payload.as_bytes());
        let tag = hex::encode(mac.finalize().into_bytes());
        std::fs::write(&p, format!("{tag}\n{payload}")).unwrap();
        assert!(matches!(read_result(&p, &key), Ended::Result(s) if s == payload));
        assert!(matches!(read_result(&p, &[8u8; 32]), Ended::Forged));
        std::fs::write(&p, format!("{tag}\n{payload} ")).unwrap();
        assert!(matches!(read_result(&p, &key), Ended::Forged));
        assert!(matches!(
            read_result(&dir.path().join("none"), &key),
            Ended::NoResult
        ));
    }
}

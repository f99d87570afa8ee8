//! `kernelgate_harness`: the Python extension module a child process imports to run one job.
//!
//! The CLI starts `python -c "import kernelgate_harness as h; h.main()"` and writes two things
//! on the child's stdin: one line with a hex HMAC key, then the job JSON. `main()` reads both
//! here, in Rust, before any candidate code exists in the process, keeps the key only in Rust
//! memory, drives the embedded Python runner (`python/runner.py`, loaded as a private module),
//! and writes the runner's result JSON itself, authenticated with the key. A candidate that
//! prints, writes files or exits early cannot produce a result the CLI accepts.

mod timer;
mod watch;

use hmac::{Hmac, Mac};
use pyo3::prelude::*;
use pyo3::types::PyModule;
use sha2::Sha256;
use std::ffi::CString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The runner: the judge's orchestration of a job's phases (problem load, reference, workers,
/// checks, timing) and its result.
const RUNNER_SRC: &str = include_str!("../python/runner.py");
/// The evaluation's shared state, which the runner's units receive (and a worker's helpers).
const KG_CONTEXT_SRC: &str = include_str!("../python/kg_context.py");
/// The correctness trials: inputs, reference outputs, the candidate's outputs checked.
const KG_TRIALS_SRC: &str = include_str!("../python/kg_trials.py");
/// The precision audit against a float64 evaluation of the reference.
const KG_PRECISION_SRC: &str = include_str!("../python/kg_precision.py");
/// The judge's timing phase (work count, fresh draws, the timed calls verified), over `kg_timing`.
const KG_TIMED_SRC: &str = include_str!("../python/kg_timed.py");
/// The op audit the runner calls after correctness (custom vs PyTorch work).
const KG_AUDIT_SRC: &str = include_str!("../python/kg_audit.py");
/// The job's dataclasses (the mirror of `kernelgate_eval::protocol::Job`).
const KG_PROTOCOL_SRC: &str = include_str!("../python/kg_protocol.py");
/// The correctness check's comparisons and the GPU memory plan.
const KG_CHECKS_SRC: &str = include_str!("../python/kg_checks.py");
/// The sandbox's audit hook inside the child (names what the kernel's rules block).
const KG_SANDBOX_SRC: &str = include_str!("../python/kg_sandbox.py");
/// The problem's work (bytes, FLOPs), counted on the reference.
const KG_WORK_SRC: &str = include_str!("../python/kg_work.py");
/// PyTorch's state witnessed before the candidate's import (hooks, patches, settings).
const KG_INTEGRITY_SRC: &str = include_str!("../python/kg_integrity.py");
/// torch's extension header precompiled by `kernelgate pch`, put on the child's `CPATH`.
const KG_PCH_SRC: &str = include_str!("../python/kg_pch.py");
/// Python bytecode compiled by `kernelgate pch`, read before torch's import.
const KG_BYTECODE_SRC: &str = include_str!("../python/kg_bytecode.py");
/// nvcc's host and device steps side by side (`PYTORCH_NVCC`), installed by `kernelgate pch`.
const KG_NVCC_SRC: &str = include_str!("../python/kg_nvcc.py");
/// The judge <-> worker wire (messages, shared buffers).
const KG_WIRE_SRC: &str = include_str!("../python/kg_wire.py");
/// The judge's handle on its workers.
const KG_JUDGE_SRC: &str = include_str!("../python/kg_judge.py");
/// The worker: imports a model's code and computes outputs for the judge.
const KG_WORKER_SRC: &str = include_str!("../python/kg_worker.py");
/// The job protocol this harness speaks: `kernelgate_eval::HARNESS_PROTOCOL` and
/// `kg_protocol.PROTOCOL` must agree (tests/it/protocol.rs).
const PROTOCOL: u32 = 3;

/// `main()` may run once per process: a candidate calling it again must not get a signed result.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Runs the job given on stdin and exits the process. Never returns normally.
#[pyfunction]
fn main(py: Python<'_>) -> PyResult<()> {
    if STARTED.swap(true, Ordering::SeqCst) {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "kernelgate_harness.main() runs once per process",
        ));
    }
    // The judge's memory holds the result key, the draws and the references: not readable
    // through /proc or ptrace by a process without CAP_SYS_PTRACE, which its workers lack.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    // OpenMP threads that spin after a parallel region take the CPUs the judge wakes up on (a pr
    // CPU lane has few): seen as 6-7 ms of a C++ kernel's calls on the judge's clock. They sleep
    // instead, here and in every worker alike (read once, when torch loads OpenMP).
    let _ = py.run(
        c"import os\nos.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')",
        None,
        None,
    );
    // Warm up before the job arrives: a child started ahead of its turn (`pr` starts the next
    // job's process while the GPU is busy) spends its import time while it waits. Trusted code
    // only: no candidate file is known yet, and neither the key nor the job has been read.
    let warm = load_runner(py);
    // Where the CLI left Landlock to the job's own processes (`KERNELGATE_LANDLOCK_FDS`), the
    // workers start next, forks of this process as it is now (torch loaded, nothing of the job
    // in it), each to enforce a ruleset of its own; then this one enforces its own. Sibling
    // domains: neither can reach the other, and each may write its own /proc/<pid> (the CUDA
    // driver does).
    let prestarted = match prestart_and_confine(py, warm.as_ref().ok()) {
        Ok(p) => p,
        Err(message) => {
            eprintln!("kernelgate harness: {message}");
            std::process::exit(5);
        }
    };
    if let Ok(runner) = &warm {
        warm_profiler(py, runner);
    }
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).map_err(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("reading the job from stdin: {e}"))
    })?;
    let (key_line, job) = input.split_once('\n').unwrap_or((input.as_str(), ""));
    let key = hex::decode(key_line.trim()).map_err(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("bad result key on stdin: {e}"))
    })?;
    let job_value: serde_json::Value = serde_json::from_str(job).map_err(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("bad job JSON on stdin: {e}"))
    })?;
    let result_path = job_value
        .get("result_path")
        .and_then(|v| v.as_str())
        .map(PathBuf::from)
        .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("job JSON has no result_path"))?;

    let payload = match warm {
        // No candidate code has run: the machine's or kernelgate's failure.
        Err(message) => error_json("infrastructure", &message),
        Ok(runner) => match runner
            .runner
            .setattr("PRESTARTED", prestarted)
            .map_err(|e| py_error_text(py, &e))
            .and_then(|()| drive_runner(py, &runner, job))
        {
            Ok(json) => json,
            Err(message) => error_json("harness_error", &message),
        },
    };
    // Flush what Python buffered for the captured stdout/stderr files before leaving.
    let _ = py.run(
        c"import sys\nsys.stdout.flush()\nsys.stderr.flush()",
        None,
        None,
    );
    let code = match write_result(&result_path, &key, &payload) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!(
                "kernelgate harness: cannot write the result to {}: {e}",
                result_path.display()
            );
            3
        }
    };
    // Leave without Python finalisation: candidate atexit hooks and non-daemon threads must not
    // hang the job or touch the result after it is written.
    leave(code);
}

/// Ends the process at once: what it printed flushed, then `_exit`, skipping Python's
/// finalisation and the C++ libraries' static destructors and exit handlers (torch's take about
/// 0.2 s of CPU per process, after the result or the last reply is already out).
fn leave(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: fflush(NULL) flushes every C stream; _exit ends the process.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(code)
    }
}

/// The descriptors of `KERNELGATE_LANDLOCK_FDS` (the judge's ruleset, then one per worker).
fn landlock_fds() -> Vec<i32> {
    std::env::var("KERNELGATE_LANDLOCK_FDS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Starts the job's workers (one per worker ruleset) and enforces the judge's own ruleset.
/// Returns the started workers (a Python list of `(process, socket)` pairs, empty without
/// rulesets). With the runner loaded and no CUDA in this process the workers are forks of it
/// (`fork_workers`); otherwise new processes (`kg_judge.prestart`).
fn prestart_and_confine(py: Python<'_>, runner: Option<&Runner<'_>>) -> Result<Py<PyAny>, String> {
    let fds = landlock_fds();
    let Some((own, workers)) = fds.split_first() else {
        return Ok(pyo3::types::PyList::empty(py).into_any().unbind());
    };
    let text = |e: PyErr| py_error_text(py, &e);
    // The runner's own `kg_judge` where it is loaded; otherwise one for the workers' start.
    let judge = match runner.and_then(|r| r.runner.getattr("kg_judge").ok()) {
        Some(judge) => judge,
        None => {
            let wire = load_private_module(py, "kg_wire", KG_WIRE_SRC).map_err(text)?;
            let judge = load_private_module(py, "kg_judge", KG_JUDGE_SRC).map_err(text)?;
            judge.setattr("kg_wire", wire).map_err(text)?;
            judge.into_any()
        }
    };
    let started = match runner {
        Some(runner) if may_fork() => fork_workers(py, &judge, runner, workers),
        _ => judge
            .call_method1("prestart", (workers.to_vec(),))
            .map_err(text),
    }
    .map_err(|e| format!("starting the workers: {e}"))?;
    for fd in workers {
        // SAFETY: the CLI's descriptors, handed to the workers above; this process's copies.
        unsafe { libc::close(*fd) };
    }
    kernelgate_confine::restrict_self_with_own_proc(*own)
        .map_err(|e| format!("enforcing the sandbox's Landlock ruleset: {e}"))?;
    // SAFETY: the judge's ruleset, enforced.
    unsafe { libc::close(*own) };
    Ok(started.unbind())
}

/// Whether the job's workers may be forks of this process (else they are new processes): not
/// under `KERNELGATE_WORKER_START=exec` in the runner's environment (passed on through
/// `KERNELGATE_CHILD_ENV`, to compare the two), nor where this process holds what a fork must not
/// ([`kernelgate_confine::fork_refusal`]: the CUDA driver, a writable shared mapping).
fn may_fork() -> bool {
    !std::env::var("KERNELGATE_WORKER_START").is_ok_and(|v| v == "exec")
        && std::fs::read_to_string("/proc/self/maps")
            .is_ok_and(|maps| kernelgate_confine::fork_refusal(&maps).is_none())
}

/// The job's workers as forks of this process, made before it reads the key or the job: each
/// starts with torch and the runner loaded (a worker started afresh spends 2-3 s of CPU on that
/// import) and holds nothing of the job, the draws or the references, which do not exist yet.
/// The judge's later memory is its own (copy on write). Returns `kg_judge.adopt`'s pairs.
fn fork_workers<'py>(
    py: Python<'py>,
    judge: &Bound<'py, PyAny>,
    runner: &Runner<'py>,
    rulesets: &[i32],
) -> Result<Bound<'py, PyAny>, String> {
    let text = |e: PyErr| py_error_text(py, &e);
    let os = py.import("os").map_err(text)?;
    let mut started: Vec<(i32, i32)> = Vec::new();
    for &ruleset in rulesets {
        let mut pair = [0i32; 2];
        // SAFETY: socketpair into a local array. Close-on-exec: a build the worker runs gets
        // neither end.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        if made != 0 {
            return Err(format!("socketpair: {}", std::io::Error::last_os_error()));
        }
        // Python's own fork: the interpreter's state is made whole in the child.
        let pid: i32 = os
            .call_method0("fork")
            .and_then(|p| p.extract())
            .map_err(text)?;
        if pid == 0 {
            forked_worker(py, judge, runner, pair[1], ruleset);
        }
        // SAFETY: the worker's end, now the worker's.
        unsafe { libc::close(pair[1]) };
        started.push((pid, pair[0]));
    }
    judge.call_method1("adopt", (started,)).map_err(text)
}

/// A forked worker, made what a worker started afresh is before it serves: stdin (where the key
/// and the job arrive) is /dev/null, no descriptor is open but its socket end, its ruleset and
/// stdout/stderr (not the other workers' ends, not the judge's ruleset), dumpable as after an
/// exec. Never returns.
fn forked_worker(
    py: Python<'_>,
    judge: &Bound<'_, PyAny>,
    runner: &Runner<'_>,
    fd: i32,
    ruleset: i32,
) -> ! {
    // SAFETY: plain system calls on this process's descriptors.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null > 0 {
            libc::dup2(null, 0);
            libc::close(null);
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    close_descriptors_except(&[0, 1, 2, fd, ruleset]);
    let set = py
        .import("os")
        .and_then(|os| os.getattr("environ"))
        .and_then(|env| judge.call_method1("worker_environment", (env, ruleset)));
    if let Err(e) = set {
        eprintln!(
            "kernelgate worker: setting its environment failed ({}): the worker cannot start",
            py_error_text(py, &e)
        );
        leave(4);
    }
    let code = serve_as_worker(py, fd, Some(ruleset), Some(runner));
    leave(code);
}

/// Closes every descriptor of this process but `keep`.
fn close_descriptors_except(keep: &[i32]) {
    let open: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => (0..4096).collect(),
    };
    for fd in open.into_iter().filter(|fd| !keep.contains(fd)) {
        // SAFETY: closing a descriptor number; one already closed answers EBADF.
        unsafe { libc::close(fd) };
    }
}

/// `kernelgate_harness.worker(fd)`: the worker process the judge starts for a model's code
/// (`kg_judge.Worker`), serving the judge on the socket `fd`. Confined first (its own Landlock
/// domain, no capabilities), before torch or any model code is loaded; exits the process.
#[pyfunction]
fn worker(py: Python<'_>, fd: i32) -> PyResult<()> {
    if STARTED.swap(true, Ordering::SeqCst) {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "kernelgate_harness.worker() runs once per process",
        ));
    }
    let ruleset = std::env::var("KERNELGATE_WORKER_RULESET")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok());
    let code = serve_as_worker(py, fd, ruleset, None);
    leave(code);
}

/// A worker's life: its Landlock ruleset enforced (while it has one thread and no model code
/// exists), the rest of its confinement (`kg_worker.confine`), the runner loaded where the
/// worker did not inherit it, then the judge served on `fd`. Returns the exit code.
fn serve_as_worker(
    py: Python<'_>,
    fd: i32,
    ruleset: Option<i32>,
    inherited: Option<&Runner<'_>>,
) -> i32 {
    if let Some(ruleset) = ruleset {
        if let Err(e) = kernelgate_confine::restrict_self_with_own_proc(ruleset) {
            eprintln!("kernelgate worker: enforcing its Landlock ruleset failed ({e}): the worker cannot start");
            return 4;
        }
        // SAFETY: the ruleset, enforced.
        unsafe { libc::close(ruleset) };
    }
    let confined = load_private_module(py, "kg_wire", KG_WIRE_SRC).and_then(|wire| {
        let worker = load_private_module(py, "kg_worker", KG_WORKER_SRC)?;
        worker.setattr("kg_wire", &wire)?;
        worker.call_method0("confine")?;
        Ok(worker)
    });
    let worker = match confined {
        Ok(worker) => worker,
        Err(e) => {
            eprintln!(
                "kernelgate worker: confinement failed ({}): the worker cannot start",
                py_error_text(py, &e)
            );
            return 4;
        }
    };
    let loaded;
    let runner = match inherited {
        Some(runner) => runner,
        None => match load_runner(py) {
            Ok(runner) => {
                loaded = runner;
                &loaded
            }
            Err(message) => {
                eprintln!("kernelgate worker: {message}");
                return 5;
            }
        },
    };
    warm_profiler(py, runner);
    let code = match worker.call_method1("serve", (fd, &runner.runner, &runner.timing)) {
        Ok(v) => v.extract::<i32>().unwrap_or(0),
        Err(e) => {
            eprintln!("kernelgate worker: {}", py_error_text(py, &e));
            6
        }
    };
    let _ = py.run(
        c"import sys\nsys.stdout.flush()\nsys.stderr.flush()",
        None,
        None,
    );
    code
}

/// The runner and its helper modules, loaded and holding torch, ready for a job.
struct Runner<'py> {
    runner: Bound<'py, PyModule>,
    timing: Bound<'py, PyModule>,
}

/// Imports torch and loads the runner as a private module (removed from `sys.modules`), with
/// `kg_audit` and `kg_timing`.
fn load_runner(py: Python<'_>) -> Result<Runner<'_>, String> {
    // Bytecode `kernelgate pch` compiled for a torch installed without its own: without it the
    // import compiles torch's source in every job (read-only under the same root as the header).
    if let Ok(bytecode) = load_private_module(py, "kg_bytecode", KG_BYTECODE_SRC) {
        let root = std::env::var("KERNELGATE_PCH_DIR").ok();
        let _ = bytecode.call_method1("use", (root,));
    }
    // An import failure is the runner's to report, with the interpreter's name.
    let _ = py.import("torch");
    let runner = load_private_module(py, "runner", RUNNER_SRC)
        .map_err(|e| format!("loading the embedded runner: {}", py_error_text(py, &e)))?;
    // Loaded before any candidate code, so they capture the functions they rely on unpatched.
    for (name, src) in [
        ("kg_audit", KG_AUDIT_SRC),
        ("kg_protocol", KG_PROTOCOL_SRC),
        ("kg_checks", KG_CHECKS_SRC),
        ("kg_sandbox", KG_SANDBOX_SRC),
        ("kg_work", KG_WORK_SRC),
        ("kg_integrity", KG_INTEGRITY_SRC),
        ("kg_pch", KG_PCH_SRC),
        ("kg_nvcc", KG_NVCC_SRC),
        ("kg_wire", KG_WIRE_SRC),
        ("kg_judge", KG_JUDGE_SRC),
        ("kg_context", KG_CONTEXT_SRC),
        ("kg_trials", KG_TRIALS_SRC),
        ("kg_precision", KG_PRECISION_SRC),
        ("kg_timed", KG_TIMED_SRC),
    ] {
        let m = load_private_module(py, name, src)
            .map_err(|e| format!("loading {name}: {}", py_error_text(py, &e)))?;
        runner
            .setattr(name, m)
            .map_err(|e| format!("installing {name}: {}", py_error_text(py, &e)))?;
    }
    // The judge's modules speak the wire.
    if let (Ok(wire), Ok(judge)) = (runner.getattr("kg_wire"), runner.getattr("kg_judge")) {
        let _ = judge.setattr("kg_wire", wire);
    }
    // The timer is made by kg_timing itself (`make_timer`), on the device the runner picked.
    let timing = timer::load_timing_module(py)
        .map_err(|e| format!("loading kg_timing: {}", py_error_text(py, &e)))?;
    Ok(Runner { runner, timing })
}

/// Starts the profiler's CUDA tracing where asked (`kg_audit.warm_profiler`): only where the
/// process sees a GPU (its job's), before CUDA has a context in it, and after any fork.
fn warm_profiler(py: Python<'_>, loaded: &Runner<'_>) {
    if let (Ok(torch), Ok(audit)) = (py.import("torch"), loaded.runner.getattr("kg_audit")) {
        let _ = audit.call_method1("warm_profiler", (torch,));
    }
}

/// Runs the job on the loaded runner. Returns the result JSON, validated, or a message
/// describing the harness's own failure.
fn drive_runner(py: Python<'_>, loaded: &Runner<'_>, job: &str) -> Result<String, String> {
    let Runner { runner, timing } = loaded;
    let timer: Option<Bound<'_, PyAny>> = None;
    let out = runner
        .call_method1("run", (job, timing, timer))
        .map_err(|e| format!("runner raised: {}", py_error_text(py, &e)))?;
    let text: String = out
        .extract()
        .map_err(|e| format!("runner returned no string: {}", py_error_text(py, &e)))?;
    serde_json::from_str::<serde_json::Value>(&text)
        .map_err(|e| format!("runner returned invalid JSON: {e}"))?;
    Ok(text)
}

/// Loads `src` as a module that is not left in `sys.modules` (candidates cannot find it by name).
/// `kernelgate_harness.pch_module()`: a fresh private `kg_pch` (what `kernelgate pch` runs).
#[pyfunction]
fn pch_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    load_private_module(py, "kg_pch", KG_PCH_SRC)
}

/// `kernelgate_harness.bytecode_module()`: a fresh private `kg_bytecode` (`kernelgate pch`).
#[pyfunction]
fn bytecode_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    load_private_module(py, "kg_bytecode", KG_BYTECODE_SRC)
}

/// `kernelgate_harness.nvcc_module()`: a fresh private `kg_nvcc` (`kernelgate pch` installs it).
#[pyfunction]
fn nvcc_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    load_private_module(py, "kg_nvcc", KG_NVCC_SRC)
}

fn load_private_module<'py>(
    py: Python<'py>,
    name: &str,
    src: &str,
) -> PyResult<Bound<'py, PyModule>> {
    let cstring = |s: String| {
        CString::new(s).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
    };
    let module_name = format!("_kernelgate_{name}");
    let module = PyModule::from_code(
        py,
        &cstring(src.to_string())?,
        &cstring(format!("<kernelgate {name}>"))?,
        &cstring(module_name.clone())?,
    )?;
    if let Ok(modules) = py.import("sys").and_then(|s| s.getattr("modules")) {
        let _ = modules.del_item(module_name);
    }
    // Its own text: `kg_nvcc` writes itself to disk and checks the copy it finds there.
    module.setattr("SOURCE", src)?;
    Ok(module)
}

fn py_error_text(py: Python<'_>, err: &PyErr) -> String {
    let tb = err
        .traceback(py)
        .and_then(|tb| tb.format().ok())
        .unwrap_or_default();
    format!("{tb}{err}")
}

fn error_json(kind: &str, message: &str) -> String {
    serde_json::json!({
        "outcome": {"kind": kind, "message": message},
        "findings": [],
        "phases": [],
        "timing": null,
    })
    .to_string()
}

/// Writes `<hex mac>\n<payload>` through a fresh file and a rename, so a path the candidate
/// prepared (a symlink, say) is replaced, never written through.
fn write_result(path: &std::path::Path, key: &[u8], payload: &str) -> std::io::Result<()> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(key).map_err(|e| std::io::Error::other(e.to_string()))?;
    mac.update(payload.as_bytes());
    let tag = hex::encode(mac.finalize().into_bytes());
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    file.write_all(tag.as_bytes())?;
    file.write_all(b"\n")?;
    file.write_all(payload.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Denies `syscalls` (numbers) with `EPERM` on every thread of this process from now on, for
/// good: a seccomp filter stacked on the launcher's, which no later code can lift. The runner
/// calls it with the job's `denied_from_candidate` just before the candidate's import.
#[pyfunction]
fn deny_syscalls(syscalls: Vec<i64>) -> PyResult<()> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let failed = |e: String| pyo3::exceptions::PyOSError::new_err(format!("seccomp: {e}"));
    if syscalls.is_empty() {
        return Ok(());
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| failed(e.to_string()))?;
    // An empty rule list matches the syscall whatever its arguments.
    let rules = syscalls.into_iter().map(|nr| (nr, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| failed(e.to_string()))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| failed(e.to_string()))?;
    seccompiler::apply_filter_all_threads(&program).map_err(|e| failed(e.to_string()))
}

#[pymodule]
fn kernelgate_harness(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(deny_syscalls, m)?)?;
    m.add_function(wrap_pyfunction!(worker, m)?)?;
    m.add_function(wrap_pyfunction!(pch_module, m)?)?;
    m.add_function(wrap_pyfunction!(bytecode_module, m)?)?;
    m.add_function(wrap_pyfunction!(nvcc_module, m)?)?;
    // The job protocol this harness speaks (kernelgate_eval::HARNESS_PROTOCOL on the CLI's side).
    m.add("PROTOCOL", PROTOCOL)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    timer::register(m)?;
    watch::register(m)?;
    Ok(())
}

//! The sandbox around every candidate, end to end through `kernelgate eval` (real CLI, real
//! child, real torch on the CPU): each escape fixture under `tests/fixtures/eval/kernels/sandbox/`
//! is blocked (its side effect checked) and, where the runner can see it, reported as an
//! `eval/sandbox-denied` finding, while honest kernels (C++ through load_inline,
//! torch.profiler) pass in the same run.
//!
//! Needs the harness extension next to the CLI (`cargo build -p kernelgate-harness`) and a
//! Python with torch (`KERNELGATE_PYTHON` or `.venv`).

use crate::common::{python, root, test_extensions_dir};

use serde_json::Value;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FAKE_TOKEN: &str = "ghs_kernelgateFakeToken0123456789";
const SANDBOX_RULE: &str = "eval/sandbox-denied";
/// Longer than any honest eval of the run takes on two cores: past it, kernelgate's supervision
/// is stuck (the run limit never fired), and the test says so instead of hanging.
const WATCHDOG: Duration = Duration::from_secs(400);
/// How many `kernelgate eval` jobs the escape test runs at once.
const JOBS_AT_ONCE: usize = 4;

fn fixture(rel: &str) -> String {
    root()
        .join("tests/fixtures/eval")
        .join(rel)
        .display()
        .to_string()
}

/// One eval of the run: a fixture, the environment kernelgate gets (variables named `KG_*` are
/// passed on to the job's child through `KERNELGATE_CHILD_ENV`), and how it is started.
struct Run {
    kernel: &'static str,
    env: Vec<(&'static str, String)>,
    args: Vec<String>,
    /// `--extensions-dir` the suite's shared cache, as `pr` keeps one; `false`: a plain
    /// `kernelgate eval`, which builds in torch's own directory (`TORCH_EXTENSIONS_DIR` in
    /// `env`).
    keyed: bool,
    /// A file kernelgate inherits from its parent, open (not close-on-exec) at this number.
    inherit: Option<(i32, PathBuf)>,
}

impl Run {
    fn new(kernel: &'static str) -> Run {
        Run {
            kernel,
            env: Vec::new(),
            args: Vec::new(),
            keyed: true,
            inherit: None,
        }
    }

    fn env(mut self, k: &'static str, v: impl Into<String>) -> Run {
        self.env.push((k, v.into()));
        self
    }
}

/// `kernelgate eval --format json` on the ReLU problem, run from `checkout` with a fake workflow
/// token in kernelgate's own environment; killed (and the test failed) past [`WATCHDOG`].
fn eval_in(checkout: &Path, run: &Run) -> (i32, Value) {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"));
    let mut args: Vec<std::ffi::OsString> = ["eval", "--problem", &fixture("problems/relu.py")]
        .into_iter()
        .map(Into::into)
        .collect();
    args.extend(["--kernel".into(), fixture(run.kernel).into()]);
    for a in [
        "--device",
        "cpu",
        "--seed",
        "42",
        "--no-timing",
        "--format",
        "json",
    ] {
        args.push(a.into());
    }
    args.extend(run.args.iter().map(Into::into));
    if run.keyed {
        args.extend(["--extensions-dir".into(), test_extensions_dir().into()]);
    }
    let mut cmd = match &run.inherit {
        // The shell opens the file at `fd` and execs kernelgate with it: open across the exec.
        Some((fd, path)) => {
            let mut sh = Command::new("/bin/sh");
            sh.arg("-c")
                .arg(format!("exec \"$0\" \"$@\" {fd}>>\"$KG_TEST_INHERITED\""))
                .arg(&exe)
                .args(&args)
                .env("KG_TEST_INHERITED", path);
            sh
        }
        None => {
            let mut c = Command::new(&exe);
            c.args(&args);
            c
        }
    };
    cmd.current_dir(checkout)
        .env("KERNELGATE_PYTHON", python())
        .env("GITHUB_TOKEN", FAKE_TOKEN)
        .env_remove("KERNELGATE_SANDBOX")
        .env_remove("TORCH_EXTENSIONS_DIR");
    let passed: Vec<&str> = run
        .env
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| k.starts_with("KG_"))
        .collect();
    cmd.env("KERNELGATE_CHILD_ENV", passed.join(","));
    for (k, v) in &run.env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kernelgate");
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + WATCHDOG;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "kernelgate eval of {} still ran after {WATCHDOG:?}: its supervision is stuck",
                run.kernel
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from kernelgate eval of {} ({e}); stdout:\n{stdout}\nstderr:\n{stderr}",
            run.kernel
        )
    });
    (status.code().unwrap_or(-1), v)
}

fn sandbox_findings(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == SANDBOX_RULE)
        .map(|f| {
            assert_eq!(f["severity"], "error", "{f}");
            f["message"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The escape was reported with `what` in the message, the row fails (exit 1) although the
/// kernel itself is correct, and the job ran fully sandboxed.
#[track_caller]
fn assert_blocked_and_reported(name: &str, code: i32, v: &Value, what: &str) {
    assert_eq!(v["sandbox"], "full", "{name}: {v:#}");
    assert_eq!(v["outcome"]["kind"], "passed", "{name}: {v:#}");
    let found = sandbox_findings(v);
    assert!(
        found
            .iter()
            .any(|m| m.contains(what) && m.contains("blocked by the sandbox")),
        "{name}: no sandbox finding naming `{what}`: {found:?}\n{v:#}"
    );
    assert_eq!(code, 1, "{name}: a sandbox finding must fail the row");
}

/// A candidate that tried to write under the pch root (`kernelgate pch`'s header, bytecode or
/// nvcc wrapper, which later jobs read): the trusted file `(path, content, name)` is unchanged,
/// nothing was planted, every write was refused, and the row names the file as blocked.
fn assert_pch_root_kept(
    name: &str,
    code: i32,
    v: &Value,
    stdout: &str,
    (trusted, content, named): (&std::path::Path, &str, &str),
    planted: &std::path::Path,
) {
    assert_eq!(
        std::fs::read_to_string(trusted).unwrap(),
        content,
        "{name}: the candidate replaced {} that later jobs read",
        trusted.display()
    );
    assert!(
        !planted.exists(),
        "{name}: the candidate planted {}",
        planted.display()
    );
    assert!(
        stdout.contains("blocked") && !stdout.contains("WROTE"),
        "{stdout}"
    );
    assert_blocked_and_reported(name, code, v, named);
}

#[test]
fn every_escape_is_blocked_and_reported_while_honest_kernels_pass() {
    let checkout = tempfile::tempdir().unwrap();
    let checkout_file = checkout.path().join("ci-credentials.txt");
    std::fs::write(&checkout_file, "checkout-secret-5150").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "outside-secret-8086").unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let listening = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut received = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                if let Ok((mut s, peer)) = listener.accept() {
                    let mut buf = Vec::new();
                    let _ = s.set_nonblocking(false);
                    let _ = s.read_to_end(&mut buf);
                    received.push(format!("{peer}: {}", String::from_utf8_lossy(&buf)));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            received
        })
    };

    let site = {
        let out = Command::new(python())
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    };
    let pth = site.join("kg_sandbox_escape.pth");

    // A precompiled-header root as `kernelgate pch` leaves it: jobs may read it, never write.
    let pch = tempfile::tempdir().unwrap();
    let gch = pch.path().join("0123abcd/torch/extension.h.gch");
    std::fs::create_dir_all(&gch).unwrap();
    std::fs::write(gch.join("O0.gch"), "trusted header").unwrap();
    std::fs::write(pch.path().join("0123abcd/manifest.json"), "{}").unwrap();
    // Beside it, the bytecode tree `kernelgate pch` compiles where torch has none of its own.
    let pyc = pch.path().join(
        "bytecode/usr/lib/python3/site-packages/torch/__pycache__/kg_trusted.cpython-311.pyc",
    );
    std::fs::create_dir_all(pyc.parent().unwrap()).unwrap();
    std::fs::write(&pyc, "trusted bytecode").unwrap();
    // And the nvcc wrapper it installs, which later jobs' CUDA builds run.
    let wrapper = pch.path().join("nvcc/kg_nvcc-0123456789ab.py");
    std::fs::create_dir_all(wrapper.parent().unwrap()).unwrap();
    std::fs::write(&wrapper, "trusted wrapper").unwrap();

    // A server on a UNIX socket outside the job (docker.sock, D-Bus, an agent).
    let sockets = tempfile::tempdir().unwrap();
    let socket_path = sockets.path().join("agent.sock");
    let unix_listener = UnixListener::bind(&socket_path).unwrap();
    unix_listener.set_nonblocking(true).unwrap();
    let unix_listening = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut received = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                if let Ok((mut s, _)) = unix_listener.accept() {
                    let mut buf = Vec::new();
                    let _ = s.set_nonblocking(false);
                    let _ = s.read_to_end(&mut buf);
                    received.push(String::from_utf8_lossy(&buf).into_owned());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            received
        })
    };
    // And one that takes datagrams by its address.
    let dgram_path = sockets.path().join("agent.dgram");
    let dgram = std::os::unix::net::UnixDatagram::bind(&dgram_path).unwrap();
    dgram.set_nonblocking(true).unwrap();
    let dgram_listening = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut received = Vec::new();
            let mut buf = [0u8; 256];
            while !stop.load(Ordering::SeqCst) {
                if let Ok(n) = dgram.recv(&mut buf) {
                    received.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            received
        })
    };
    // The runner's files under /opt (its `.credentials`), where this machine lets the test
    // write there; the listing of /opt is tried in any case.
    let opt_dir = PathBuf::from(format!(
        "/opt/kernelgate-sandbox-test-{}",
        std::process::id()
    ));
    let opt_secret = opt_dir.join(".credentials");
    let opt_written = std::fs::create_dir_all(&opt_dir)
        .and_then(|()| std::fs::write(&opt_secret, "opt-secret-6502"))
        .is_ok();
    // A file kernelgate's own parent left open across exec.
    let inherited = outside.path().join("runner-state.log");
    std::fs::write(&inherited, "").unwrap();
    // The daemon's pid file, in its own directory of the shared cache (the one place outside
    // the job it may write).
    let pidfile_name = format!("kg-forged-daemon-{}.pid", std::process::id());
    let daemon_source =
        std::fs::read_to_string(fixture("kernels/sandbox/daemon_forged_tag.py")).unwrap();
    let pidfile = kernelgate_eval::extensions_subdir(&test_extensions_dir(), &daemon_source)
        .join(&pidfile_name);
    let _ = std::fs::remove_file(&pidfile);
    let _ = std::fs::remove_file(pidfile.with_extension("pid.alive"));
    // torch's own build directory of a plain `kernelgate eval`, with another kernel's build.
    let torch_dir = tempfile::tempdir().unwrap();
    let victim = torch_dir.path().join("kg_victim_ext/kg_victim_ext.so");
    std::fs::create_dir_all(victim.parent().unwrap()).unwrap();
    std::fs::write(&victim, "trusted build").unwrap();

    let paths = format!("{}:{}", secret.display(), checkout_file.display());
    let pch_dir = pch.path().display().to_string();
    let secrets = [
        ("DEPLOY_PAT", "kg-secret-pat"),
        ("SENTRY_DSN", "kg-secret-dsn"),
        ("API_JWT", "kg-secret-jwt"),
        ("SLACK_WEBHOOK_URL", "kg-secret-webhook"),
        ("AWS_CREDS", "kg-secret-creds"),
        ("DB_PASS", "kg-secret-pass"),
    ];
    let mut env_secrets = Run::new("kernels/sandbox/env_secrets.py");
    for (k, v) in secrets {
        env_secrets = env_secrets.env(k, v);
    }
    let runs: Vec<Run> = vec![
        // The gate itself as the way out: supervision that a FIFO must not stall. The limits
        // must outlast the way to its forward (12 s here with four jobs at once). Both are set:
        // the FIFO hides the progress file, so supervision may never see the run phase begin,
        // and then the compile limit is the one that fires.
        Run {
            args: ["--compile-timeout", "60", "--run-timeout", "60"]
                .map(String::from)
                .to_vec(),
            ..Run::new("kernels/sandbox/progress_fifo.py")
        },
        Run::new("kernels/sandbox/read_outside.py").env("KG_FIXTURE_PATHS", paths),
        Run::new("kernels/sandbox/parent_environ.py"),
        Run::new("kernels/sandbox/tcp_connect.py").env("KG_FIXTURE_PORT", port.to_string()),
        Run::new("kernels/sandbox/write_pth.py"),
        Run::new("kernels/sandbox/write_checkout.py"),
        Run::new("kernels/sandbox/ptrace_parent.py"),
        Run::new("kernels/sandbox/widen_affinity.py"),
        Run::new("kernels/sandbox/poison_shared_cache.py"),
        Run::new("kernels/sandbox/poison_pch.py").env("KERNELGATE_PCH_DIR", pch_dir.clone()),
        Run::new("kernels/sandbox/poison_bytecode.py").env("KERNELGATE_PCH_DIR", pch_dir.clone()),
        Run::new("kernels/sandbox/poison_nvcc.py").env("KERNELGATE_PCH_DIR", pch_dir),
        // The gate itself as the way out.
        Run::new("kernels/sandbox/readback_symlink.py")
            .env("KG_FIXTURE_PATHS", secret.display().to_string()),
        Run::new("kernels/sandbox/daemon_forged_tag.py")
            .env("KG_FIXTURE_PIDFILE", pidfile_name.clone()),
        Run::new("kernels/sandbox/unix_socket.py")
            .env("KG_FIXTURE_SOCKET", socket_path.display().to_string()),
        Run::new("kernels/sandbox/unix_socket_native.py")
            .env("KG_FIXTURE_SOCKET", socket_path.display().to_string())
            .env("KG_FIXTURE_DGRAM", dgram_path.display().to_string()),
        Run::new("kernels/sandbox/read_opt.py").env(
            "KG_FIXTURE_PATHS",
            if opt_written {
                opt_secret.display().to_string()
            } else {
                String::new()
            },
        ),
        env_secrets,
        Run {
            inherit: Some((9, inherited.clone())),
            ..Run::new("kernels/sandbox/inherited_fd.py").env("KG_FIXTURE_FD", "9")
        },
        Run {
            keyed: false,
            ..Run::new("kernels/sandbox/other_builds.py").env(
                "TORCH_EXTENSIONS_DIR",
                torch_dir.path().display().to_string(),
            )
        },
        Run::new("kernels/honest_relu.py"),
        Run::new("kernels/beside/relu_with_table.py"),
        Run::new("kernels/sandbox/profiled_relu.py"),
    ];
    // Escapes and honest kernels side by side, a few jobs at a time: all 25 at once on a loaded
    // two-core machine left an honest job past its run limit (what is tested is the sandbox, not
    // how many torch processes a small machine can start at once). The FIFO job, which waits
    // out its limit, goes first.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(&str, i32, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..JOBS_AT_ONCE)
            .map(|_| {
                let (dir, next, runs) = (checkout.path(), &next, &runs);
                s.spawn(move || {
                    let mut done = Vec::new();
                    while let Some(run) = runs.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let (code, v) = eval_in(dir, run);
                        done.push((run.kernel, code, v));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    results.sort_by_key(|(kernel, ..)| runs.iter().position(|r| r.kernel == *kernel));
    stop.store(true, Ordering::SeqCst);
    let received = listening.join().unwrap();
    let unix_received = unix_listening.join().unwrap();
    let dgram_received = dgram_listening.join().unwrap();
    let pth_written = pth.exists();
    if pth_written {
        let _ = std::fs::remove_file(&pth);
    }
    if opt_written {
        let _ = std::fs::remove_dir_all(&opt_dir);
    }

    for (kernel, code, v) in &results {
        let name = Path::new(kernel).file_stem().unwrap().to_str().unwrap();
        let stdout = v["stdout_tail"].as_str().unwrap_or_default();
        assert!(!stdout.contains("STOLEN"), "{name} stole: {stdout}");
        assert!(
            !stdout.contains(FAKE_TOKEN),
            "{name} saw the token: {stdout}"
        );
        match name {
            "read_outside" => {
                assert!(
                    !stdout.contains("outside-secret-8086")
                        && !stdout.contains("checkout-secret-5150")
                );
                assert_blocked_and_reported(
                    name,
                    *code,
                    v,
                    &format!("read {}", std::fs::canonicalize(&secret).unwrap().display()),
                );
                assert_blocked_and_reported(
                    name,
                    *code,
                    v,
                    &format!(
                        "read {}",
                        std::fs::canonicalize(&checkout_file).unwrap().display()
                    ),
                );
            }
            "parent_environ" => {
                assert!(stdout.contains("blocked"), "{stdout}");
                assert_blocked_and_reported(name, *code, v, "environ");
            }
            "tcp_connect" => {
                assert!(!stdout.contains("CONNECTED"), "{stdout}");
                assert_blocked_and_reported(
                    name,
                    *code,
                    v,
                    &format!("connect a network socket to ('127.0.0.1', {port})"),
                );
            }
            "write_pth" => {
                assert!(!pth_written, "the candidate wrote {}", pth.display());
                assert_blocked_and_reported(name, *code, v, "kg_sandbox_escape.pth");
            }
            "write_checkout" => {
                assert!(
                    !checkout.path().join("PWNED.txt").exists(),
                    "the candidate wrote into the checkout"
                );
                assert!(stdout.contains("blocked"), "{stdout}");
                assert_blocked_and_reported(name, *code, v, "/cwd/PWNED.txt");
            }
            "ptrace_parent" => {
                assert!(
                    stdout.contains("ptrace=-1 errno=1"),
                    "ptrace must fail with EPERM: {stdout}"
                );
                assert_blocked_and_reported(name, *code, v, "call ptrace() through ctypes");
            }
            "widen_affinity" => {
                for route in ["os", "posix", "pthread"] {
                    assert!(
                        stdout.contains(&format!("{route}=denied errno=1")),
                        "{route}: the CPU mask must not change (EPERM): {stdout}"
                    );
                }
                assert_blocked_and_reported(name, *code, v, "change its CPU affinity");
                assert_blocked_and_reported(
                    name,
                    *code,
                    v,
                    "call pthread_setaffinity_np() through ctypes",
                );
            }
            "poison_shared_cache" => {
                let planted =
                    root().join("target/kernelgate-test-torch-extensions/kg_planted_build");
                assert!(
                    !planted.exists(),
                    "the candidate wrote into the shared extensions cache"
                );
                assert!(stdout.contains("blocked"), "{stdout}");
                assert_blocked_and_reported(name, *code, v, "kg_planted_build");
            }
            "poison_pch" => assert_pch_root_kept(
                name,
                *code,
                v,
                stdout,
                (&gch.join("O0.gch"), "trusted header", "O0.gch"),
                &pch.path().join("kg_planted_entry"),
            ),
            "poison_bytecode" => assert_pch_root_kept(
                name,
                *code,
                v,
                stdout,
                (&pyc, "trusted bytecode", "kg_trusted.cpython-311.pyc"),
                &pch.path().join("bytecode/kg_planted.cpython-311.pyc"),
            ),
            "poison_nvcc" => assert_pch_root_kept(
                name,
                *code,
                v,
                stdout,
                (&wrapper, "trusted wrapper", "kg_nvcc-0123456789ab.py"),
                &pch.path().join("nvcc/kg_nvcc-planted.py"),
            ),
            "readback_symlink" => {
                // Nothing of the secret anywhere in the result: not in the output tails (read
                // through kernelgate's own descriptors: the candidate's own lines), not as the
                // phase of the crash.
                assert!(
                    !v.to_string().contains("outside-secret-8086"),
                    "the secret was copied into the result: {v:#}"
                );
                assert!(
                    stdout.contains("the candidate's own stdout line")
                        && stdout.contains("links in place"),
                    "{v:#}"
                );
                let stderr = v["stderr_tail"].as_str().unwrap_or_default();
                assert!(stderr.contains("the candidate's own stderr line"), "{v:#}");
                // The candidate's process ended with status 3: the judge says so.
                assert_eq!(v["outcome"]["kind"], "crash", "{v:#}");
                assert!(
                    v["outcome"]["reason"]
                        .as_str()
                        .unwrap()
                        .contains("status 3"),
                    "{v:#}"
                );
                assert_eq!(v["sandbox"], "full", "{v:#}");
                assert_eq!(*code, 1);
            }
            "progress_fifo" => {
                // The FIFO in place, the run limit fired all the same (the watchdog did not).
                assert!(stdout.contains("FIFO in place"), "{v:#}");
                assert_eq!(v["outcome"]["kind"], "timeout", "{v:#}");
                assert_eq!(v["sandbox"], "full", "{v:#}");
                assert_eq!(*code, 1);
            }
            "daemon_forged_tag" => {
                let pid = std::fs::read_to_string(&pidfile)
                    .expect("the daemon started and wrote its pid");
                let stat = format!("/proc/{}/stat", pid.trim());
                // Gone, or a zombie waiting for init to reap it: not running either way.
                let running = std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z "));
                assert!(!running, "the daemon {} outlived its job", pid.trim());
                // It would mark itself alive 4 s after it started: with the judge's workers a job
                // can outlast that, so only a mark made after the job ended (here) counts.
                let ended = std::time::SystemTime::now();
                let started = std::fs::metadata(&pidfile).unwrap().modified().unwrap();
                while started.elapsed().unwrap_or_default() < Duration::from_secs(5) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                let alive = pidfile.with_extension("pid.alive");
                let marked_after = std::fs::metadata(&alive)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t > ended);
                assert!(
                    !marked_after,
                    "the daemon was still running after its job ended"
                );
                let _ = std::fs::remove_file(&pidfile);
                assert!(
                    v["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|f| f["rule"] == "eval/stray-process"),
                    "{v:#}"
                );
                assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
                assert_eq!(*code, 1);
            }
            "unix_socket" => {
                assert!(!stdout.contains("CONNECTED"), "{stdout}");
                assert_blocked_and_reported(name, *code, v, "open a UNIX socket");
            }
            "unix_socket_native" => {
                // Through libc no audit event sees the attempts: seccomp alone stops them. The
                // socket the CUDA driver makes at its start (seqpacket) is still made.
                assert!(!stdout.contains("CONNECTED"), "{stdout}");
                assert!(stdout.contains("SEQPACKET_MADE"), "{stdout}");
                assert_eq!(stdout.matches("blocked connect").count(), 2, "{stdout}");
                assert!(stdout.contains("blocked socket(SOCK_DGRAM)"), "{stdout}");
                assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
            }
            "read_opt" => {
                assert!(!stdout.contains("LISTED"), "{stdout}");
                assert!(!stdout.contains("opt-secret-6502"), "{stdout}");
                assert_blocked_and_reported(name, *code, v, "list /opt");
                if opt_written {
                    assert_blocked_and_reported(
                        name,
                        *code,
                        v,
                        &format!("read {}", opt_secret.display()),
                    );
                }
            }
            "env_secrets" => {
                assert!(stdout.contains("environment read:"), "{v:#}");
                assert!(!stdout.contains("kg-secret-"), "{stdout}");
                assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
                assert_eq!(*code, 0, "{v:#}");
            }
            "inherited_fd" => {
                assert_eq!(
                    std::fs::read_to_string(&inherited).unwrap(),
                    "",
                    "the candidate wrote through kernelgate's inherited descriptor"
                );
                assert!(stdout.contains("blocked 9 errno 9"), "{stdout}");
                assert_eq!(v["outcome"]["kind"], "passed", "{v:#}");
                assert_eq!(*code, 0, "{v:#}");
            }
            "other_builds" => {
                assert_eq!(
                    std::fs::read_to_string(&victim).unwrap(),
                    "trusted build",
                    "the candidate replaced another extension's build"
                );
                assert!(!torch_dir.path().join("kg_planted_ext").exists());
                assert!(
                    stdout.contains("blocked") && !stdout.contains("WROTE"),
                    "{stdout}"
                );
                assert_blocked_and_reported(name, *code, v, "kg_victim_ext.so");
            }
            "honest_relu" | "profiled_relu" | "relu_with_table" => {
                assert_eq!(v["outcome"]["kind"], "passed", "{name}: {v:#}");
                assert_eq!(v["sandbox"], "full", "{name}: {v:#}");
                assert!(sandbox_findings(v).is_empty(), "{name}: {v:#}");
                assert_eq!(*code, 0, "{name}: {v:#}");
            }
            other => panic!("unexpected fixture {other}"),
        }
    }
    assert!(
        received.is_empty(),
        "the listener saw a connection: {received:?}"
    );
    assert!(
        unix_received.is_empty(),
        "the UNIX socket's server saw a connection: {unix_received:?}"
    );
    assert!(
        dgram_received.is_empty(),
        "the UNIX datagram server got a message: {dgram_received:?}"
    );
    assert_eq!(results.len(), runs.len());
}

#[test]
fn switched_off_the_row_says_so_and_the_escape_is_reported_as_not_blocked() {
    let checkout = tempfile::tempdir().unwrap();
    let (code, v) = eval_in(
        checkout.path(),
        &Run::new("kernels/sandbox/write_checkout.py").env("KERNELGATE_SANDBOX", "off"),
    );
    assert_eq!(v["sandbox"], "off", "{v:#}");
    // Unconfined, the write lands: exactly what the sandbox is for.
    assert!(checkout.path().join("PWNED.txt").exists());
    let found = sandbox_findings(&v);
    assert!(
        found
            .iter()
            .any(|m| m.contains("NOT blocked (sandbox off)")),
        "{found:?}"
    );
    assert_eq!(code, 1);
}

#[test]
fn a_bad_sandbox_mode_is_a_usage_error_naming_the_choices() {
    let out = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .current_dir(root())
        .env("KERNELGATE_PYTHON", python())
        .env("KERNELGATE_SANDBOX", "maybe")
        .args(["eval", "--problem", &fixture("problems/relu.py")])
        .args([
            "--kernel",
            &fixture("kernels/python_relu.py"),
            "--device",
            "cpu",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KERNELGATE_SANDBOX=maybe") && err.contains("`required`"),
        "{err}"
    );
}

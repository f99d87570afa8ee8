//! The sandbox around every candidate, end to end through `kernelgate eval` (real CLI, real
//! child, real torch on the CPU): each escape fixture under `tests/fixtures/eval/kernels/sandbox/`
//! is blocked (its side effect checked) and reported as an `eval/sandbox-denied` finding, while
//! honest kernels (C++ through load_inline, torch.profiler) pass in the same run.
//!
//! Needs the harness extension next to the CLI (`cargo build -p kernelgate-harness`) and a
//! Python with torch (`KERNELGATE_PYTHON` or `.venv`).

use crate::common::{python, root, test_extensions_dir};

use serde_json::Value;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const FAKE_TOKEN: &str = "ghs_kernelgateFakeToken0123456789";
const SANDBOX_RULE: &str = "eval/sandbox-denied";

fn fixture(rel: &str) -> String {
    root()
        .join("tests/fixtures/eval")
        .join(rel)
        .display()
        .to_string()
}

/// `kernelgate eval --format json` on the ReLU problem, run from `checkout` with a fake workflow
/// token in kernelgate's own environment.
fn eval_in(checkout: &Path, kernel: &str, env: &[(&str, String)]) -> (i32, Value) {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_kernelgate"));
    let ext = test_extensions_dir();
    let mut cmd = Command::new(exe);
    cmd.current_dir(checkout)
        .env("KERNELGATE_PYTHON", python())
        .env("GITHUB_TOKEN", FAKE_TOKEN)
        .env_remove("KERNELGATE_SANDBOX")
        .args(["eval", "--problem", &fixture("problems/relu.py")])
        .args(["--kernel", &fixture(kernel)])
        .args(["--device", "cpu", "--seed", "42", "--no-timing"])
        .args(["--format", "json", "--extensions-dir"])
        .arg(&ext);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run kernelgate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from kernelgate eval of {kernel} ({e}); stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
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

    let paths = format!("{}:{}", secret.display(), checkout_file.display());
    let port_s = port.to_string();
    let runs: Vec<(&str, Vec<(&str, String)>)> = vec![
        (
            "kernels/sandbox/read_outside.py",
            vec![("KG_FIXTURE_PATHS", paths)],
        ),
        ("kernels/sandbox/parent_environ.py", vec![]),
        (
            "kernels/sandbox/tcp_connect.py",
            vec![("KG_FIXTURE_PORT", port_s)],
        ),
        ("kernels/sandbox/write_pth.py", vec![]),
        ("kernels/sandbox/write_checkout.py", vec![]),
        ("kernels/sandbox/ptrace_parent.py", vec![]),
        ("kernels/sandbox/widen_affinity.py", vec![]),
        ("kernels/sandbox/poison_shared_cache.py", vec![]),
        (
            "kernels/sandbox/poison_pch.py",
            vec![("KERNELGATE_PCH_DIR", pch.path().display().to_string())],
        ),
        (
            "kernels/sandbox/poison_bytecode.py",
            vec![("KERNELGATE_PCH_DIR", pch.path().display().to_string())],
        ),
        (
            "kernels/sandbox/poison_nvcc.py",
            vec![("KERNELGATE_PCH_DIR", pch.path().display().to_string())],
        ),
        ("kernels/honest_relu.py", vec![]),
        ("kernels/beside/relu_with_table.py", vec![]),
        ("kernels/sandbox/profiled_relu.py", vec![]),
    ];
    // One run: the jobs go at once, escapes and honest kernels side by side.
    let results: Vec<(&str, i32, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .iter()
            .map(|(k, env)| {
                let dir = checkout.path();
                s.spawn(move || {
                    let (code, v) = eval_in(dir, k, env);
                    (*k, code, v)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    stop.store(true, Ordering::SeqCst);
    let received = listening.join().unwrap();
    let pth_written = pth.exists();
    if pth_written {
        let _ = std::fs::remove_file(&pth);
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
}

#[test]
fn switched_off_the_row_says_so_and_the_escape_is_reported_as_not_blocked() {
    let checkout = tempfile::tempdir().unwrap();
    let (code, v) = eval_in(
        checkout.path(),
        "kernels/sandbox/write_checkout.py",
        &[("KERNELGATE_SANDBOX", "off".into())],
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

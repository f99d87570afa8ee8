//! `kernelgate --version`: the version, the commit it was built from and the harness ABI, and
//! where this kernelgate finds its harness (issue #20: the wheel's `kernelgate` must say which
//! harness it runs).

use kernelgate_eval::protocol::HARNESS_PROTOCOL;
use std::process::Command;

fn kernelgate(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .args(args)
        .env_remove("KERNELGATE_HARNESS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn short_version_names_version_commit_and_harness_abi() {
    let v = kernelgate(&["-V"]);
    let line = v.trim();
    assert!(
        line.starts_with(&format!(
            "kernelgate {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
    assert!(
        line.ends_with(&format!("harness abi3-py39, protocol {HARNESS_PROTOCOL})")),
        "{line}"
    );
}

#[test]
fn long_version_says_where_the_harness_and_python_are() {
    let v = kernelgate(&["--version"]);
    let lines: Vec<&str> = v.lines().collect();
    assert_eq!(
        lines[0],
        format!("kernelgate {}", env!("CARGO_PKG_VERSION"))
    );
    assert!(lines[1].starts_with("commit: "), "{v}");
    assert_eq!(
        lines[2],
        format!("harness: kernelgate_harness (abi3-py39, protocol {HARNESS_PROTOCOL})")
    );
    // A cargo build finds the harness cdylib beside the binary (target/<profile>/).
    let beside = std::path::Path::new(env!("CARGO_BIN_EXE_kernelgate"))
        .with_file_name("libkernelgate_harness.so");
    if beside.is_file() {
        assert_eq!(
            lines[3],
            format!("harness module: {}", beside.display()),
            "{v}"
        );
    } else {
        assert!(lines[3].starts_with("harness module: "), "{v}");
    }
    assert!(lines[4].starts_with("python: "), "{v}");
}

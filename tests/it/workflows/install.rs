//! How the action installs kernelgate and its harness: release binary, wheel, a build of the
//! checkout, or one already in the Python.

use super::*;

#[test]
fn action_fails_clearly_without_rust_or_torch() {
    let bin = tempfile::tempdir().unwrap();
    // No cargo on PATH: only the shell's basics.
    for tool in ["bash", "cat", "cut", "sed", "sha256sum", "tr"] {
        if let Ok(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.path().join(tool)).unwrap();
        }
    }
    let mut run = ActionRun::new(&[("install", "source")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: no Rust toolchain::"),
        "{log}"
    );
    assert!(log.contains("rustup"), "{log}");
    assert!(
        log.contains("drop 'install: source'"),
        "the message names the way without Rust: {log}"
    );
    // The default installs a release: no Rust toolchain needed for publishing.
    let mut run = ActionRun::new(&[("command", "publish")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("prereq", "method"), "binary");

    // cargo present, but the interpreter has no torch.
    write_executable(
        &bin.path().join("cargo"),
        "#!/bin/bash\necho 'cargo 1.0.0'\n",
    );
    write_executable(
        &bin.path().join("python-no-torch"),
        "#!/bin/bash\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n",
    );
    let mut run = ActionRun::new(&[("python", "python-no-torch")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: no torch::"),
        "{log}"
    );
    assert!(
        log.contains("python-no-torch"),
        "the message names the interpreter: {log}"
    );

    let mut run = ActionRun::new(&[("python", "/no/such/python")]);
    let (code, log) = run.step("prereq", &bin.path().display().to_string());
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: Python not found::"),
        "{log}"
    );
}

#[test]
fn action_makes_the_built_harness_importable_or_says_why_not() {
    let harness = root().join("target/debug/libkernelgate_harness.so");
    assert!(
        harness.is_file(),
        "{} is missing: `cargo build -p kernelgate-harness` (scripts/test.sh builds the workspace first)",
        harness.display()
    );
    let python = std::env::var("KERNELGATE_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    let bin = tempfile::tempdir().unwrap();
    // A stand-in cargo: "builds" by copying the real harness (or garbage) into target/release.
    write_executable(
        &bin.path().join("cargo"),
        "#!/bin/bash\necho \"$@\" > cargo-args\nmkdir -p target/release\ntouch target/release/kernelgate\ncp \"$FAKE_HARNESS\" target/release/libkernelgate_harness.so\n",
    );
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );

    let mut run = ActionRun::new(&[("python", &python), ("install", "source")]);
    run.runner_env
        .push(("FAKE_HARNESS".into(), harness.display().to_string()));
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 0, "{log}");
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        read(&run.dir.path().join("cargo-args")).trim(),
        "build --release --locked -p kernelgate -p kernelgate-harness"
    );
    let lib = run
        .dir
        .path()
        .join("target/release/libkernelgate_harness.so");
    assert_eq!(run.output("build", "harness"), lib.display().to_string());
    assert!(!run.output("build", "python").is_empty());
    assert!(run
        .output("build", "bin")
        .ends_with("target/release/kernelgate"));

    // A module Python cannot load: the step fails and says which interpreter and why.
    let garbage = run.dir.path().join("garbage.so");
    std::fs::write(&garbage, "not an ELF file").unwrap();
    let mut run = ActionRun::new(&[("python", &python), ("install", "source")]);
    run.runner_env
        .push(("FAKE_HARNESS".into(), garbage.display().to_string()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: harness module not importable::"),
        "{log}"
    );
    assert!(log.contains(&python), "{log}");
}

/// The workspace version in Cargo.toml: what the action installs by default.
fn workspace_version() -> String {
    let cargo = read(&root().join("Cargo.toml"));
    let section = cargo.split("[workspace.package]").nth(1).unwrap();
    let line = section
        .lines()
        .find(|l| l.starts_with("version = "))
        .unwrap();
    line.trim_start_matches("version = ")
        .trim_matches('"')
        .to_owned()
}

#[test]
fn action_picks_the_install_method_and_version() {
    let path = std::env::var("PATH").unwrap();
    let python = std::env::var("KERNELGATE_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string());
    for (command, install, method) in [
        ("pr", "auto", "wheel"),
        ("baseline", "auto", "wheel"),
        ("publish", "auto", "binary"),
        ("merge", "auto", "binary"),
        ("publish", "wheel", "wheel"),
        ("pr", "binary", "binary"),
    ] {
        let mut run = ActionRun::new(&[
            ("command", command),
            ("install", install),
            ("python", &python),
        ]);
        let (code, log) = run.step("prereq", &path);
        assert_eq!(code, 0, "{command} {install}: {log}");
        assert_eq!(
            run.output("prereq", "method"),
            method,
            "{command} {install}"
        );
        assert_eq!(run.output("prereq", "version"), workspace_version());
        assert_eq!(
            run.output("prereq", "key"),
            "",
            "no cargo cache key without a cargo build"
        );
    }
    let mut run = ActionRun::new(&[("command", "publish"), ("version", "v9.8.7")]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("prereq", "version"), "9.8.7");

    let mut run = ActionRun::new(&[("command", "publish"), ("install", "conda")]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: bad install::"),
        "{log}"
    );
    assert!(log.contains("auto, wheel, binary or source"), "{log}");

    let mut run = ActionRun::new(&[("command", "publish"), ("version", "latest; rm -rf /")]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 2, "{log}");
    assert!(
        log.contains("::error title=kernelgate: bad version::"),
        "{log}"
    );
}

/// A stand-in `curl` that serves `-o FILE URL` from `$FAKE_RELEASE/<file name of URL>`, and
/// logs each URL.
fn fake_curl(dir: &Path) {
    write_executable(
        &dir.join("curl"),
        "#!/bin/bash\nout=\"\"\nfor a in \"$@\"; do [ \"$prev\" = -o ] && out=\"$a\"; prev=\"$a\"; url=\"$a\"; done\necho \"$url\" >> \"$RUNNER_TEMP/urls\"\ncp \"$FAKE_RELEASE/$(basename \"$url\")\" \"$out\" 2>/dev/null || { echo \"curl: (22) 404\" >&2; exit 22; }\n",
    );
}

#[test]
fn action_installs_the_release_binary_only_when_its_checksum_matches() {
    let version = workspace_version();
    let asset = format!("kernelgate-v{version}-x86_64-unknown-linux-musl.tar.gz");
    let release = tempfile::tempdir().unwrap();
    // The release: a "binary" that prints its version, packed as the release workflow packs it.
    let stage = tempfile::tempdir().unwrap();
    write_executable(
        &stage.path().join("kernelgate"),
        &format!("#!/bin/bash\necho 'kernelgate {version} (commit test)'\n"),
    );
    let tar = Command::new("tar")
        .args(["-czf"])
        .arg(release.path().join(&asset))
        .arg("-C")
        .arg(stage.path())
        .arg("kernelgate")
        .status()
        .unwrap();
    assert!(tar.success());
    let sum = Command::new("sha256sum")
        .arg(&asset)
        .current_dir(release.path())
        .output()
        .unwrap();
    let sum_text = String::from_utf8(sum.stdout).unwrap();
    std::fs::write(release.path().join(format!("{asset}.sha256")), &sum_text).unwrap();
    let digest = sum_text.split_whitespace().next().unwrap().to_owned();

    let bin = tempfile::tempdir().unwrap();
    fake_curl(bin.path());
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let install = |extra: &[(&str, &str)]| {
        let mut inputs = vec![("command", "publish"), ("install", "binary")];
        inputs.extend_from_slice(extra);
        let mut run = ActionRun::new(&inputs);
        run.runner_env
            .push(("FAKE_RELEASE".into(), release.path().display().to_string()));
        run.runner_env
            .push(("GITHUB_ACTION_REPOSITORY".into(), "acme/kernelgate".into()));
        run.runner_env
            .push(("GITHUB_SERVER_URL".into(), "https://github.com".into()));
        let (code, log) = run.step("prereq", &path);
        assert_eq!(code, 0, "{log}");
        let (code, log) = run.step("build", &path);
        (run, code, log)
    };

    let (run, code, log) = install(&[]);
    assert_eq!(code, 0, "{log}");
    let urls = read(&run.dir.path().join("urls"));
    assert!(
        urls.contains(&format!(
            "https://github.com/acme/kernelgate/releases/download/v{version}/{asset}"
        )),
        "{urls}"
    );
    let installed = run.output("build", "bin").to_owned();
    assert!(
        installed.ends_with("kernelgate-bin/kernelgate"),
        "{installed}"
    );
    assert!(log.contains("(verified)"), "{log}");

    // Pinned to the right digest: installed; to another: refused.
    let (_, code, log) = install(&[("binary-sha256", &digest)]);
    assert_eq!(code, 0, "{log}");
    let (run, code, log) = install(&[("binary-sha256", &"0".repeat(64))]);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: checksum mismatch::"),
        "{log}"
    );
    assert_eq!(run.output("build", "bin"), "", "no binary is handed on");

    // A tampered file: refused, whatever the release's checksum file says.
    std::fs::write(release.path().join(&asset), "not the release").unwrap();
    let (_, code, log) = install(&[]);
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("not running it"), "{log}");

    // No such release: the message says what to do.
    let (_, code, log) = install(&[("version", "0.0.1")]);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: cannot download the binary::"),
        "{log}"
    );
    assert!(log.contains("install: source"), "{log}");
}

#[test]
fn action_installs_the_wheel_into_the_given_python() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("venv-bin");
    std::fs::create_dir(&scripts).unwrap();
    // A stand-in interpreter: has torch, "installs" the wheel's script, imports the harness.
    let python = stand_in_python(dir.path(), &scripts, &version);
    let path = std::env::var("PATH").unwrap();
    let py = python.display().to_string();
    let mut run = ActionRun::new(&[("python", &py)]);
    let (code, log) = run.step("prereq", &path);
    assert_eq!(code, 0, "{log}");
    assert_eq!(run.output("prereq", "method"), "wheel");
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    let pip = read(&run.dir.path().join("pip-args"));
    assert!(pip.contains(&format!("kernelgate=={version}")), "{pip}");
    assert!(
        pip.contains("--only-binary :all:"),
        "never builds from source: {pip}"
    );
    assert_eq!(
        run.output("build", "bin"),
        scripts.join("kernelgate").display().to_string()
    );
    assert_eq!(run.output("build", "python"), py);
    assert_eq!(
        run.output("build", "harness"),
        "",
        "kernelgate finds the wheel's harness itself"
    );

    // A system Python that refuses pip (PEP 668): the message says to use a venv.
    std::fs::remove_file(scripts.join("kernelgate")).unwrap();
    let mut run = ActionRun::new(&[("python", &py)]);
    run.runner_env.push((
        "PIP_FAILS".into(),
        "error: externally-managed-environment".into(),
    ));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: cannot install the wheel::"),
        "{log}"
    );
    assert!(log.contains("virtual environment"), "{log}");
}

/// A stand-in interpreter for the install step: has torch and the harness, runs `-m pip` by
/// failing with `$PIP_FAILS` (or installing a `kernelgate` script into `scripts`), and answers
/// the scripts-directory query.
fn stand_in_python(dir: &Path, scripts: &Path, version: &str) -> PathBuf {
    let python = dir.join("python");
    write_executable(
        &python,
        &format!(
            "#!/bin/bash\nif [ \"$1 $2\" = '-m pip' ]; then echo \"$*\" >> \"$RUNNER_TEMP/pip-args\"\n  [ -n \"$PIP_FAILS\" ] && {{ echo \"$PIP_FAILS\" >&2; exit 1; }}\n  printf '#!/bin/bash\\necho kernelgate {version}\\n' > {s}/kernelgate; chmod +x {s}/kernelgate; exit 0; fi\ncase \"$2\" in *sysconfig*) [ -x {s}/kernelgate ] && echo {s}/kernelgate || echo;; *) ;; esac\nexit 0\n",
            s = scripts.display()
        ),
    );
    python
}

/// A stand-in cargo that records its arguments and leaves what `cargo build --release` would.
fn stand_in_cargo(bin: &Path) {
    write_executable(
        &bin.join("cargo"),
        "#!/bin/bash\necho \"$*\" >> \"$RUNNER_TEMP/cargo-args\"\nmkdir -p target/release\nprintf '#!/bin/bash\\necho kernelgate built\\n' > target/release/kernelgate\nchmod +x target/release/kernelgate\ntouch target/release/libkernelgate_harness.so\n",
    );
}

/// A PATH with the shell's basics and `extra` first, but no cargo.
fn path_without_cargo(extra: &Path) -> String {
    for tool in [
        "bash",
        "cat",
        "cut",
        "sed",
        "grep",
        "tail",
        "tr",
        "mkdir",
        "rm",
        "cp",
        "chmod",
        "touch",
        "printf",
        "sha256sum",
        "tar",
        "basename",
        "dirname",
        "head",
        "awk",
        "wc",
    ] {
        let link = extra.join(tool);
        if let (Ok(p), false) = (which(tool), link.exists()) {
            std::os::unix::fs::symlink(p, link).unwrap();
        }
    }
    extra.display().to_string()
}

#[test]
fn install_auto_builds_the_actions_checkout_when_the_version_is_not_released() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("venv-bin");
    std::fs::create_dir(&scripts).unwrap();
    let py = stand_in_python(dir.path(), &scripts, &version)
        .display()
        .to_string();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let no_release = format!("ERROR: Could not find a version that satisfies the requirement kernelgate=={version} (from versions: none)\nERROR: No matching distribution found for kernelgate=={version}");

    // No cargo either: the error names both ways out.
    let path = path_without_cargo(&bin);
    let mut run = ActionRun::new(&[("python", &py)]);
    run.runner_env
        .push(("PIP_FAILS".into(), no_release.clone()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: no release to install::"),
        "{log}"
    );
    assert!(
        log.contains("not on the package index")
            && log.contains("rustup")
            && log.contains("'version:'"),
        "{log}"
    );

    // With cargo: built from the action's checkout, with a notice, and the harness handed on.
    stand_in_cargo(&bin);
    let mut run = ActionRun::new(&[("python", &py)]);
    run.runner_env
        .push(("PIP_FAILS".into(), no_release.clone()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("::notice title=kernelgate: building from source::"),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "kernelgate=={version} is not on the package index"
        )),
        "{log}"
    );
    let cargo = read(&run.dir.path().join("cargo-args"));
    assert_eq!(
        cargo.trim(),
        "build --release --locked -p kernelgate -p kernelgate-harness"
    );
    assert!(
        run.output("build", "bin")
            .ends_with("target/release/kernelgate"),
        "{log}"
    );
    assert!(
        run.output("build", "harness")
            .ends_with("target/release/libkernelgate_harness.so"),
        "{log}"
    );

    // install: wheel asked for explicitly: no fallback, the wheel's own error.
    let mut run = ActionRun::new(&[("python", &py), ("install", "wheel")]);
    run.runner_env
        .push(("PIP_FAILS".into(), no_release.clone()));
    std::fs::remove_file(run.dir.path().join("cargo-args")).ok();
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("::error title=kernelgate: cannot install the wheel::"),
        "{log}"
    );
    assert!(
        !run.dir.path().join("cargo-args").exists(),
        "built although install: wheel"
    );

    // A binary for publishing that is not released: built from the checkout as well.
    let release = tempfile::tempdir().unwrap();
    fake_curl(&bin);
    let mut run = ActionRun::new(&[("command", "publish")]);
    run.runner_env
        .push(("FAKE_RELEASE".into(), release.path().display().to_string()));
    run.runner_env
        .push(("GITHUB_ACTION_REPOSITORY".into(), "acme/kernelgate".into()));
    run.step("prereq", &path);
    let (code, log) = run.step("build", &path);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("::notice title=kernelgate: building from source::"),
        "{log}"
    );
    assert!(log.contains("could not be downloaded"), "{log}");
    let cargo = read(&run.dir.path().join("cargo-args"));
    assert_eq!(
        cargo.trim(),
        "build --release --locked -p kernelgate",
        "publishing needs no harness"
    );
}

#[test]
fn install_auto_uses_a_kernelgate_of_its_version_already_in_the_python() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("venv-bin");
    std::fs::create_dir(&scripts).unwrap();
    let py = stand_in_python(dir.path(), &scripts, &version)
        .display()
        .to_string();
    let path = std::env::var("PATH").unwrap();
    for (installed, used) in [(version.clone(), true), ("0.0.1".to_string(), false)] {
        write_executable(
            &scripts.join("kernelgate"),
            &format!("#!/bin/bash\necho 'kernelgate {installed} (commit x)'\n"),
        );
        let mut run = ActionRun::new(&[("python", &py)]);
        run.step("prereq", &path);
        let (code, log) = run.step("build", &path);
        assert_eq!(code, 0, "{log}");
        let pip_ran = run.dir.path().join("pip-args").exists();
        assert_eq!(!pip_ran, used, "installed {installed}: {log}");
        assert_eq!(
            log.contains("::notice title=kernelgate: already installed::"),
            used,
            "{log}"
        );
        assert_eq!(
            run.output("build", "bin"),
            scripts.join("kernelgate").display().to_string()
        );
    }
}

/// A wheel of kernelgate `version` for pip: a `kernelgate` script that prints the version and a
/// `kernelgate_harness` module, built with the real `zipfile`; returns its path.
fn build_stand_in_wheel(dir: &Path, version: &str) -> PathBuf {
    let name = format!("kernelgate-{version}-py3-none-any.whl");
    let script = r#"
import sys, zipfile
path, version = sys.argv[1], sys.argv[2]
info = f"kernelgate-{version}.dist-info"
files = {
    "kg_stand_in.py": f"def main():\n    print('kernelgate {version} (stand-in)')\n",
    "kernelgate_harness.py": "",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: kernelgate\nVersion: {version}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    f"{info}/entry_points.txt": "[console_scripts]\nkernelgate = kg_stand_in:main\n",
}

with zipfile.ZipFile(path, "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
    z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n")
"#;
    let path = dir.join(name);
    let out = Command::new(crate::common::python())
        .args(["-c", script])
        .arg(&path)
        .arg(version)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

#[test]
fn install_refuses_a_wheel_whose_hash_is_not_the_committed_one() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir(&wheels).unwrap();
    let wheel = build_stand_in_wheel(&wheels, &version);
    let digest = {
        let out = Command::new("sha256sum").arg(&wheel).output().unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    };
    let install = |hashes: &str| {
        // A fresh interpreter each time, with the real pip and no index but the wheel's folder.
        let venv = tempfile::tempdir().unwrap();
        let made = Command::new(crate::common::python())
            .args(["-m", "venv"])
            .arg(venv.path())
            .status()
            .unwrap();
        assert!(made.success());
        let file = dir.path().join("release-hashes.txt");
        std::fs::write(&file, hashes).unwrap();
        let py = venv.path().join("bin/python").display().to_string();
        let mut run = ActionRun::new(&[
            ("python", &py),
            ("install", "wheel"),
            ("release-hashes", &file.display().to_string()),
        ]);
        run.runner_env.push(("PIP_NO_INDEX".into(), "1".into()));
        run.runner_env
            .push(("PIP_FIND_LINKS".into(), wheels.display().to_string()));
        // The interpreter has no torch: the prerequisites' outputs, as that step gives them.
        run.outputs.insert(
            "prereq".into(),
            [("method", "wheel"), ("version", version.as_str())]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        );
        let (code, log) = run.step("build", &std::env::var("PATH").unwrap());
        let installed = venv.path().join("bin/kernelgate").exists();
        (code, log, installed)
    };
    let name = wheel.file_name().unwrap().to_str().unwrap().to_owned();

    // The committed hash: installed, and the log says it was checked.
    let (code, log, installed) = install(&format!("# comment\n{version} {digest} {name}\n"));
    assert_eq!(code, 0, "{log}");
    assert!(installed, "{log}");
    assert!(
        log.contains(&format!(
            "checking the wheel against the 1 SHA-256 committed for {version}"
        )),
        "{log}"
    );

    // Another hash committed for this version (a tampered or replaced wheel): refused.
    let (code, log, installed) = install(&format!("{version} {} {name}\n", "0".repeat(64)));
    assert_eq!(code, 1, "{log}");
    assert!(!installed, "{log}");
    assert!(
        log.contains("::error title=kernelgate: checksum mismatch::"),
        "{log}"
    );
    assert!(log.contains("not installing it"), "{log}");

    // No hash committed for this version yet: the index's wheel, unchecked, as before.
    let (code, log, installed) = install(&format!("0.0.1 {} other.whl\n", "0".repeat(64)));
    assert_eq!(code, 0, "{log}");
    assert!(installed && !log.contains("checking the wheel"), "{log}");
}

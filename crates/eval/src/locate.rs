//! Finding the runner's Python, the built harness extension, and whether CUDA is present.

use std::path::{Path, PathBuf};

use crate::error::EvalError;

/// File name cargo gives the harness cdylib.
pub const HARNESS_LIB: &str = "libkernelgate_harness.so";

/// The Python that holds torch: `$KERNELGATE_PYTHON`, else the interpreter beside the running
/// executable (`pip install kernelgate` puts `kernelgate` in the `bin/` of the Python it was
/// installed into), else `<repo>/.venv/bin/python`, else `python3`.
pub fn find_python(repo: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("KERNELGATE_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = python_beside_exe() {
        return p;
    }
    let venv = repo.join(".venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// `python3` or `python` in the directory of the running executable, when the executable is an
/// installed `kernelgate` script (a cargo build in `target/<profile>/` has no interpreter beside it).
fn python_beside_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    ["python3", "python"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// The harness extension, first found of:
/// 1. `$KERNELGATE_HARNESS`;
/// 2. `libkernelgate_harness.so` next to the running executable or in its parent directory
///    (a cargo build: `target/<profile>/`, and `target/<profile>/deps/` test binaries);
/// 3. the installed `kernelgate` wheel: the `kernelgate_harness` package in the site-packages of
///    the environment whose `bin/` holds the executable (`<prefix>/lib/python3.*/site-packages`);
/// 4. the `kernelgate_harness` package as the runner's Python ([`find_python`]) resolves it.
pub fn find_harness() -> Result<PathBuf, EvalError> {
    if let Some(p) = std::env::var_os("KERNELGATE_HARNESS").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(EvalError::HarnessMissing { looked: vec![p] })
        };
    }
    let mut looked = Vec::new();
    let exe = std::env::current_exe().ok();
    if let Some(exe) = &exe {
        let mut dir = exe.parent().map(Path::to_path_buf);
        for _ in 0..2 {
            let Some(d) = dir else { break };
            let cand = d.join(HARNESS_LIB);
            if cand.is_file() {
                return Ok(cand);
            }
            looked.push(cand);
            dir = d.parent().map(Path::to_path_buf);
        }
        if let Some(prefix) = exe.parent().and_then(Path::parent) {
            let lib = prefix.join("lib");
            let mut site: Vec<PathBuf> = std::fs::read_dir(&lib)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                .map(|e| e.path().join("site-packages").join(HARNESS_PACKAGE))
                .collect();
            site.sort();
            for pkg in site {
                if let Some(so) = extension_in(&pkg) {
                    return Ok(so);
                }
            }
            looked.push(lib.join("python3.*/site-packages").join(HARNESS_PACKAGE));
        }
    }
    let python = find_python(Path::new("."));
    if let Some(so) = ask_python(&python) {
        return Ok(so);
    }
    looked.push(PathBuf::from(format!(
        "{} -c 'import {HARNESS_PACKAGE}'",
        python.display()
    )));
    Err(EvalError::HarnessMissing { looked })
}

/// The import name of the harness, and of its package in the `kernelgate` wheel.
pub const HARNESS_PACKAGE: &str = "kernelgate_harness";

/// The extension module file in an installed `kernelgate_harness` package directory
/// (`kernelgate_harness.abi3.so`, or a `kernelgate_harness.cpython-*.so`).
fn extension_in(pkg: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(pkg)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(HARNESS_PACKAGE) && name.ends_with(".so") && p.is_file()
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Where `python` would import the harness from, without importing it.
fn ask_python(python: &Path) -> Option<PathBuf> {
    let out = std::process::Command::new(python)
        .args([
            "-I",
            "-c",
            "import importlib.util as u; s = u.find_spec('kernelgate_harness'); print(s.origin if s and s.origin else '')",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let origin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if origin.as_os_str().is_empty() {
        return None;
    }
    match origin.file_name()?.to_str()? {
        "__init__.py" => extension_in(origin.parent()?),
        name if name.ends_with(".so") => Some(origin),
        _ => None,
    }
}

/// True when the CUDA driver library can be loaded: then the child may use the GPU and needs
/// a large virtual address space (so memory is watched by RSS instead of `RLIMIT_AS`).
pub fn libcuda_present() -> bool {
    // SAFETY: dlopen with a constant NUL-terminated name; the handle is closed right away.
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_package_directory_yields_its_extension_module() {
        let d = tempfile::tempdir().unwrap();
        let pkg = d.path().join(HARNESS_PACKAGE);
        std::fs::create_dir(&pkg).unwrap();
        std::fs::write(pkg.join("__init__.py"), "").unwrap();
        assert_eq!(extension_in(&pkg), None, "no .so: nothing found");
        std::fs::write(pkg.join("other.abi3.so"), "").unwrap();
        assert_eq!(
            extension_in(&pkg),
            None,
            "another module is not the harness"
        );
        std::fs::write(pkg.join("kernelgate_harness.abi3.so"), "").unwrap();
        assert_eq!(
            extension_in(&pkg),
            Some(pkg.join("kernelgate_harness.abi3.so"))
        );
    }

    #[test]
    fn missing_harness_error_names_the_build_command() {
        // The only test in this crate that touches KERNELGATE_HARNESS.
        std::env::set_var(
            "KERNELGATE_HARNESS",
            "/nonexistent/libkernelgate_harness.so",
        );
        let err = find_harness().unwrap_err().to_string();
        std::env::remove_var("KERNELGATE_HARNESS");
        assert!(err.contains("cargo build -p kernelgate-harness"), "{err}");
        assert!(err.contains("pip install kernelgate"), "{err}");
        assert!(
            err.contains("/nonexistent/libkernelgate_harness.so"),
            "{err}"
        );
    }
}

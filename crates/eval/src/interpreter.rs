//! What kernelgate needs to know of a job's interpreter, asked once per interpreter and without
//! importing torch (seconds): its version, the tag torch's build folders carry, and where torch
//! lies. The build store's key ([`crate::store::toolchain`]) and the extensions root's build
//! folder ([`crate::extensions`]) both read it here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InterpreterFacts {
    /// `sys.version`, on one line.
    pub version: String,
    /// `py<major><minor><abiflags>`, as `torch.utils.cpp_extension` names its build folders.
    pub build_tag: String,
    /// torch's package directory, where the interpreter would import it from.
    pub torch_dir: Option<PathBuf>,
}

/// The facts of `python`, `None` when it does not run. Cached for the process.
pub(crate) fn interpreter_facts(python: &Path) -> Option<InterpreterFacts> {
    static CACHE: OnceLock<Mutex<BTreeMap<PathBuf, Option<InterpreterFacts>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(python) {
        return v.clone();
    }
    let facts = ask(python);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(python.to_path_buf(), facts.clone());
    facts
}

fn ask(python: &Path) -> Option<InterpreterFacts> {
    let script = "import sys, importlib.util as u\n\
                  print(sys.version.replace('\\n', ' '))\n\
                  print(f\"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}\")\n\
                  s = u.find_spec('torch')\n\
                  print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')";
    let mut cmd = std::process::Command::new(python);
    cmd.args(["-c", script]).env_clear();
    // The environment a job's child gets: the same interpreter finds the same torch.
    for (k, v) in std::env::vars() {
        if crate::child::passes_to_child(&k) || k == "PYTHONPATH" {
            cmd.env(k, v);
        }
    }
    let out = cmd
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines().map(str::trim);
    let version = lines.next()?.to_string();
    let build_tag = lines.next()?.to_string();
    let torch_dir = lines.next().filter(|t| !t.is_empty()).map(PathBuf::from);
    Some(InterpreterFacts {
        version,
        build_tag,
        torch_dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interpreter_has_no_facts_and_a_real_one_names_its_version() {
        assert_eq!(
            interpreter_facts(Path::new("/nonexistent/kernelgate-python")),
            None
        );
        let python = std::env::var_os("KERNELGATE_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("python3"));
        let facts = interpreter_facts(&python).expect("the test interpreter runs");
        assert!(facts.version.starts_with('3'), "{facts:?}");
        assert!(facts.build_tag.starts_with("py3"), "{facts:?}");
        // Asked once: the second answer is the cached one.
        assert_eq!(interpreter_facts(&python), Some(facts));
    }
}

//! The runner's build store: compiled torch extensions kept across jobs, runs and pull
//! requests, content-addressed by everything their build read, and written only by kernelgate.
//!
//! A job never builds into the store. It builds into a staging directory of its own (in its
//! temporary directory, the one place its sandbox lets it write a build); when its build
//! succeeded under a sandbox that confines writes, kernelgate (this process, never the child)
//! copies the libraries it built into a new entry, writes the entry's manifest (the key's full
//! text, each file's size and SHA-256) and renames the entry into place in one step. The key is
//! [`StoreKey::for_build`]'s: the kernel's bytes and those of every file of its dependency set,
//! the problem's bytes, torch's `version.py`, the Python, the C++ compiler and nvcc as their
//! `--version` says, the environment a build reads (`TORCH_CUDA_ARCH_LIST`, `CXX`, flags) and
//! kernelgate's own build settings. A job that finds its key's entry loads it read-only (the
//! sandbox grants the entry read access only); an entry whose files do not match its manifest,
//! or whose manifest names another key, is removed and built again, never loaded.
//!
//! Where the store lives is the runner's setting ([`BUILD_STORE_ENV`]), never the repository's
//! `kernelgate.toml`: a pull request does not choose the store it is judged from.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The runner's setting: the store's directory, or `off` for builds kept per job.
pub const BUILD_STORE_ENV: &str = "KERNELGATE_BUILD_STORE";

/// The runner's setting: how large the store may grow, in GiB ([`DEFAULT_MAX_GIB`] unset).
pub const BUILD_STORE_MAX_GIB_ENV: &str = "KERNELGATE_BUILD_STORE_MAX_GIB";

/// A CUDA extension's entry is tens of MB: room for a few thousand builds.
pub const DEFAULT_MAX_GIB: f64 = 50.0;

/// An entry used more recently than this is never evicted, whatever the store's size: a job of
/// this run (or of one beside it) may be about to load it.
const EVICT_IDLE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The manifest's file name in an entry; written last, before the entry is renamed into place.
const MANIFEST: &str = "MANIFEST.json";

/// The layout of entries and keys; a new one never reads an older store's entries.
const FORMAT: u32 = 1;

/// What went wrong with the store itself (never the candidate's fault).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("build store {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("build store: {0} names no extension library to keep")]
    NothingBuilt(PathBuf),
    #[error("build store: extension name {0:?} is not a plain name")]
    BadName(String),
    #[error(
        "{BUILD_STORE_MAX_GIB_ENV}={0:?} is not a size: give the store's largest size in GiB \
         (a positive number, such as 50), or unset it for {DEFAULT_MAX_GIB} GiB"
    )]
    BadLimit(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The runner's build store ([`BuildStore::for_runner`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildStore {
    root: PathBuf,
}

/// The key of one build: its full text (kept in the entry's manifest) and its digest (the
/// entry's directory name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreKey {
    text: String,
    digest: String,
}

/// What a job found in the store for one build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A verified entry: load it read-only.
    Hit(PathBuf),
    /// No entry: build, then publish.
    Miss,
    /// An entry that did not match its manifest or key (why): removed; build, then publish.
    Corrupt(String),
}

/// Where a job's build came from, as its result reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "from")]
pub enum StoreUse {
    /// Loaded from the store: nothing compiled.
    Store,
    /// Compiled by this job and published into the store.
    Built,
    /// Compiled by this job, and not published (why: the sandbox did not confine writes, the
    /// build failed, ...).
    BuiltNotKept { why: String },
    /// The store's entry was corrupt (why): removed, compiled again and published.
    Rebuilt { why: String },
}

impl StoreUse {
    /// Compiled in this job.
    pub fn compiled(&self) -> bool {
        !matches!(self, StoreUse::Store)
    }
}

impl BuildStore {
    /// The store at `root`, made when missing (readable and writable by this user only).
    pub fn open(root: impl Into<PathBuf>) -> Result<BuildStore, StoreError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(io(&root))?;
        let root = std::fs::canonicalize(&root).map_err(io(&root))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700));
        let store = BuildStore { root };
        store.sweep(std::time::Duration::from_secs(24 * 3600));
        Ok(store)
    }

    /// Removes what a kernelgate process that died mid-publish (or mid-removal) left: its
    /// `.incoming-*` and `.removed-*` directories older than `age`. Never an entry.
    fn sweep(&self, age: std::time::Duration) {
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|d| d >= age));
            if old && (name.starts_with(".incoming-") || name.starts_with(".removed-")) {
                self.remove(&e.path());
            }
        }
    }

    /// Removes the least recently used entries (their directory's time, set by each hit) while
    /// the store's entries hold more than `max_bytes`, never one used within `idle`. Returns
    /// how many it removed.
    fn evict(&self, max_bytes: u64, idle: std::time::Duration) -> usize {
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return 0;
        };
        let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = rd
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| {
                let used = e.metadata().ok()?.modified().ok()?;
                Some((used, entry_bytes(&e.path()), e.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|(_, bytes, _)| bytes).sum();
        entries.sort();
        let mut removed = 0;
        for (used, bytes, path) in entries {
            if total <= max_bytes || used.elapsed().map_or(true, |age| age < idle) {
                break;
            }
            self.remove(&path);
            total = total.saturating_sub(bytes);
            removed += 1;
        }
        removed
    }

    /// The runner's largest store size in bytes: `$KERNELGATE_BUILD_STORE_MAX_GIB`, else
    /// [`DEFAULT_MAX_GIB`].
    fn max_bytes_for_runner() -> Result<u64, StoreError> {
        max_bytes(std::env::var(BUILD_STORE_MAX_GIB_ENV).ok().as_deref())
    }

    /// The runner's store: `$KERNELGATE_BUILD_STORE`, else `kernelgate/builds` in
    /// `$XDG_CACHE_HOME` or `~/.cache`; `None` when it is `off` or no home is known. Opening it
    /// evicts the least recently used builds beyond `$KERNELGATE_BUILD_STORE_MAX_GIB`.
    pub fn for_runner() -> Result<Option<BuildStore>, StoreError> {
        let max_bytes = Self::max_bytes_for_runner()?;
        let store = Self::at_runner_root()?;
        if let Some(store) = &store {
            store.evict(max_bytes, EVICT_IDLE);
        }
        Ok(store)
    }

    fn at_runner_root() -> Result<Option<BuildStore>, StoreError> {
        let var = |v: &str| std::env::var_os(v).filter(|x| !x.is_empty());
        let root = match var(BUILD_STORE_ENV) {
            Some(dir) if dir == "off" => return Ok(None),
            Some(dir) => PathBuf::from(dir),
            None => match var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
            {
                Some(cache) => cache.join("kernelgate").join("builds"),
                None => return Ok(None),
            },
        };
        BuildStore::open(root).map(Some)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of `key`'s entry (present or not).
    pub fn entry(&self, key: &StoreKey) -> PathBuf {
        self.root.join(&key.digest)
    }

    /// `key`'s entry when it is whole: its manifest names this key and every file it lists,
    /// with its size and SHA-256, and the entry holds nothing else. A corrupt or partial entry
    /// is removed.
    pub fn lookup(&self, key: &StoreKey) -> Lookup {
        let entry = self.entry(key);
        match std::fs::symlink_metadata(&entry) {
            Err(_) => return Lookup::Miss,
            Ok(m) if !m.is_dir() => {
                let why = "the entry is not a directory".to_string();
                self.remove(&entry);
                return Lookup::Corrupt(why);
            }
            Ok(_) => {}
        }
        match verify(&entry, key) {
            Ok(()) => {
                // The entry's time says when it was last used: eviction takes the oldest first.
                let _ = std::fs::File::open(&entry)
                    .and_then(|d| d.set_modified(std::time::SystemTime::now()));
                Lookup::Hit(entry)
            }
            Err(why) => {
                self.remove(&entry);
                Lookup::Corrupt(why)
            }
        }
    }

    /// Publishes the libraries a job built into `staging` (torch's layout: `<name>/<name>.so`
    /// for each of `names`) as `key`'s entry: copied into a new directory of the store, listed
    /// in its manifest, made read-only and renamed into place in one step. Regular files only
    /// (a link in the staging directory is never followed). An entry of the same key already
    /// in place (another job published it first) is kept. Returns the entry.
    pub fn publish(
        &self,
        key: &StoreKey,
        staging: &Path,
        names: &[String],
    ) -> Result<PathBuf, StoreError> {
        let incoming = tempfile::Builder::new()
            .prefix(".incoming-")
            .tempdir_in(&self.root)
            .map_err(io(&self.root))?;
        let mut files = Vec::new();
        for name in names {
            if !crate::extensions::is_plain_name(name) {
                return Err(StoreError::BadName(name.clone()));
            }
            // torch's build directory of the extension, as it is flat: the sources torch wrote
            // (a hit's import compares them and writes nothing), the objects, the library.
            let from_dir = staging.join(name);
            let library = from_dir.join(format!("{name}{LIB_EXT}"));
            if !std::fs::symlink_metadata(&library).is_ok_and(|m| m.is_file()) {
                return Err(StoreError::NothingBuilt(library));
            }
            let to_dir = incoming.path().join(name);
            std::fs::create_dir_all(&to_dir).map_err(io(&to_dir))?;
            for e in std::fs::read_dir(&from_dir).map_err(io(&from_dir))? {
                let e = e.map_err(io(&from_dir))?;
                let file = e.file_name().to_string_lossy().into_owned();
                // Regular files only: a link is never followed; torch's lock is not the build's.
                if file == "lock" || !e.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                let to = to_dir.join(&file);
                std::fs::copy(e.path(), &to).map_err(io(&to))?;
                let (size, sha) = digest_file(&to).map_err(io(&to))?;
                files.push(ManifestFile {
                    path: format!("{name}/{file}"),
                    size,
                    sha256: sha,
                });
            }
        }
        if files.is_empty() {
            return Err(StoreError::NothingBuilt(staging.to_path_buf()));
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = Manifest {
            format: FORMAT,
            key: key.text.clone(),
            files,
        };
        let path = incoming.path().join(MANIFEST);
        let text = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
        write_synced(&path, &text).map_err(io(&path))?;
        read_only(incoming.path());
        let entry = self.entry(key);
        let kept = incoming.keep();
        match std::fs::rename(&kept, &entry) {
            Ok(()) => Ok(entry),
            Err(e) => {
                // Another job of the same key published first (the directory is there and not
                // empty): keep theirs once it verifies, else report.
                self.remove(&kept);
                match self.lookup(key) {
                    Lookup::Hit(entry) => Ok(entry),
                    _ => Err(StoreError::Io {
                        path: entry,
                        source: e,
                    }),
                }
            }
        }
    }

    /// Moves `dir` out of the way, then deletes it (entries are read-only: made writable first).
    fn remove(&self, dir: &Path) {
        let aside = self
            .root
            .join(format!(".removed-{:016x}", rand::random::<u64>()));
        let target = if std::fs::rename(dir, &aside).is_ok() {
            aside
        } else {
            dir.to_path_buf()
        };
        writable(&target);
        if std::fs::remove_dir_all(&target).is_err() {
            let _ = std::fs::remove_file(&target);
        }
    }
}

/// torch's library suffix on Linux.
const LIB_EXT: &str = ".so";

#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    format: u32,
    key: String,
    files: Vec<ManifestFile>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    path: String,
    size: u64,
    sha256: String,
}

/// The size limit `setting` gives (`$KERNELGATE_BUILD_STORE_MAX_GIB`), in bytes.
fn max_bytes(setting: Option<&str>) -> Result<u64, StoreError> {
    let gib = match setting.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|g| g.is_finite() && *g > 0.0)
            .ok_or_else(|| StoreError::BadLimit(v.to_string()))?,
        None => DEFAULT_MAX_GIB,
    };
    Ok((gib * (1u64 << 30) as f64) as u64)
}

/// The bytes an entry's manifest lists (an entry without a readable one: what its files hold).
fn entry_bytes(entry: &Path) -> u64 {
    if let Some(m) = std::fs::read(entry.join(MANIFEST))
        .ok()
        .and_then(|t| serde_json::from_slice::<Manifest>(&t).ok())
    {
        return m.files.iter().map(|f| f.size).sum();
    }
    let mut total = 0;
    walk(entry, entry, &mut |rel, is_dir| {
        if !is_dir {
            total += std::fs::symlink_metadata(entry.join(rel)).map_or(0, |m| m.len());
        }
    });
    total
}

/// `Ok` when `entry` is exactly what its manifest lists, for `key`; else why not.
fn verify(entry: &Path, key: &StoreKey) -> Result<(), String> {
    let text = std::fs::read(entry.join(MANIFEST)).map_err(|e| format!("no manifest ({e})"))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| format!("unreadable manifest ({e})"))?;
    if manifest.format != FORMAT {
        return Err(format!("manifest format {}", manifest.format));
    }
    if manifest.key != key.text {
        return Err("the manifest names another key".into());
    }
    let mut listed = std::collections::BTreeSet::new();
    for f in &manifest.files {
        let rel = Path::new(&f.path);
        let plain = rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain {
            return Err(format!("the manifest lists {:?}", f.path));
        }
        let path = entry.join(rel);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() && m.len() == f.size => {}
            Ok(m) if m.is_file() => {
                return Err(format!(
                    "{} is {} bytes, not {} (truncated or replaced)",
                    f.path,
                    m.len(),
                    f.size
                ))
            }
            Ok(_) => return Err(format!("{} is not a regular file", f.path)),
            Err(e) => return Err(format!("{} is missing ({e})", f.path)),
        }
        let (_, sha) = digest_file(&path).map_err(|e| format!("{}: {e}", f.path))?;
        if sha != f.sha256 {
            return Err(format!("{} does not match its SHA-256", f.path));
        }
        listed.insert(f.path.clone());
    }
    // Nothing beside what the manifest lists (a library planted next to the built one).
    let mut extra = Vec::new();
    walk(entry, entry, &mut |rel, is_dir| {
        if !is_dir && rel != MANIFEST && !listed.contains(rel) {
            extra.push(rel.to_string());
        }
    });
    if let Some(x) = extra.first() {
        return Err(format!("{x} is not in the manifest"));
    }
    Ok(())
}

fn walk(root: &Path, dir: &Path, f: &mut dyn FnMut(&str, bool)) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        f(&rel, is_dir);
        if is_dir {
            walk(root, &path, f);
        }
    }
}

fn digest_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((size, hex::encode(hasher.finalize())))
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Files 0444 and directories 0555 under `dir` (and itself).
fn read_only(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut dirs = vec![dir.to_path_buf()];
    walk(dir, dir, &mut |rel, is_dir| {
        let p = dir.join(rel);
        if is_dir {
            dirs.push(p);
        } else {
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444));
        }
    });
    for d in dirs.iter().rev() {
        let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o555));
    }
}

/// Directories under `dir` writable again by their owner, so they can be deleted.
fn writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let mut dirs = Vec::new();
    walk(dir, dir, &mut |rel, is_dir| {
        if is_dir {
            dirs.push(dir.join(rel));
        }
    });
    for d in dirs {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    }
}

/// The environment variables a torch extension build reads (compiler, flags, architectures,
/// toolkit); `TORCH_CUDA_ARCH_LIST` is passed as the job gets it. Not `PATH`: what it decides
/// (the C++ compiler, nvcc) is in the key by version ([`toolchain`]), and a runner's or a
/// virtualenv's `PATH` differs between jobs that build the same thing.
const BUILD_ENV: &[&str] = &[
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "ROCM_HOME",
    "NVCC_APPEND_FLAGS",
    "NVCC_PREPEND_FLAGS",
    "NVCC_CCBIN",
];

/// What a build's key is made of besides its files: [`StoreKey::for_build`].
#[derive(Debug, Clone, Default)]
pub struct BuildSettings {
    /// The job's `TORCH_CUDA_ARCH_LIST` (`None`: unset).
    pub arch_list: Option<String>,
    /// kernelgate's own settings of the build, as `name=value` lines (nvcc's steps side by
    /// side, the precompiled header's directory).
    pub kernelgate: Vec<String>,
}

impl StoreKey {
    /// The key of the build of `build_key` (`kernelgate_model::deps::build_key`: the kernel's
    /// bytes and its dependency set's), against the problem `problem_bytes`, with the
    /// toolchain of `python` ([`toolchain`]) and `settings`. Computed by kernelgate from the
    /// job's own files, never from anything its process wrote.
    pub fn for_build(
        build_key: &str,
        problem_bytes: &[u8],
        python: &Path,
        settings: &BuildSettings,
    ) -> StoreKey {
        let sha = |b: &[u8]| hex::encode(Sha256::digest(b));
        let mut text = format!(
            "kernelgate-build-store {FORMAT}\nkernelgate {}\nprotocol {}\nsources {}\nproblem {}\n",
            env!("CARGO_PKG_VERSION"),
            crate::protocol::HARNESS_PROTOCOL,
            sha(build_key.as_bytes()),
            sha(problem_bytes),
        );
        text.push_str(&toolchain(python));
        text.push_str(&format!(
            "env TORCH_CUDA_ARCH_LIST={}\n",
            settings.arch_list.as_deref().unwrap_or("")
        ));
        for var in BUILD_ENV {
            if let Some(v) = std::env::var_os(var) {
                text.push_str(&format!("env {var}={}\n", v.to_string_lossy()));
            }
        }
        for s in &settings.kernelgate {
            text.push_str(&format!("kernelgate-setting {s}\n"));
        }
        StoreKey {
            digest: sha(text.as_bytes()),
            text,
        }
    }

    /// The key's full text (the entry's manifest holds it).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The key's SHA-256 (the entry's directory name).
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

/// The toolchain lines of a key, asked once per interpreter: the Python's version, torch's
/// `version.py` (its version, git commit, CUDA/ROCm) by its SHA-256, the C++ compiler's and
/// nvcc's `--version`. torch is not imported (seconds): the interpreter names where it lies.
pub fn toolchain(python: &Path) -> String {
    use std::collections::BTreeMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<BTreeMap<PathBuf, String>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(python) {
        return v.clone();
    }
    let facts = crate::interpreter::interpreter_facts(python).unwrap_or_default();
    let py = facts.version;
    let torch_version = facts
        .torch_dir
        .and_then(|t| std::fs::read(t.join("version.py")).ok())
        .map_or_else(|| "none".into(), |b| hex::encode(Sha256::digest(&b)));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    // The compiler the job's build finds: its PATH starts with the interpreter's directory.
    let cxx_found = python
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(&cxx))
        .filter(|p| !cxx.contains('/') && p.is_file())
        .map_or_else(|| cxx.clone(), |p| p.display().to_string());
    // Versions, not paths: two environments with the same Python and torch share builds.
    let text = format!(
        "python {py}\ntorch {torch_version}\ncxx {cxx} {}\nnvcc {}\n",
        first_lines(&cxx_found, &["--version"]),
        nvcc().map_or("none".into(), |n| format!(
            "{} {}",
            n.display(),
            first_lines(&n.display().to_string(), &["--version"])
        )),
    );
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(python.to_path_buf(), text.clone());
    text
}

/// nvcc as torch finds it: `$CUDA_HOME`/`$CUDA_PATH`, `nvcc` on `PATH`, `/usr/local/cuda`.
fn nvcc() -> Option<PathBuf> {
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(home).join("bin/nvcc"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(found) = std::env::split_paths(&path)
            .map(|d| d.join("nvcc"))
            .find(|p| p.is_file())
        {
            return Some(found);
        }
    }
    Some(PathBuf::from("/usr/local/cuda/bin/nvcc")).filter(|p| p.is_file())
}

/// A program's output, one line, or `missing`.
fn first_lines(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_else(|| "missing".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> StoreKey {
        StoreKey {
            text: text.into(),
            digest: hex::encode(Sha256::digest(text.as_bytes())),
        }
    }

    fn staged(dir: &Path, name: &str, bytes: &[u8]) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(format!("{name}/{name}.so")), bytes).unwrap();
        std::fs::write(dir.join(format!("{name}/build.ninja")), "rules").unwrap();
    }

    #[test]
    fn a_published_build_is_found_read_only_and_a_damaged_one_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let store = BuildStore::open(root.path().join("store")).unwrap();
        let staging = tempfile::tempdir().unwrap();
        staged(staging.path(), "kg_relu", b"\x7fELF library");
        let k = key("relu v1");
        assert_eq!(store.lookup(&k), Lookup::Miss);
        let entry = store
            .publish(&k, staging.path(), &["kg_relu".into()])
            .unwrap();
        assert_eq!(store.lookup(&k), Lookup::Hit(entry.clone()));
        // The build's directory is kept, read-only.
        assert!(entry.join("kg_relu/build.ninja").exists());
        let lib = entry.join("kg_relu/kg_relu.so");
        assert!(std::fs::metadata(&lib).unwrap().permissions().readonly());
        // Publishing the same key again keeps the entry.
        assert_eq!(
            store
                .publish(&k, staging.path(), &["kg_relu".into()])
                .unwrap(),
            entry
        );

        // Truncated: removed, a miss for the next job, which builds and publishes again.
        writable(&entry);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&lib)
            .unwrap()
            .set_len(3)
            .unwrap();
        assert!(matches!(store.lookup(&k), Lookup::Corrupt(why) if why.contains("truncated")));
        assert!(!entry.exists());
        assert_eq!(store.lookup(&k), Lookup::Miss);

        // Same size, other bytes; a file beside the build; no manifest: each is corrupt.
        let damage: [&dyn Fn(&Path); 3] = [
            &|e| std::fs::write(e.join("kg_relu/kg_relu.so"), b"\x7fELF librarx").unwrap(),
            &|e| std::fs::write(e.join("kg_relu/planted.so"), b"x").unwrap(),
            &|e| std::fs::remove_file(e.join(MANIFEST)).unwrap(),
        ];
        for d in damage {
            let entry = store
                .publish(&k, staging.path(), &["kg_relu".into()])
                .unwrap();
            writable(&entry);
            d(&entry);
            assert!(matches!(store.lookup(&k), Lookup::Corrupt(_)));
            assert_eq!(store.lookup(&k), Lookup::Miss);
        }
    }

    #[test]
    fn what_a_dead_publisher_left_is_swept_and_entries_are_not() {
        let root = tempfile::tempdir().unwrap();
        let store = BuildStore::open(root.path()).unwrap();
        let staging = tempfile::tempdir().unwrap();
        staged(staging.path(), "kg_relu", b"lib");
        let entry = store
            .publish(&key("a"), staging.path(), &["kg_relu".into()])
            .unwrap();
        let left = root.path().join(".incoming-dead");
        std::fs::create_dir_all(left.join("kg_relu")).unwrap();
        read_only(&left);
        store.sweep(std::time::Duration::ZERO);
        assert!(!left.exists());
        assert!(entry.is_dir());
        assert_eq!(store.lookup(&key("a")), Lookup::Hit(entry));
    }

    #[test]
    fn the_least_recently_used_builds_go_first_beyond_the_limit_and_never_a_recent_one() {
        let root = tempfile::tempdir().unwrap();
        let store = BuildStore::open(root.path()).unwrap();
        let staging = tempfile::tempdir().unwrap();
        staged(staging.path(), "kg_relu", &[7u8; 1000]);
        let day = std::time::Duration::from_secs(24 * 3600);
        let aged = |entry: &Path, days: u32| {
            let t = std::time::SystemTime::now() - day * days;
            std::fs::File::open(entry).unwrap().set_modified(t).unwrap();
        };
        let keys: Vec<StoreKey> = (0..4).map(|i| key(&format!("build {i}"))).collect();
        let entries: Vec<PathBuf> = keys
            .iter()
            .map(|k| {
                store
                    .publish(k, staging.path(), &["kg_relu".into()])
                    .unwrap()
            })
            .collect();
        let each = entry_bytes(&entries[0]);
        assert!(each >= 1000, "{each}");
        // Built 9, 8, 7 days ago and today; the oldest is then used: a hit makes it the newest.
        for (e, days) in entries.iter().zip([9, 8, 7]) {
            aged(e, days);
        }
        assert_eq!(store.lookup(&keys[0]), Lookup::Hit(entries[0].clone()));
        // Room for two: the two least recently used go (built 8 and 7 days ago).
        assert_eq!(store.evict(2 * each, day), 2);
        let present: Vec<bool> = entries.iter().map(|e| e.is_dir()).collect();
        assert_eq!(present, [true, false, false, true]);
        assert_eq!(store.lookup(&keys[1]), Lookup::Miss);
        // Over the limit, but both were used within the day: kept.
        assert_eq!(store.evict(0, day), 0);
        assert!(entries[0].is_dir() && entries[3].is_dir());
        // Within the limit: nothing goes, however old.
        aged(&entries[0], 30);
        assert_eq!(store.evict(2 * each, day), 0);
        assert_eq!(store.evict(each, day), 1);
        assert!(!entries[0].exists() && entries[3].is_dir());
    }

    #[test]
    fn the_runners_size_limit_is_a_positive_number_of_gib() {
        let default = (DEFAULT_MAX_GIB * (1u64 << 30) as f64) as u64;
        assert_eq!(max_bytes(None).unwrap(), default);
        assert_eq!(max_bytes(Some(" ")).unwrap(), default);
        assert_eq!(max_bytes(Some("0.5")).unwrap(), 1 << 29);
        for bad in ["-1", "0", "lots", "nan", "inf"] {
            let err = max_bytes(Some(bad)).unwrap_err().to_string();
            assert!(
                err.contains(BUILD_STORE_MAX_GIB_ENV) && err.contains("GiB"),
                "{err}"
            );
        }
    }

    #[test]
    fn an_entry_is_found_only_under_the_key_it_was_built_for() {
        let root = tempfile::tempdir().unwrap();
        let store = BuildStore::open(root.path()).unwrap();
        let staging = tempfile::tempdir().unwrap();
        staged(staging.path(), "kg_relu", b"lib");
        let (a, b) = (key("a"), key("b"));
        let entry = store
            .publish(&a, staging.path(), &["kg_relu".into()])
            .unwrap();
        // An entry moved (or copied) under another key's name is not that key's build.
        let other = store.entry(&b);
        std::fs::rename(&entry, &other).unwrap();
        assert!(matches!(store.lookup(&b), Lookup::Corrupt(why) if why.contains("another key")));
        // A name that is a path, a link instead of a library, nothing built: not published.
        assert!(matches!(
            store.publish(&a, staging.path(), &["../x".into()]),
            Err(StoreError::BadName(_))
        ));
        std::fs::create_dir_all(staging.path().join("kg_link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", staging.path().join("kg_link/kg_link.so"))
            .unwrap();
        assert!(store
            .publish(&a, staging.path(), &["kg_link".into()])
            .is_err());
        assert!(store.publish(&a, staging.path(), &[]).is_err());
        assert_eq!(store.lookup(&a), Lookup::Miss);
    }

    #[test]
    fn the_key_names_the_compiler_the_job_finds_by_version_and_never_the_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
        let fake = dir.path().join(cxx.rsplit('/').next().unwrap());
        std::fs::write(&fake, "#!/bin/sh\necho kernelgate-test-compiler 9.9\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let text = toolchain(&dir.path().join("python"));
        // A compiler beside the interpreter comes first on the job's PATH (a virtualenv's).
        assert_eq!(
            text.contains("kernelgate-test-compiler 9.9"),
            !cxx.contains('/'),
            "{text}"
        );
        let key = StoreKey::for_build(
            "src",
            b"problem",
            &dir.path().join("python"),
            &BuildSettings::default(),
        );
        assert!(!key.text().contains("env PATH="), "{}", key.text());
    }

    #[test]
    fn the_key_moves_with_sources_problem_architectures_and_settings() {
        let py = Path::new("/nonexistent/python");
        let s = BuildSettings::default();
        let base = StoreKey::for_build("src", b"problem", py, &s);
        assert_eq!(base, StoreKey::for_build("src", b"problem", py, &s));
        let arch = BuildSettings {
            arch_list: Some("9.0".into()),
            ..BuildSettings::default()
        };
        let flags = BuildSettings {
            kernelgate: vec!["nvcc_parallel=1".into()],
            ..BuildSettings::default()
        };
        for other in [
            StoreKey::for_build("src2", b"problem", py, &s),
            StoreKey::for_build("src", b"problem2", py, &s),
            StoreKey::for_build("src", b"problem", py, &arch),
            StoreKey::for_build("src", b"problem", py, &flags),
        ] {
            assert_ne!(base.digest(), other.digest(), "{}", other.text());
        }
    }
}

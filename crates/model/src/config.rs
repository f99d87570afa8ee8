//! `kernelgate.toml`: every section the pipeline reads, each with defaults so a repository
//! without a config file works. Unknown keys and bad values are errors that carry the file,
//! line and column of the offending key or value.

use crate::types::{Backend, Precision};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// File name looked up at the repository root.
pub const CONFIG_FILE: &str = "kernelgate.toml";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The OS error is in the message once (not also as a `source`, which `{:#}` repeats).
    #[error("cannot read config file {}: {}{}", path.display(), error.to_string(), io_hint(error))]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}:{line}:{column}: {message}\n  help: {help}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
        help: String,
    },
}

/// The whole configuration. Every field is public so later stages read `cfg.timing.threshold_pct`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub dataset: DatasetConfig,
    pub kernels: KernelsConfig,
    pub results: ResultsConfig,
    pub defaults: Defaults,
    pub lint: LintConfig,
    pub harness: HarnessConfig,
    pub timing: TimingConfig,
    pub policy: PolicyConfig,
    pub sandbox: SandboxConfig,
    pub history: HistoryConfig,
    /// Where the config was read from; `None` when defaults are used.
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// `[sandbox]`: the confinement of every candidate's child process (docs/sandbox.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// `false` runs candidates unconfined (debugging only; every row then says `sandbox: off`).
    pub enabled: bool,
    /// `true` makes a job fail when the kernel offers no sandbox (no Landlock).
    pub required: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            enabled: true,
            required: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatasetConfig {
    /// KernelBench-format tree, relative to the repository root.
    pub root: PathBuf,
    /// Overrides `root`: `hf:<owner>/<name>`, a `.parquet` file or a `.jsonl` file.
    pub source: Option<String>,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            root: PathBuf::from("KernelBench"),
            source: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KernelsConfig {
    /// Globs (relative to the repository root) that select candidate files.
    pub globs: Vec<String>,
    /// Glob → problem key (`"kernels/relu_*.py" = "level1/3_ReLU"`).
    pub mapping: BTreeMap<String, String>,
}

impl Default for KernelsConfig {
    fn default() -> Self {
        KernelsConfig {
            globs: vec!["kernels/**/*.py".to_string()],
            mapping: BTreeMap::new(),
        }
    }
}

/// `[history]`: the performance history of the default branch (docs/history.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// The history store (JSON Lines per hardware key), relative to the repository: the workflow
    /// checks the data branch out there. `pr` compares each base kernel with it when it exists.
    pub store: PathBuf,
    /// The published dashboard (`https://owner.github.io/repo/`): the PR comment and drift issues
    /// link each problem's plot. Empty: no links.
    pub dashboard_url: String,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            store: PathBuf::from(".kernelgate/history"),
            dashboard_url: String::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResultsConfig {
    /// Holds `timing/<HARDWARE>/baseline_time_torch.json` and friends.
    pub root: PathBuf,
}

impl Default for ResultsConfig {
    fn default() -> Self {
        ResultsConfig {
            root: PathBuf::from("results"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// CUDA when a GPU is present, else CPU.
    #[default]
    Auto,
    Cuda,
    Cpu,
}

impl Device {
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Auto => "auto",
            Device::Cuda => "cuda",
            Device::Cpu => "cpu",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Defaults {
    /// Precision of kernels that do not say otherwise.
    #[serde(deserialize_with = "de_precision")]
    pub precision: Precision,
    /// Backend of kernels that do not say otherwise; `None` infers it from the source.
    #[serde(deserialize_with = "de_backend")]
    pub backend: Option<Backend>,
    pub device: Device,
}

/// What a lint code is turned into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LintLevel {
    Error,
    Warning,
    Off,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct LintConfig {
    /// Rule code (`KG101`) → level; codes not listed keep the rule's own severity.
    #[serde(deserialize_with = "de_lint_codes")]
    pub severity: BTreeMap<String, LintLevel>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HarnessConfig {
    /// Python interpreter with torch; `None`: `kernelgate_eval::find_python` (`$KERNELGATE_PYTHON`,
    /// the one beside an installed `kernelgate`, `.venv/bin/python`, `python3`).
    pub python: Option<PathBuf>,
    #[serde(deserialize_with = "de_positive_u64")]
    pub compile_timeout_s: u64,
    #[serde(deserialize_with = "de_positive_u64")]
    pub run_timeout_s: u64,
    #[serde(deserialize_with = "de_positive_u64")]
    pub memory_limit_mb: u64,
    /// Correctness trials (KernelBench uses 5).
    #[serde(deserialize_with = "de_positive_u32")]
    pub trials: u32,
    /// Kernels built at once in the compile stage ahead of the GPUs; 0: one per CPU left after
    /// two per GPU and the CPU lanes, bounded by memory.
    pub build_workers: u32,
    /// On a GPU runner with 8 or more CPUs, CPU kernels are timed in lanes with CPUs of their
    /// own, beside the builds. `false`: one CPU lane on every CPU, after the builds.
    pub cpu_lanes: bool,
    /// Start the next kernel's process while the GPU evaluates the current one (its torch
    /// import and profiler warm-up hidden behind that eval). `false` starts each process only
    /// at its turn: slower, and what `scripts/gpu-reference-cause.sh` compares against.
    pub start_ahead: bool,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            python: None,
            compile_timeout_s: 300,
            run_timeout_s: 120,
            memory_limit_mb: 16384,
            trials: 5,
            build_workers: 0,
            cpu_lanes: true,
            start_ahead: true,
        }
    }
}

/// L2 cache state before each timed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum L2Mode {
    /// Flushed before every sample (KernelBench's behaviour).
    #[default]
    Cold,
    Warm,
}

impl L2Mode {
    /// As written in `kernelgate.toml`, the job and the baseline files.
    pub fn as_str(self) -> &'static str {
        match self {
            L2Mode::Cold => "cold",
            L2Mode::Warm => "warm",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingConfig {
    /// A change slower than this (percent) is a regression.
    #[serde(deserialize_with = "de_non_negative")]
    pub threshold_pct: f64,
    /// Sampling stops once the confidence interval half-width is below this (percent).
    #[serde(deserialize_with = "de_positive")]
    pub ci_target_pct: f64,
    /// Time budget per kernel for sampling, seconds.
    #[serde(deserialize_with = "de_positive")]
    pub budget_s: f64,
    pub warmup: u32,
    #[serde(deserialize_with = "de_positive_u32")]
    pub min_samples: u32,
    #[serde(deserialize_with = "de_positive_u32")]
    pub max_samples: u32,
    pub l2: L2Mode,
    /// Speedups above this factor are flagged (KernelBench uses 10x).
    #[serde(deserialize_with = "de_positive")]
    pub excessive_speedup: f64,
    /// Also compare against the torch.compile baseline.
    pub compile_baseline: bool,
    /// Cross-host tolerance for committed baselines (percent): the live reference is called
    /// stale against its stored time only beyond this. The live interleaved comparison judges.
    #[serde(deserialize_with = "de_non_negative")]
    pub baseline_tolerance_pct: f64,
    /// `kernelgate baseline` refuses to write a sample whose coefficient of variation (standard
    /// deviation over mean, percent) is above this: too noisy to compare against.
    #[serde(deserialize_with = "de_positive")]
    pub baseline_max_cv_pct: f64,
}

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig {
            threshold_pct: 2.0,
            ci_target_pct: 1.0,
            budget_s: 10.0,
            warmup: 3,
            min_samples: 10,
            max_samples: 200,
            l2: L2Mode::Cold,
            excessive_speedup: 10.0,
            compile_baseline: false,
            baseline_tolerance_pct: 10.0,
            baseline_max_cv_pct: 50.0,
        }
    }
}

/// What the gate observes about a kernel: the policy's one vocabulary. The configurable
/// conditions go in `[policy] fail_on` / `warn_on`; the last three always warn (docs/policy.md)
/// and cannot be configured. Flags on report rows carry these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    LintError,
    LintWarning,
    Unmapped,
    CompileError,
    Incorrect,
    Crash,
    Timeout,
    EscapedWork,
    Regression,
    ExcessiveSpeedup,
    ImplausibleTime,
    NoSpeedup,
    LowCustomShare,
    PartialReplacement,
    /// The pull request edits the kernel's reference problem.
    ReferenceChanged,
    /// Committed baselines that cannot be compared (another device, driver, problem version).
    BaselineMismatch,
    /// A warning of the harness's own checks (e.g. only the benchmark's input distribution passes).
    RuntimeWarning,
}

impl Condition {
    /// The conditions `[policy] fail_on` and `warn_on` may name.
    pub const ALL: [Condition; 14] = [
        Condition::LintError,
        Condition::LintWarning,
        Condition::Unmapped,
        Condition::CompileError,
        Condition::Incorrect,
        Condition::Crash,
        Condition::Timeout,
        Condition::EscapedWork,
        Condition::Regression,
        Condition::ExcessiveSpeedup,
        Condition::ImplausibleTime,
        Condition::NoSpeedup,
        Condition::LowCustomShare,
        Condition::PartialReplacement,
    ];

    /// Conditions that warn whatever the lists say.
    pub const ALWAYS_WARN: [Condition; 3] = [
        Condition::ReferenceChanged,
        Condition::BaselineMismatch,
        Condition::RuntimeWarning,
    ];

    /// Warnings a reviewer may acknowledge (a PR label, or `allow=` with a reason).
    pub const ACKNOWLEDGEABLE: [Condition; 2] =
        [Condition::ExcessiveSpeedup, Condition::ImplausibleTime];

    /// Observations about the problem rather than the kernel: nothing in a kernel can change
    /// them, so they are reported once per problem and are no kernel's verdict (a changed
    /// reference still keeps the run from a silent pass).
    pub const ABOUT_PROBLEM: [Condition; 1] = [Condition::ReferenceChanged];

    pub fn about_problem(self) -> bool {
        Condition::ABOUT_PROBLEM.contains(&self)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Condition::LintError => "lint_error",
            Condition::LintWarning => "lint_warning",
            Condition::Unmapped => "unmapped",
            Condition::CompileError => "compile_error",
            Condition::Incorrect => "incorrect",
            Condition::Crash => "crash",
            Condition::Timeout => "timeout",
            Condition::EscapedWork => "escaped_work",
            Condition::Regression => "regression",
            Condition::ExcessiveSpeedup => "excessive_speedup",
            Condition::ImplausibleTime => "implausible_time",
            Condition::NoSpeedup => "no_speedup",
            Condition::LowCustomShare => "low_custom_share",
            Condition::PartialReplacement => "partial_replacement",
            Condition::ReferenceChanged => "reference_changed",
            Condition::BaselineMismatch => "baseline_mismatch",
            Condition::RuntimeWarning => "runtime_warning",
        }
    }

    /// The condition named `name` (`excessive_speedup`), configurable or not.
    pub fn parse(name: &str) -> Option<Condition> {
        Condition::ALL
            .into_iter()
            .chain(Condition::ALWAYS_WARN)
            .find(|c| c.as_str() == name)
    }

    pub fn always_warns(self) -> bool {
        Condition::ALWAYS_WARN.contains(&self)
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Any of these fails the gate.
    pub fail_on: Vec<Condition>,
    /// Any of these is reported as a warning (the gate still passes).
    pub warn_on: Vec<Condition>,
    /// The op audit's custom share (percent of the forward's measured work) below which
    /// `low_custom_share` is raised: decoys, kernels that add zeros, vendor calls doing the op.
    pub custom_share_floor_pct: f64,
    /// Below this `partial_replacement` is raised, naming what PyTorch still does.
    pub custom_share_warn_pct: f64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        use Condition::*;
        PolicyConfig {
            fail_on: vec![
                LintError,
                Unmapped,
                CompileError,
                Incorrect,
                Crash,
                Timeout,
                EscapedWork,
                Regression,
                LowCustomShare,
            ],
            warn_on: vec![ExcessiveSpeedup, ImplausibleTime, PartialReplacement],
            custom_share_floor_pct: 1.0,
            custom_share_warn_pct: 50.0,
        }
    }
}

impl PolicyConfig {
    pub fn fails_on(&self, c: Condition) -> bool {
        self.fail_on.contains(&c)
    }
    pub fn warns_on(&self, c: Condition) -> bool {
        !self.fails_on(c) && self.warn_on.contains(&c)
    }

    /// Makes `c` fail the check (`true`) or only warn (`false`), whatever the lists said: a
    /// workflow's setting (`kernelgate pr --fail-on-regression`) over the judging config's.
    pub fn set_fails(&mut self, c: Condition, fail: bool) {
        self.fail_on.retain(|x| *x != c);
        self.warn_on.retain(|x| *x != c);
        if fail {
            self.fail_on.push(c);
        } else {
            self.warn_on.push(c);
        }
    }
}

fn io_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            "\n  help: give --config an existing file, or leave it out to use <repo>/kernelgate.toml (defaults when there is none)"
        }
        std::io::ErrorKind::PermissionDenied => "\n  help: make the file readable by this user",
        _ => "",
    }
}

impl Config {
    /// Load `explicit` (must exist) or `<repo_root>/kernelgate.toml` (optional; defaults without it).
    pub fn load(repo_root: &Path, explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => {
                let p = repo_root.join(CONFIG_FILE);
                if !p.exists() {
                    return Ok(Config::default());
                }
                p
            }
        };
        let text = std::fs::read_to_string(&path).map_err(|error| ConfigError::Io {
            path: path.clone(),
            error,
        })?;
        Config::parse(&text, &path)
    }

    /// Parse config text; `path` is used in error messages and stored in `Config::path`.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| {
            let help = help_for(e.message());
            invalid(text, path, e.span(), e.message().trim().to_string(), help)
        })?;
        cfg.path = Some(path.to_path_buf());
        cfg.validate(text, path)?;
        Ok(cfg)
    }

    /// Cross-field checks that a single value's deserializer cannot make.
    fn validate(&self, text: &str, path: &Path) -> Result<(), ConfigError> {
        if self.timing.min_samples > self.timing.max_samples {
            return Err(invalid(
                text,
                path,
                key_span(text, &["timing", "min_samples"])
                    .or_else(|| key_span(text, &["timing", "max_samples"])),
                format!(
                    "timing.min_samples ({}) is larger than timing.max_samples ({})",
                    self.timing.min_samples, self.timing.max_samples
                ),
                "make min_samples <= max_samples".into(),
            ));
        }
        let (floor, warn) = (
            self.policy.custom_share_floor_pct,
            self.policy.custom_share_warn_pct,
        );
        for (key, v) in [
            ("custom_share_floor_pct", floor),
            ("custom_share_warn_pct", warn),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return Err(invalid(
                    text,
                    path,
                    key_span(text, &["policy", key]),
                    format!("policy.{key} ({v}) is not a percentage"),
                    "give a value from 0 to 100 (percent of the forward's measured work)".into(),
                ));
            }
        }
        if floor > warn {
            return Err(invalid(
                text,
                path,
                key_span(text, &["policy", "custom_share_floor_pct"]),
                format!("policy.custom_share_floor_pct ({floor}) is above policy.custom_share_warn_pct ({warn})"),
                "make the floor (fail) at most the warning threshold".into(),
            ));
        }
        for (list, conditions) in [
            ("fail_on", &self.policy.fail_on),
            ("warn_on", &self.policy.warn_on),
        ] {
            if let Some(c) = conditions.iter().find(|c| c.always_warns()) {
                return Err(invalid(
                    text,
                    path,
                    key_span(text, &["policy", list]),
                    format!("`{c}` always warns and cannot be listed in policy.{list}"),
                    format!(
                        "remove it; the lists take {}",
                        Condition::ALL.map(Condition::as_str).join(", ")
                    ),
                ));
            }
        }
        for (glob, key) in &self.kernels.mapping {
            if let Err(e) = globset::Glob::new(glob) {
                return Err(invalid(
                    text,
                    path,
                    key_span(text, &["kernels", "mapping", glob]),
                    format!("invalid glob `{glob}` in [kernels.mapping]: {}", e.kind()),
                    "fix the glob pattern (e.g. \"kernels/relu/*.py\")".into(),
                ));
            }
            if crate::problem::parse_key(key).is_none() {
                return Err(invalid(
                    text,
                    path,
                    key_span(text, &["kernels", "mapping", glob]),
                    format!("[kernels.mapping] value `{key}` is not a problem key"),
                    "write the problem as `level<N>/<id>_<Name>`, e.g. \"level1/3_ReLU\"".into(),
                ));
            }
        }
        for glob in &self.kernels.globs {
            if let Err(e) = globset::Glob::new(glob) {
                return Err(invalid(
                    text,
                    path,
                    key_span(text, &["kernels", "globs"]),
                    format!("invalid glob `{glob}` in kernels.globs: {}", e.kind()),
                    "fix the glob pattern (e.g. \"kernels/**/*.py\")".into(),
                ));
            }
        }
        if let Some(src) = &self.dataset.source {
            if let Err(e) = crate::dataset::DatasetSpec::parse(src) {
                return Err(invalid(
                    text,
                    path,
                    key_span(text, &["dataset", "source"]),
                    e,
                    "use `hf:<owner>/<name>`, a .parquet file or a .jsonl file".into(),
                ));
            }
        }
        Ok(())
    }

    /// The dataset this config names: `[dataset] source` when set, else the `root` directory.
    pub fn dataset_spec(&self, repo_root: &Path) -> crate::dataset::DatasetSpec {
        match &self.dataset.source {
            Some(s) => crate::dataset::DatasetSpec::parse(s)
                .map(|spec| spec.relative_to(repo_root))
                .unwrap_or_else(|_| crate::dataset::DatasetSpec::Dir(join_repo(repo_root, s))),
            None => crate::dataset::DatasetSpec::Dir(join_repo(repo_root, &self.dataset.root)),
        }
    }

    /// `[results] root` resolved against the repository root.
    pub fn results_root(&self, repo_root: &Path) -> PathBuf {
        join_repo(repo_root, &self.results.root)
    }
}

/// `repo/path`, without a leading `./` when the repository is the current directory, so
/// paths in output read `KernelBench/level1/...`.
pub fn join_repo(repo_root: &Path, path: impl AsRef<Path>) -> PathBuf {
    if repo_root.as_os_str().is_empty() || repo_root == Path::new(".") {
        path.as_ref().to_path_buf()
    } else {
        repo_root.join(path)
    }
}

fn help_for(message: &str) -> String {
    if message.contains("unknown field") {
        "remove the key or fix its spelling; docs/config.md lists every key".into()
    } else if message.contains("unknown variant") {
        "use one of the values listed above".into()
    } else if message.contains("invalid type") {
        "give the value the type docs/config.md shows for this key".into()
    } else {
        "see docs/config.md for the format of kernelgate.toml".into()
    }
}

fn invalid(
    text: &str,
    path: &Path,
    span: Option<std::ops::Range<usize>>,
    message: String,
    help: String,
) -> ConfigError {
    let (line, column) = span.map(|s| line_col(text, s.start)).unwrap_or((1, 1));
    ConfigError::Invalid {
        path: path.to_path_buf(),
        line,
        column,
        message,
        help,
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit_once('\n')
        .map_or(before, |(_, rest)| rest)
        .chars()
        .count()
        + 1;
    (line, col)
}

/// Span of the key at `path` (table names, then the key), when the text spells it.
fn key_span(text: &str, path: &[&str]) -> Option<std::ops::Range<usize>> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    for (i, part) in path.iter().enumerate() {
        let (k, v) = table.iter().find(|(k, _)| k.get_ref().as_ref() == *part)?;
        if i + 1 == path.len() {
            return Some(k.span());
        }
        table = v.get_ref().as_table()?;
    }
    None
}

fn de_precision<'de, D: Deserializer<'de>>(d: D) -> Result<Precision, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

fn de_backend<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Backend>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

fn de_lint_codes<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, LintLevel>, D::Error> {
    let map = BTreeMap::<String, LintLevel>::deserialize(d)?;
    for code in map.keys() {
        let (letters, digits) = code.split_at(
            code.find(|c: char| c.is_ascii_digit())
                .unwrap_or(code.len()),
        );
        if letters.is_empty()
            || digits.is_empty()
            || !letters.chars().all(|c| c.is_ascii_uppercase())
            || !digits.chars().all(|c| c.is_ascii_digit())
        {
            return Err(serde::de::Error::custom(format!(
                "`{code}` is not a lint rule code (expected e.g. KG101)"
            )));
        }
    }
    Ok(map)
}

fn de_non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !v.is_finite() || v < 0.0 {
        return Err(serde::de::Error::custom(format!(
            "expected a number >= 0, found {v}"
        )));
    }
    Ok(v)
}

fn de_positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !v.is_finite() || v <= 0.0 {
        return Err(serde::de::Error::custom(format!(
            "expected a number > 0, found {v}"
        )));
    }
    Ok(v)
}

fn de_positive_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if v == 0 {
        return Err(serde::de::Error::custom("expected an integer > 0, found 0"));
    }
    Ok(v)
}

fn de_positive_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = u32::deserialize(d)?;
    if v == 0 {
        return Err(serde::de::Error::custom("expected an integer > 0, found 0"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("kernelgate.toml"))
    }

    fn err(text: &str) -> (usize, usize, String) {
        match parse(text).unwrap_err() {
            ConfigError::Invalid {
                line,
                column,
                message,
                ..
            } => (line, column, message),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn empty_file_gives_defaults() {
        let cfg = parse("").unwrap();
        assert_eq!(cfg.timing.threshold_pct, 2.0);
        assert_eq!(cfg.timing.max_samples, 200);
        assert_eq!(cfg.harness.trials, 5);
        assert_eq!(cfg.harness.compile_timeout_s, 300);
        assert_eq!(cfg.dataset.root, PathBuf::from("KernelBench"));
        assert_eq!(cfg.kernels.globs, vec!["kernels/**/*.py"]);
        assert_eq!(cfg.defaults.precision, Precision::Fp32);
        assert_eq!(cfg.defaults.backend, None);
        assert_eq!(cfg.defaults.device, Device::Auto);
        assert!(cfg.policy.fails_on(Condition::Regression));
        assert!(cfg.policy.warns_on(Condition::ExcessiveSpeedup));
        assert!(!cfg.policy.fails_on(Condition::ExcessiveSpeedup));
    }

    #[test]
    fn missing_file_gives_defaults_and_explicit_missing_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::load(dir.path(), None).unwrap();
        assert_eq!(cfg, Config::default());
        let e = Config::load(dir.path(), Some(&dir.path().join("nope.toml"))).unwrap_err();
        assert!(matches!(e, ConfigError::Io { .. }));
        assert!(e.to_string().contains("nope.toml"));
        // The OS error once, also through anyhow's `{:#}` chain, and what to do.
        let shown = format!("{:#}", anyhow_like(&e));
        assert_eq!(
            shown.matches("No such file or directory").count(),
            1,
            "{shown}"
        );
        assert!(
            shown.contains("help: give --config an existing file"),
            "{shown}"
        );
    }

    /// What `eprintln!("error: {err:#}")` prints for an error and its sources.
    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut src = e.source();
        while let Some(x) = src {
            s.push_str(&format!(": {x}"));
            src = x.source();
        }
        s
    }

    #[test]
    fn values_are_read() {
        let cfg = parse(
            r#"
[defaults]
precision = "bf16"
backend = "triton"
device = "cuda"
[timing]
threshold_pct = 5
l2 = "warm"
[lint.severity]
KG101 = "off"
KG203 = "warning"
[kernels.mapping]
"kernels/relu_*.py" = "level1/3_ReLU"
[policy]
fail_on = ["incorrect"]
"#,
        )
        .unwrap();
        assert_eq!(cfg.defaults.precision, Precision::Bf16);
        assert_eq!(cfg.defaults.backend, Some(Backend::Triton));
        assert_eq!(cfg.defaults.device, Device::Cuda);
        assert_eq!(cfg.timing.threshold_pct, 5.0);
        assert_eq!(cfg.timing.l2, L2Mode::Warm);
        assert_eq!(cfg.lint.severity["KG101"], LintLevel::Off);
        assert_eq!(cfg.kernels.mapping["kernels/relu_*.py"], "level1/3_ReLU");
        assert_eq!(cfg.policy.fail_on, vec![Condition::Incorrect]);
        assert!(!cfg.policy.fails_on(Condition::Regression));
    }

    #[test]
    fn baseline_tolerance_and_noise_limit_have_documented_defaults() {
        let cfg = parse("").unwrap();
        assert_eq!(cfg.timing.baseline_tolerance_pct, 10.0);
        assert_eq!(cfg.timing.baseline_max_cv_pct, 50.0);
        let cfg =
            parse("[timing]\nbaseline_tolerance_pct = 5\nbaseline_max_cv_pct = 25.0\n").unwrap();
        assert_eq!(cfg.timing.baseline_tolerance_pct, 5.0);
        assert_eq!(cfg.timing.baseline_max_cv_pct, 25.0);
        let doc = include_str!("../../../docs/config.md");
        assert!(doc.contains("| `baseline_tolerance_pct` | `10.0` |"));
        assert!(doc.contains("| `baseline_max_cv_pct` | `50.0` |"));
    }

    #[test]
    fn custom_share_thresholds_have_defaults_and_are_checked() {
        let cfg = parse("").unwrap();
        assert_eq!(cfg.policy.custom_share_floor_pct, 1.0);
        assert_eq!(cfg.policy.custom_share_warn_pct, 50.0);
        assert!(cfg.policy.fails_on(Condition::LowCustomShare));
        assert!(cfg.policy.warns_on(Condition::PartialReplacement));
        let cfg =
            parse("[policy]\ncustom_share_floor_pct = 5\ncustom_share_warn_pct = 30.0\n").unwrap();
        assert_eq!(
            (
                cfg.policy.custom_share_floor_pct,
                cfg.policy.custom_share_warn_pct
            ),
            (5.0, 30.0)
        );
        let (line, _, msg) = err("[policy]\ncustom_share_warn_pct = 150\n");
        assert_eq!(line, 2);
        assert!(msg.contains("not a percentage"), "{msg}");
        let (line, _, msg) = err("[policy]\ncustom_share_floor_pct = 60\n");
        assert_eq!(line, 2);
        assert!(msg.contains("above policy.custom_share_warn_pct"), "{msg}");
    }

    #[test]
    fn unknown_key_names_key_and_location() {
        let (line, col, msg) = err("[timing]\nthreshold_pct = 2.0\n  treshold = 3\n");
        assert_eq!((line, col), (3, 3));
        assert!(msg.contains("treshold"), "{msg}");
        let (line, col, msg) = err("[timin]\n");
        assert_eq!((line, col), (1, 2));
        assert!(msg.contains("timin"), "{msg}");
    }

    #[test]
    fn bad_values_point_at_the_value() {
        let (line, _, msg) = err("[defaults]\nprecision = \"fp8\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("fp8"), "{msg}");
        let (line, _, msg) = err("\n[timing]\nthreshold_pct = -1.0\n");
        assert_eq!(line, 3);
        assert!(msg.contains(">= 0"), "{msg}");
        let (line, _, msg) = err("[timing]\nl2 = \"tepid\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("tepid"), "{msg}");
        let (line, _, msg) = err("[policy]\nfail_on = [\"incorrect\", \"slow\"]\n");
        assert_eq!(line, 2);
        assert!(msg.contains("slow"), "{msg}");
        let (line, _, msg) = err("[harness]\ntrials = 0\n");
        assert_eq!(line, 2);
        assert!(msg.contains("> 0"), "{msg}");
        let (line, _, msg) = err("[lint.severity]\nKG101 = \"loud\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("loud"), "{msg}");
        let (_, _, msg) = err("[lint.severity]\nkg = \"off\"\n");
        assert!(msg.contains("not a lint rule code"), "{msg}");
        let (_, _, msg) = err("[timing]\nthreshold_pct = \"two\"\n");
        assert!(msg.contains("invalid type"), "{msg}");
    }

    #[test]
    fn always_warn_conditions_cannot_be_listed() {
        let e = parse("[policy]\nfail_on = [\"incorrect\", \"baseline_mismatch\"]\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`baseline_mismatch` always warns"), "{msg}");
        assert!(msg.contains("help: remove it"), "{msg}");
        for c in Condition::ALL.into_iter().chain(Condition::ALWAYS_WARN) {
            assert_eq!(Condition::parse(c.as_str()), Some(c));
        }
        assert!(Condition::ALWAYS_WARN.iter().all(|c| c.always_warns()));
        assert_eq!(Condition::parse("excesive_speedup"), None);
    }

    #[test]
    fn cross_field_and_mapping_errors_have_locations() {
        let (line, col, msg) = err("[timing]\nmin_samples = 50\nmax_samples = 20\n");
        assert_eq!((line, col), (2, 1));
        assert!(msg.contains("min_samples"), "{msg}");
        let (line, _, msg) = err("[kernels.mapping]\n\"k/*.py\" = \"relu\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("not a problem key"), "{msg}");
        let (line, _, msg) = err("[kernels.mapping]\n\"k/[.py\" = \"level1/3_ReLU\"\n");
        assert_eq!(line, 2);
        assert!(msg.contains("invalid glob"), "{msg}");
    }

    #[test]
    fn error_display_is_cargo_style() {
        let e = parse("[timing]\nbogus = 1\n").unwrap_err().to_string();
        assert!(e.starts_with("kernelgate.toml:2:1: "), "{e}");
        assert!(e.contains("help: "), "{e}");
    }
}

//! kernelgate-lint: the static reward-hack checker.
//!
//! `lint_file` parses a candidate with ruff's parser, runs the Python rules (`python`), the
//! embedded C++/CUDA rules (`embedded` + `cpp`) and the Triton rules (`triton`), then applies
//! `# kernelgate: allow=...` suppressions and `kernelgate.toml` severity overrides.

pub mod cpp;
pub mod docs;
pub mod embedded;
mod file_rules;
pub mod output;
pub mod python;
pub mod registry;
pub mod rule;
mod suppress;
pub mod triton;

pub use kernelgate_model::{Backend, Finding, Precision, Severity};
pub use python::reach::{reachable, Reachability};
pub use rule::{Context, LineIndex, RawFinding, Rule, RuleMeta};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A severity override from `[lint] severity` in `kernelgate.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeverityOrOff {
    Error,
    Warning,
    Off,
}

impl std::str::FromStr for SeverityOrOff {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Ok(SeverityOrOff::Error),
            "warning" | "warn" => Ok(SeverityOrOff::Warning),
            "off" | "allow" | "none" => Ok(SeverityOrOff::Off),
            other => Err(format!(
                "unknown severity `{other}` (expected error, warning or off)"
            )),
        }
    }
}

impl From<kernelgate_model::LintLevel> for SeverityOrOff {
    fn from(level: kernelgate_model::LintLevel) -> Self {
        use kernelgate_model::LintLevel;
        match level {
            LintLevel::Error => SeverityOrOff::Error,
            LintLevel::Warning => SeverityOrOff::Warning,
            LintLevel::Off => SeverityOrOff::Off,
        }
    }
}

/// `[lint] severity` of `kernelgate.toml` as the linter's overrides (every caller's one source).
pub fn severity_overrides(
    config: &kernelgate_model::LintConfig,
) -> BTreeMap<String, SeverityOrOff> {
    config
        .severity
        .iter()
        .map(|(rule, level)| (rule.clone(), SeverityOrOff::from(*level)))
        .collect()
}

/// How to lint one file.
#[derive(Debug, Clone, Default)]
pub struct LintOptions {
    /// The problem's precision; a `# kernelgate: ... precision=` directive in the file wins.
    pub precision: Precision,
    /// The declared backend (None: inferred from the file).
    pub backend: Option<Backend>,
    /// Rule code -> new severity (or off).
    pub severity_overrides: BTreeMap<String, SeverityOrOff>,
    /// The source of the reference problem the kernel solves, when its mapping resolves:
    /// `get_init_inputs()` decides which constructor branches are dead.
    pub problem_source: Option<String>,
    /// The kernel's directory on disk, where the files it loads are found (`lint_path` sets it;
    /// `None`: the directory of the shown path).
    pub dir: Option<std::path::PathBuf>,
    /// The repository's root on disk: the files a kernel is built from (`load(sources=...)`,
    /// the headers they include) are read from inside it only, and findings in them name them
    /// by their path from the shown kernel's directory. `None`: the kernel's directory.
    pub root: Option<std::path::PathBuf>,
}

/// Torch-op findings: PyTorch doing (part of) the work. They block only when the forward path
/// reaches no custom code that does work; next to a working kernel they are partial
/// replacement, a warning (the runtime op audit measures how much PyTorch still does).
pub const TORCH_OP_RULES: [&str; 4] = [
    Rule::KG101.code(),
    Rule::KG102.code(),
    Rule::KG104.code(),
    Rule::KG601.code(),
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LintError {
    #[error("unknown rule `{0}` in `[lint] severity` (run `kernelgate rule --all` for the list)")]
    UnknownRule(String),
}

/// Every rule, in code order.
pub fn rules() -> &'static [RuleMeta] {
    registry::RULES
}

/// The rule with this code (case-insensitive), if any.
pub fn rule(code: &str) -> Option<&'static RuleMeta> {
    registry::RULES
        .iter()
        .find(|r| r.code.eq_ignore_ascii_case(code))
}

/// The `KG000` finding of a file that is unreadable or not UTF-8: one finding on its own row,
/// so the rest of a run proceeds.
pub fn unreadable_finding(path: &str, err: &kernelgate_model::SourceError) -> Finding {
    let (line, column) = err.position();
    Finding {
        file: path.to_string(),
        line,
        column,
        end_line: line,
        end_column: column + 1,
        rule: Rule::KG000.code().into(),
        severity: Severity::Error,
        message: err.to_string(),
    }
}

/// Reads `path` and lints it, or gives the `KG000` finding of an unreadable or non-UTF-8 file.
/// Returns the source too (`None` when there is none).
pub fn lint_path(
    shown: &str,
    path: &std::path::Path,
    opts: &LintOptions,
) -> Result<(Vec<Finding>, Option<String>), LintError> {
    let mut opts = opts.clone();
    if opts.dir.is_none() {
        opts.dir = path.parent().map(std::path::Path::to_path_buf);
    }
    match kernelgate_model::read_source(path) {
        Ok(source) => Ok((lint_file(shown, &source, &opts)?, Some(source))),
        Err(e) => Ok((vec![unreadable_finding(shown, &e)], None)),
    }
}

/// Lint one candidate. A syntax error is a `KG000` finding, not an `Err`; `Err` means the options
/// are invalid. Findings are sorted by line and column.
pub fn lint_file(path: &str, source: &str, opts: &LintOptions) -> Result<Vec<Finding>, LintError> {
    for code in opts.severity_overrides.keys() {
        if rule(code).is_none() {
            return Err(LintError::UnknownRule(code.clone()));
        }
    }
    let directive = suppress::directive(source);
    let precision = directive.precision.unwrap_or(opts.precision);
    let backend = directive.backend.or(opts.backend);
    let ctx = Context::new(path, source, precision, backend);

    let parsed = match ruff_python_parser::parse_module(source) {
        Ok(parsed) => parsed,
        Err(err) => {
            let start = usize::from(err.location.start());
            let end = usize::from(err.location.end()).max(start);
            let raw = RawFinding::new(
                Rule::KG000,
                start..end,
                format!("syntax error: {}", err.error),
            );
            return Ok(finish(&ctx, vec![raw], opts));
        }
    };
    let module = parsed.syntax();
    let problem = opts
        .problem_source
        .as_deref()
        .and_then(|p| ruff_python_parser::parse_module(p).ok());
    // Built once: every pass below reads the same names, imports, reachability and facts.
    let model = python::SemanticModel::build(
        module,
        problem.as_ref().map(|p| p.syntax()),
        precision,
        source,
    );
    let py = python::check_full(&model, &ctx);
    let mut raws = py.findings;
    // What `forward` passes each extension function, over all its live call sites.
    let mut py_args: rustc_hash::FxHashMap<String, Vec<python::ArgKind>> = Default::default();
    for call in &py.ext_calls {
        let merged = py_args
            .entry(call.name.clone())
            .or_insert_with(|| call.args.clone());
        let n = merged.len().max(call.args.len());
        for k in 0..n {
            let (a, b) = (merged.get(k).copied(), call.args.get(k).copied());
            let kind = match (a, b) {
                (Some(python::ArgKind::Input), _) | (_, Some(python::ArgKind::Input)) => {
                    python::ArgKind::Input
                }
                (Some(python::ArgKind::Owned), Some(python::ArgKind::Owned)) => {
                    python::ArgKind::Owned
                }
                _ => python::ArgKind::Unknown,
            };
            if k < merged.len() {
                merged[k] = kind;
            } else {
                merged.push(kind);
            }
        }
    }
    // Embedded C++/CUDA (load_inline, and the files load(sources=...) names with the headers
    // they include, read inside the repository) and Triton.
    let shown = std::path::Path::new(path);
    let real = |p: std::path::PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    let files = opts
        .dir
        .clone()
        .or_else(|| shown.parent().map(std::path::Path::to_path_buf))
        .map(|d| {
            if d.as_os_str().is_empty() {
                std::path::PathBuf::from(".")
            } else {
                d
            }
        })
        .map(real)
        .map(|dir| embedded::FileSource {
            root: opts
                .root
                .clone()
                .map(real)
                .filter(|r| dir.starts_with(r))
                .unwrap_or_else(|| dir.clone()),
            dir,
            shown_dir: shown
                .parent()
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default(),
            kernel_name: shown
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        });
    let mut working: Vec<String> = Vec::new();
    let mut maybe_working: Vec<(String, String)> = Vec::new();
    for ext in embedded::extract_with(module, &model.imports, source, files.as_ref()) {
        let out = cpp::check_full(&ext, &ctx, &py_args);
        raws.extend(out.findings);
        working.extend(out.working_exports);
        maybe_working.extend(out.maybe_working_exports);
    }
    let tr = triton::check_triton_full(&model, &ctx);
    raws.extend(tr.findings);
    // Custom code that provably runs: a working extension function whose result forward uses,
    // or a working Triton kernel launched from live code. A call whose result is thrown away
    // is a decoy, not custom work.
    let custom = py
        .ext_calls
        .iter()
        .find(|c| c.result_used && working.contains(&c.name))
        .map(|c| format!("the extension function `{}`", c.name))
        .or_else(|| {
            tr.working_kernel_launched
                .then(|| "a Triton kernel".to_string())
        });
    let torch_ops = |r: &RawFinding| {
        TORCH_OP_RULES.contains(&r.code.code()) && r.severity.is_none() && !audit_blind(&r.message)
    };
    if let Some(what) = custom {
        for r in raws.iter_mut().filter(|r| torch_ops(r)) {
            r.severity = Some(Severity::Warning);
            r.message.push_str(&format!(" (a warning: forward also runs {what}, so this is partial replacement; the runtime op audit measures how much PyTorch still does)"));
        }
    } else if let Some(why) = custom_not_excluded(
        &model,
        &py.ext_calls,
        &working,
        &maybe_working,
        tr.has_working_kernel,
    ) {
        // "No custom code runs" is an error only when every path resolved.
        for r in raws.iter_mut().filter(|r| torch_ops(r)) {
            *r = r.clone().unproven(&why);
        }
    }
    let sup = suppress::Suppressions::collect(parsed.tokens(), source);
    raws.extend(directive.problems);
    raws.extend(sup.problems.iter().cloned());
    raws.retain(|r| !sup.allows(r.code.code(), ctx.lines.line_of(r.range.start)));
    Ok(finish(&ctx, raws, opts))
}

/// Why "`forward` runs no custom code" is not proven, when it is not: `forward` calls an
/// extension function that may launch a working kernel through a path the C++ analysis does not
/// follow, or a call on the forward path did not resolve while the file has custom code that
/// could do work (a working or maybe-working extension function, a Triton kernel that stores).
fn custom_not_excluded(
    model: &python::SemanticModel,
    ext_calls: &[python::ExtCall],
    working: &[String],
    maybe_working: &[(String, String)],
    triton_kernel: bool,
) -> Option<String> {
    let handed_on = ext_calls.iter().filter(|c| c.result_used).find_map(|c| {
        maybe_working
            .iter()
            .find(|(name, _)| *name == c.name)
            .map(|(name, why)| format!("`forward` calls the extension function `{name}`, and {why}, so custom code may run"))
    });
    if handed_on.is_some() {
        return handed_on;
    }
    let has_custom = !working.is_empty() || !maybe_working.is_empty() || triton_kernel;
    let why = model.reach.unresolved.why()?;
    has_custom.then(|| format!("{why}, so the file's custom code may run through it"))
}

/// Torch-op findings the runtime op audit cannot judge, so they stay errors: a compiler
/// (`torch.compile`, TorchScript) generates kernels the audit would count as the candidate's,
/// and host work (`.numpy()`, `.apply_()`) runs no GPU kernel at all.
fn audit_blind(message: &str) -> bool {
    [
        "torch.compile",
        "torch._dynamo",
        "torch._inductor",
        "torch.jit",
        "`.numpy()`",
        "`.apply_()`",
        "`.map_()`",
        "`.map2_()`",
        "`.tolist()`",
    ]
    .iter()
    .any(|c| message.contains(c))
}

/// Severity overrides, conversion to line/column, sorting and de-duplication.
fn finish(ctx: &Context, raws: Vec<RawFinding>, opts: &LintOptions) -> Vec<Finding> {
    let mut out: Vec<Finding> = raws
        .into_iter()
        .filter_map(|r| {
            let meta = r.code.meta();
            let severity = match opts.severity_overrides.get(meta.code) {
                Some(SeverityOrOff::Off) => return None,
                Some(SeverityOrOff::Error) => Severity::Error,
                Some(SeverityOrOff::Warning) => Severity::Warning,
                None => r.severity.unwrap_or(meta.severity),
            };
            if let Some(at) = r.file_at {
                // In a file the kernel loads (`relu.cu`): its own line and column.
                return Some(Finding {
                    file: at.file,
                    line: at.line,
                    column: at.column,
                    end_line: at.line,
                    end_column: at.end_column.max(at.column + 1),
                    rule: meta.code.to_string(),
                    severity,
                    message: r.message,
                });
            }
            let (line, column) = ctx.line_col(r.range.start);
            // The end is inclusive (the last character, as editors show it, like the model's
            // `Finding` says); an empty range still covers one character.
            let end = r.range.end.min(ctx.source.len());
            let (end_line, end_column) = if end > r.range.start {
                let mut last = end - 1;
                while last > r.range.start && !ctx.source.is_char_boundary(last) {
                    last -= 1;
                }
                ctx.line_col(last)
            } else {
                (line, column)
            };
            Some(Finding {
                file: ctx.path.to_string(),
                line,
                column,
                end_line,
                end_column,
                rule: meta.code.to_string(),
                severity,
                message: r.message,
            })
        })
        .collect();
    // The kernel's own findings first, then each loaded file's, by position.
    out.sort_by(|a, b| {
        (a.file != ctx.path, &a.file, a.line, a.column, &a.rule).cmp(&(
            b.file != ctx.path,
            &b.file,
            b.line,
            b.column,
            &b.rule,
        ))
    });
    out.dedup();
    out
}

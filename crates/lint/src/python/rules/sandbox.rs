//! KG304 `harness-introspection`, KG305 `forged-output`, KG306 `sandbox-abuse`: reaching
//! outside the kernel. Most spellings are module paths in the banned table (`tables.rs`,
//! reported by `banned.rs`); here are the checks that need the call's arguments.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    pub(super) fn tmp_like(&self, e: &Expr) -> bool {
        let t = self.text(e).to_ascii_lowercase();
        t.contains("tmp")
            || t.contains("temp")
            || t.contains("cache_dir")
            || t.contains("build_dir")
    }

    pub(super) fn check_open(&mut self, call: &ExprCall) {
        let args = &call.arguments.args;
        let Some(path) = args.first() else { return };
        let mode = args
            .get(1)
            .or_else(|| {
                call.arguments
                    .keywords
                    .iter()
                    .find(|k| k.arg.as_ref().is_some_and(|a| a == "mode"))
                    .map(|k| &k.value)
            })
            .and_then(|m| self.model.names.fold_str(m))
            .unwrap_or_else(|| "r".into());
        let fd = matches!(path, Expr::NumberLiteral(_));
        let dev = self
            .model
            .names
            .fold_str(path)
            .is_some_and(|p| p.starts_with("/dev/") || p.starts_with("/proc/"));
        if fd || dev {
            self.forged_output(
                range(call),
                "opens a raw file descriptor or device: can forge the result channel",
            );
        } else if mode.contains(['w', 'a', 'x', '+']) && !self.tmp_like(path) {
            self.sandbox_abuse(
                range(call),
                format!(
                    "writes a file outside a temporary directory (mode `{mode}`); use `tempfile`"
                ),
            );
        }
    }

    pub(super) fn result_like(&self, e: &Expr) -> bool {
        let text = match self.model.names.fold_str(e) {
            Some(s) => s,
            None => match e {
                Expr::FString(_) => self.text(e).to_string(),
                // "%s: %s" % ("speedup", 42) and "{}: {}".format("speedup", 42)
                Expr::BinOp(b) if b.op == Operator::Mod => {
                    let items: Vec<&Expr> = match b.right.as_ref() {
                        Expr::Tuple(t) => t.elts.iter().collect(),
                        other => vec![other],
                    };
                    self.format_like(&b.left, &items, '%')
                }
                Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.as_str() == "format") =>
                {
                    let Expr::Attribute(a) = c.func.as_ref() else {
                        return false;
                    };
                    let items: Vec<&Expr> = c.arguments.args.iter().collect();
                    self.format_like(&a.value, &items, '{')
                }
                Expr::Call(c) => {
                    return self
                        .model
                        .names
                        .qualify(&c.func)
                        .is_some_and(|q| q == "json.dumps")
                }
                _ => return false,
            },
        };
        // A key and a value, as a harness or a leaderboard prints them: `correct: True`,
        // `"speedup": 12`, `runtime_ms=0.01`. Prose ("compiled correctly") is not result-like.
        static RESULT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            regex::Regex::new(
                r#"(?i)\b(correct(ness)?|speedup|runtime(_ms)?|elapsed(_ms)?|passed|allclose|max_diff|avg_diff|time_ms|mean_ms|verdict|fast_[0-9p]+|compiled)\b["']?\s*[:=]"#,
            )
            .expect("static regex")
        });
        RESULT.is_match(&text) || text.trim_start().starts_with('{')
    }

    /// A format template with its placeholders filled from `items` (folded strings, or the
    /// argument's source text): enough to see the key/value shape of a result line.
    pub(super) fn format_like(&self, template: &Expr, items: &[&Expr], open: char) -> String {
        let Some(t) = self.model.names.fold_str(template) else {
            return String::new();
        };
        let mut vals = items.iter().map(|i| {
            self.model
                .names
                .fold_str(i)
                .unwrap_or_else(|| self.text(*i).to_string())
        });
        let mut out = String::with_capacity(t.len());
        let mut chars = t.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch != open {
                out.push(ch);
                continue;
            }
            // Skip the conversion spec: `%-8.3f` / `{0:>8}`.
            let close = if open == '%' { None } else { Some('}') };
            while let Some(&n) = chars.peek() {
                chars.next();
                match close {
                    Some(c) if n == c => break,
                    None if n.is_ascii_alphabetic() => break,
                    _ => {}
                }
            }
            out.push_str(&vals.next().unwrap_or_default());
        }
        out
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    pub(super) fn harness_introspection(
        &mut self,
        r: std::ops::Range<usize>,
        msg: impl Into<String>,
    ) {
        self.push(Rule::KG304, r, msg);
    }

    pub(super) fn forged_output(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG305, r, msg);
    }

    pub(super) fn sandbox_abuse(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG306, r, msg);
    }

    /// `.f_back`, `.__globals__`, ...: frames and other modules' state.
    pub(super) fn frame_attribute(&mut self, a: &ruff_python_ast::ExprAttribute) {
        let attr = a.attr.as_str();
        if matches!(
            attr,
            "f_back"
                | "f_locals"
                | "f_globals"
                | "__globals__"
                | "gi_frame"
                | "tb_frame"
                | "__subclasses__"
                | "__closure__"
        ) {
            self.harness_introspection(
                range(&a.attr),
                format!("`.{attr}` reaches into frames or other modules' state"),
            );
        }
    }

    /// `print(...)` of result-like text.
    pub(super) fn forged_print(&mut self, call: &ExprCall) {
        if call
            .arguments
            .args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
            .any(|a| self.result_like(a))
        {
            self.forged_output(
                range(call.func.as_ref()),
                "prints result-like text that could forge the harness's verdict",
            );
        }
    }

    /// `torch.save(obj, path)` outside a temporary directory.
    pub(super) fn torch_save(&mut self, call: &ExprCall) {
        if !call.arguments.args.get(1).is_some_and(|p| self.tmp_like(p)) {
            self.sandbox_abuse(
                range(call.func.as_ref()),
                "`torch.save` writes a file outside a temporary directory",
            );
        }
    }

    /// `path.write_text(...)`, `.unlink()`, ... on something that is not a module.
    pub(super) fn file_write_method(&mut self, call: &ExprCall) {
        if let Expr::Attribute(a) = call.func.as_ref() {
            let m = a.attr.as_str();
            let recv_is_module = self.model.names.qualify(&a.value).is_some();
            if !recv_is_module
                && matches!(
                    m,
                    "write_text" | "write_bytes" | "symlink_to" | "unlink" | "rmdir"
                )
                && !self.tmp_like(&a.value)
            {
                self.sandbox_abuse(
                    range(&a.attr),
                    format!("`.{m}()` writes or deletes files outside a temporary directory"),
                );
            }
        }
    }
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG304: RuleMeta = RuleMeta {
    code: "KG304",
    name: "harness-introspection",
    severity: Error,
    summary: "The candidate inspects the harness or the interpreter",
    error_when: "whenever the candidate reaches the interpreter's or the harness's state",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "Use of `gc`, `inspect`, `sys._getframe`, `sys.modules`, `sys.settrace`, `__main__`, `builtins`, `globals()`, frame attributes (`f_back`, `f_locals`, `__globals__`), stack walks (`traceback.extract_stack`), `psutil`, or the caching allocator's snapshots and raw blocks (`torch.cuda.memory_snapshot`, `caching_allocator_alloc`) lets a candidate find the reference outputs or the harness's state. Kernels never need them.",
    bad: "import gc\nref = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]",
    good: "# compute from the inputs you are given",
};

pub(crate) const KG305: RuleMeta = RuleMeta {
    code: "KG305",
    name: "forged-output",
    severity: Error,
    summary: "The candidate prints results or exits early",
    error_when: "whenever result-like text is printed or the process is ended",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "Writing result-like text to stdout/stderr (`print(\"correct: True\")`, also through `%` or `.format`, `sys.stdout.write`, `sys.stdout.buffer`), writing to raw file descriptors (`os.write`), or ending the process (`os._exit`, `sys.exit`, `exit()`, `os.kill`, `atexit`) can forge the harness's verdict. kernelgate reads results over its own channel, but the attempt is a hack.",
    bad: "print('{\"correct\": true, \"runtime_ms\": 0.01}')\nos._exit(0)",
    good: "return out",
};

pub(crate) const KG306: RuleMeta = RuleMeta {
    code: "KG306",
    name: "sandbox-abuse",
    severity: Error,
    summary: "Processes, ctypes, network or file writes outside temp",
    error_when: "whenever a process, native library, network or file write outside a temporary directory is reached",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "`subprocess`, `os.system`, `os.popen`, `os.exec*`, `os.spawn*`, `os.posix_spawn*`, `os.fork`, `ctypes`, `torch.ops.load_library`, the CUDA runtime or driver called from Python (`cuda.cudart`, `cuda.bindings`), `cffi`, `pip`, sockets and HTTP clients, deleting or moving files, and writing files outside a temporary directory reach outside the kernel's sandbox (install packages, call vendor libraries, overwrite the harness). Build kernels with `load_inline` and write scratch files under `tempfile`.",
    bad: "import subprocess\nsubprocess.run(['pip', 'install', 'fastlib'])",
    good: "ext = load_inline(name='k', cpp_sources=src, functions=['run'])",
};

//! KG402 `phase-detection`: behaviour that can tell the correctness check from the timed runs.
//! Call counters tested in a condition, the environment or argv read on the forward path (or at
//! import and branched on), clocks, reseeding. The live pass records counters and tested names;
//! `phase_branches` judges them once every live function is seen.

use super::*;
use crate::rule::RuleMeta;
use kernelgate_model::Severity::Error;

impl<'a, 'c> Checker<'a, 'c> {
    /// Every KG402 finding is raised here.
    pub(super) fn phase_detection(&mut self, r: std::ops::Range<usize>, msg: impl Into<String>) {
        self.push(Rule::KG402, r, msg);
    }

    /// Branches on what the live pass recorded: a name read from the environment at import,
    /// or a call counter (with where it is incremented). One finding per name.
    pub(super) fn phase_branches(
        &mut self,
        tests: Vec<(String, std::ops::Range<usize>)>,
        counters: Vec<(String, std::ops::Range<usize>)>,
    ) {
        let counter_names: HashMap<String, std::ops::Range<usize>> = counters.into_iter().collect();
        let mut seen = HashSet::default();
        for (name, r) in &tests {
            if self.env_names.contains(name) && seen.insert(name.clone()) {
                self.phase_detection(r.clone(), format!("branches on `{name}`, read from the environment or argv at import: behaviour can depend on the harness's phase"));
            }
        }
        for (name, r) in tests {
            if let Some(inc) = counter_names.get(&name) {
                if seen.insert(name.clone()) {
                    let (line, _) = self.ctx.line_col(inc.start);
                    self.phase_detection(r, format!("branches on call counter `{name}` (incremented on line {line}): phase detection"));
                }
            }
        }
    }

    /// `os.getenv(...)`, `torch.manual_seed(...)`, `time.perf_counter()` called on the forward
    /// path. True when `q` is one of them.
    pub(super) fn phase_call(&mut self, q: &str, fr: std::ops::Range<usize>) -> bool {
        if q == "os.getenv" || q == "os.environ.get" {
            self.phase_detection(
                fr,
                format!(
                    "reads `{q}` on the forward path: behaviour can depend on the harness's phase"
                ),
            );
        } else if is_seed(q) {
            self.phase_detection(fr, format!("`{q}` reseeds the random generator on the forward path: the harness's inputs can be regenerated and their outputs precomputed"));
        } else {
            return false;
        }
        true
    }

    pub(super) fn clock_call(&mut self, q: &str, fr: std::ops::Range<usize>) {
        self.phase_detection(fr, format!("reads the clock (`{q}`) on the forward path: behaviour can depend on when it is called"));
    }

    /// `from os import environ as E` ... `"X" in E`: a name bound to the environment.
    pub(super) fn env_name_read(&mut self, expr: &Expr, id: &str) {
        if let Some(q) = self.model.names.binding(id) {
            if is_env_path(q) && q != "os.getenv" && q != "os.getenvb" {
                let q = q.to_string();
                self.phase_detection(range(expr), format!("reads `{q}` on the forward path: behaviour can depend on the harness's phase"));
            }
        }
    }

    /// `os.environ[...]`, `sys.argv`: true when reported.
    pub(super) fn env_attribute_read(&mut self, expr: &Expr) -> bool {
        if let Some(q) = self.model.names.qualify(expr) {
            if under(&q, "os.environ") || under(&q, "os.environb") || under(&q, "sys.argv") {
                self.phase_detection(range(expr), format!("reads `{q}` on the forward path: behaviour can depend on the harness's phase"));
                return true;
            }
        }
        false
    }
}

impl<'a, 'c> Checker<'a, 'c> {
    /// `_TIMING = os.environ.get("PHASE") == "timing"` at module level: a later branch on
    /// `_TIMING` in `forward` reads the environment as surely as `os.environ` there would.
    pub(super) fn module_env_names(&self) -> HashSet<String> {
        struct E<'n> {
            names: &'n Names,
            hit: bool,
        }
        impl<'v> Visitor<'v> for E<'_> {
            fn visit_expr(&mut self, expr: &'v Expr) {
                if matches!(expr, Expr::Attribute(_) | Expr::Name(_)) {
                    if let Some(q) = self.names.qualify(expr) {
                        if is_env_path(&q) {
                            self.hit = true;
                            return;
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }
        let mut out = HashSet::default();
        for s in &self.module.body {
            if let Stmt::Assign(a) = s {
                let mut e = E {
                    names: &self.model.names,
                    hit: false,
                };
                e.visit_expr(&a.value);
                if e.hit {
                    for t in &a.targets {
                        if let Expr::Name(n) = t {
                            out.insert(n.id.to_string());
                        }
                    }
                }
            }
        }
        out
    }
}

impl<'a> LiveVisitor<'_, 'a, '_> {
    pub(super) fn counter_key(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) if self.globals.contains(n.id.as_str()) => Some(n.id.to_string()),
            Expr::Attribute(a) => key_of(e)
                .filter(|k| k.starts_with("self."))
                .or_else(|| self.module_level(&a.value)),
            // `_state["n"] += 1` needs no `global`: the container is module state.
            Expr::Subscript(s) => self
                .counter_key(&s.value)
                .or_else(|| self.module_level(&s.value)),
            _ => None,
        }
    }

    /// `getattr(self, "calls", 0)` as the key `self.calls`.
    pub(super) fn getattr_self_key(&self, e: &Expr) -> Option<String> {
        let Expr::Call(c) = e else { return None };
        if self.c.model.names.qualify(&c.func).as_deref() != Some("builtins.getattr") {
            return None;
        }
        let args = &c.arguments.args;
        match args.first() {
            Some(Expr::Name(n)) if n.id.as_str() == "self" => Some(format!(
                "self.{}",
                self.c.model.names.fold_str(args.get(1)?)?
            )),
            _ => None,
        }
    }

    pub(super) fn module_level(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) if self.c.module_names.contains(n.id.as_str()) => Some(n.id.to_string()),
            _ => None,
        }
    }

    pub(super) fn record_test(&mut self, test: &Expr) {
        struct T<'k> {
            out: &'k mut Vec<(String, std::ops::Range<usize>)>,
            at: std::ops::Range<usize>,
        }
        impl<'v> Visitor<'v> for T<'_> {
            fn visit_expr(&mut self, expr: &'v Expr) {
                if let Some(k) = key_of(expr) {
                    self.out.push((k, self.at.clone()));
                }
                visitor::walk_expr(self, expr);
            }
        }
        let at = range(test);
        T {
            out: &mut self.tests,
            at,
        }
        .visit_expr(test);
    }
}

pub(super) fn is_env_path(q: &str) -> bool {
    under(q, "os.environ")
        || under(q, "os.environb")
        || under(q, "sys.argv")
        || under(q, "sys.orig_argv")
        || q == "os.getenv"
        || q == "os.getenvb"
}

pub(super) fn is_seed(q: &str) -> bool {
    matches!(
        q,
        "torch.manual_seed"
            | "torch.seed"
            | "torch.random.manual_seed"
            | "torch.cuda.manual_seed"
            | "torch.cuda.manual_seed_all"
            | "torch.set_rng_state"
            | "torch.cuda.set_rng_state"
            | "random.seed"
            | "numpy.random.seed"
    )
}

/// Clocks: reading one on the forward path lets behaviour depend on elapsed time.
pub(super) fn is_clock(q: &str) -> bool {
    let Some(f) = q.strip_prefix("time.") else {
        return matches!(q, "datetime.datetime.now" | "datetime.datetime.utcnow");
    };
    matches!(
        f,
        "time"
            | "time_ns"
            | "perf_counter"
            | "perf_counter_ns"
            | "monotonic"
            | "monotonic_ns"
            | "process_time"
            | "process_time_ns"
            | "thread_time"
            | "thread_time_ns"
    )
}

/// `_step = _counter()` at module level, where `_counter` returns a nested function that bumps
/// a `nonlocal`: `_step` is a call counter. The range is the bump's.
pub(super) fn closure_counters(module: &ModModule) -> Vec<(String, std::ops::Range<usize>)> {
    let factories: HashMap<&str, std::ops::Range<usize>> = module
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f) => closure_bump(f).map(|r| (f.name.as_str(), r)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for s in &module.body {
        let Stmt::Assign(a) = s else { continue };
        let Expr::Call(c) = a.value.as_ref() else {
            continue;
        };
        let Expr::Name(factory) = c.func.as_ref() else {
            continue;
        };
        if let Some(bump) = factories.get(factory.id.as_str()) {
            for t in &a.targets {
                if let Expr::Name(n) = t {
                    out.push((n.id.to_string(), bump.clone()));
                }
            }
        }
    }
    out
}

/// Where `f` returns a nested function that increments or decrements a `nonlocal` name: the
/// increment's range.
pub(super) fn closure_bump(f: &StmtFunctionDef) -> Option<std::ops::Range<usize>> {
    let returned: HashSet<&str> = f
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::Return(r) => match r.value.as_deref() {
                Some(Expr::Name(n)) => Some(n.id.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    for s in &f.body {
        let Stmt::FunctionDef(inner) = s else {
            continue;
        };
        if !returned.contains(inner.name.as_str()) {
            continue;
        }
        let nonlocals = global_names(inner);
        for st in &inner.body {
            if let Stmt::AugAssign(a) = st {
                if matches!(a.op, Operator::Add | Operator::Sub)
                    && matches!(a.target.as_ref(), Expr::Name(n) if nonlocals.contains(n.id.as_str()))
                {
                    return Some(range(st));
                }
            }
        }
    }
    None
}

// ---------------------------------------------------------------- registry entries

pub(crate) const KG402: RuleMeta = RuleMeta {
    code: "KG402",
    name: "phase-detection",
    severity: Error,
    summary: "Behaviour depends on call counts, environment or argv",
    error_when: "whenever a counter, the environment, argv, a clock or a reseed decides behaviour on the forward path",
    warn_when: "never from its own analysis (`[lint] severity` can lower it per repository)",
    doc: "A counter kept in `self` or a global is incremented on the forward path and tested in a condition, or the forward path reads `os.environ`, `os.getenv`, `sys.argv` (directly, through an alias, or through a module-level name assigned from them) or a clock (`time.perf_counter()`). Counters include `next(self.calls)` on an `itertools.count()`, `self.n = getattr(self, \"n\", 0) + 1` class attributes (`ModelNew.calls += 1`), `nonlocal` closure variables, and helpers that bump a counter (`if _tick() > 3:`). Reseeding the random generator on the forward path (`torch.manual_seed`) counts too: it lets a candidate regenerate the harness's inputs. That lets a candidate behave during the correctness check and cheat while being timed. The same inputs must always take the same path.",
    bad: "def forward(self, x):\n    self.calls += 1\n    if self.calls > 5:\n        return self.out",
    good: "def forward(self, x):\n    return ext.run(x)",
};

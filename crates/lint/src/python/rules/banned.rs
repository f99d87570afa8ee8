//! Module paths whose mere use is a finding (`gc`, `subprocess`, `torch.cuda.Stream`, ...). The
//! table in `tables.rs` names each path's rule and message; this module reports its hits, so
//! the rules it serves (KG204, KG3xx, KG401, KG403-KG405) share one lookup.

use super::*;

impl<'a, 'c> Checker<'a, 'c> {
    /// Import and alias sites of banned module paths, outside `if __name__ == "__main__":`.
    pub(super) fn banned_imports(&mut self) {
        let model = self.model;
        for (path, r) in &model.names.sites {
            if model.names.in_main_block(r.start) {
                continue;
            }
            if let Some((code, msg)) = banned(path) {
                self.push(code, r.clone(), format!("{msg} (`{path}`)"));
            }
        }
    }

    /// `getattr(os, "_ex" + "it")(0)`, `__import__("subprocess").run`: the attribute walk
    /// never sees a banned function reached through a call.
    pub(super) fn banned_through_call(&mut self, call: &ExprCall, q: Option<&str>) {
        if matches!(call.func.as_ref(), Expr::Call(_)) {
            if let Some((code, msg)) = q.and_then(banned) {
                let shown = q.unwrap_or_default();
                self.push(
                    code,
                    range(call.func.as_ref()),
                    format!("{msg} (`{shown}`)"),
                );
            }
        }
    }

    /// An attribute chain that names a banned path. True when it does: the outermost banned
    /// path is reported once, and the walk stops there.
    pub(super) fn banned_attribute(&mut self, expr: &Expr) -> bool {
        let Some(q) = self.model.names.qualify(expr) else {
            return false;
        };
        let Some((code, msg)) = banned(&q) else {
            return false;
        };
        if !self.root_banned(expr) {
            self.push(code, range(expr), format!("{msg} (`{q}`)"));
        }
        true
    }

    /// A bare name that resolves to a banned path without an import (a builtin).
    pub(super) fn banned_name(&mut self, expr: &Expr, id: &str) {
        if self.model.names.binding(id).is_none() {
            if let Some(q) = self.model.names.qualify(expr) {
                if let Some((code, msg)) = banned(&q) {
                    self.push(code, range(expr), msg.to_string());
                }
            }
        }
    }

    pub(super) fn root_banned(&self, e: &Expr) -> bool {
        let mut cur = e;
        loop {
            match cur {
                Expr::Attribute(a) => cur = &a.value,
                Expr::Name(n) => {
                    return self
                        .model
                        .names
                        .binding(n.id.as_str())
                        .is_some_and(|p| banned(p).is_some())
                }
                _ => return false,
            }
        }
    }
}

//! `kernelgate baseline`: which references and accepted kernels a run times.

use anyhow::bail;
use kernelgate_model::{Config, Kernel, KernelError, Problem, ProblemSet};
use std::path::Path;

/// The problems of `set` a run times: those named by `queries` (keys, stems or paths), else
/// all; either way only those of `level` when it is given.
pub fn select_problems<'a>(
    set: &'a ProblemSet,
    level: Option<u32>,
    queries: &[String],
) -> anyhow::Result<Vec<&'a Problem>> {
    let mut problems: Vec<&Problem> = Vec::new();
    if queries.is_empty() {
        problems.extend(set.iter().filter(|p| level.is_none_or(|l| p.level == l)));
    } else {
        for q in queries {
            let p = set
                .find(q)
                .map_err(|e| anyhow::anyhow!("--problem {q}: {e}"))?;
            if level.is_none_or(|l| p.level == l) && !problems.iter().any(|x| x.key == p.key) {
                problems.push(p);
            }
        }
    }
    if problems.is_empty() {
        bail!(
            "no problems selected from {}: check --level / --problem (`kernelgate problems` lists them)",
            set.origin
        );
    }
    Ok(problems)
}

/// The accepted kernels `--kernels` times: every kernel `kernelgate kernels` maps to one of
/// `problems`, by the same rules; and the files that cannot be mapped.
pub fn kernel_plan(
    repo: &Path,
    cfg: &Config,
    set: &ProblemSet,
    problems: &[&Problem],
) -> (Vec<Kernel>, Vec<KernelError>) {
    let (mut kernels, errors) = kernelgate_model::discover(repo, cfg, set);
    kernels.retain(|k| problems.iter().any(|p| p.key == k.problem_key));
    (kernels, errors)
}

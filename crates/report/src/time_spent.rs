//! The job summary's "where the time went" section: per kernel, the queue, the build ahead of
//! the GPU, the wait for a device, the eval and its largest harness phases.

use crate::schema::Report;

/// A collapsed Markdown section, or an empty string when no kernel was evaluated.
pub fn section(report: &Report) -> String {
    let rows: Vec<_> = report
        .kernels
        .iter()
        .filter_map(|k| k.time_spent.as_ref().map(|t| (k, t)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let wall = rows.iter().map(|(_, t)| t.total_ms).fold(0.0, f64::max);
    let builds = crate::schema::BuildCounts::of(report);
    let mut s =
        format!(
        "\n<details><summary>Where the time went ({} kernel(s), {} of evaluation{})</summary>\n\n\
         | Kernel | Queued | Build | Wait | Eval | Done at | Largest eval phases |\n\
         |---|--:|--:|--:|--:|--:|---|\n",
        rows.len(),
        secs(wall),
        if builds.any() { format!("; builds: {builds}") } else { String::new() }
    );
    for (k, t) in rows {
        let mut phases: Vec<_> = t
            .phases
            .iter()
            .filter(|(name, _)| name != "total" && name != "job_wall")
            .collect();
        phases.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = phases
            .iter()
            .take(3)
            .map(|(name, ms)| format!("{} {}", crate::comment::text(name), secs(*ms)))
            .collect();
        let retried = if t.retries > 0 { " (retried)" } else { "" };
        s.push_str(&format!(
            "| {}{retried} | {} | {} | {} | {} | {} | {} |\n",
            crate::comment::code(&k.path),
            secs(t.queued_ms),
            match (t.build, t.build_ms > 0.0) {
                (Some(crate::schema::BuildSource::Store), _) => "store".to_string(),
                (Some(b), false) => format!("in eval ({})", b.as_str()),
                _ => secs(t.build_ms),
            },
            secs(t.wait_ms),
            secs(t.eval_ms),
            secs(t.total_ms),
            top.join(", ")
        ));
    }
    s.push_str(
        "\nQueued: before its build (or eval) started. Build: compiled on CPU cores ahead of the \
         GPU (`store`: loaded from the runner's build store, nothing compiled; `in eval`: compiled by \
         the eval itself). Wait: built, waiting for a device. Done at: from the start of evaluation.\n\n</details>\n",
    );
    s
}

fn secs(ms: f64) -> String {
    format!("{:.1} s", ms / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::*;

    #[test]
    fn a_row_per_evaluated_kernel_with_its_largest_phases() {
        let mut r = Report::new(RunInfo::default());
        let mut row = KernelRow::new(
            "kernels/a.py",
            "level1/3_ReLU",
            kernelgate_model::Backend::Cuda,
            Default::default(),
            Change::Added,
            OutcomeSummary::new(OutcomeKind::Correct, ""),
        );
        row.time_spent = Some(TimeSpent {
            queued_ms: 100.0,
            build_ms: 61_000.0,
            wait_ms: 2_000.0,
            eval_ms: 2_900.0,
            total_ms: 66_000.0,
            retries: 1,
            phases: vec![
                ("timing".into(), 900.0),
                ("audit".into(), 20.0),
                ("checks".into(), 400.0),
                ("reference".into(), 300.0),
                ("total".into(), 2_800.0),
            ],
            build: Some(BuildSource::Built),
        });
        r.kernels.push(row.clone());
        row.path = "kernels/c.py".into();
        row.time_spent = Some(TimeSpent {
            build: Some(BuildSource::Store),
            ..TimeSpent::default()
        });
        r.kernels.push(row.clone());
        row.path = "kernels/d.py".into();
        row.time_spent = Some(TimeSpent {
            build: Some(BuildSource::Built),
            ..TimeSpent::default()
        });
        r.kernels.push(row);
        let not_run = KernelRow::new(
            "kernels/b.py",
            "level1/3_ReLU",
            kernelgate_model::Backend::Cuda,
            Default::default(),
            Change::Added,
            OutcomeSummary::new(OutcomeKind::Skipped, "lint"),
        );
        r.kernels.push(not_run);
        let s = section(&r);
        assert!(s.starts_with(
            "\n<details><summary>Where the time went (3 kernel(s), 66.0 s of evaluation; \
             builds: 1 from the build store, 2 compiled)</summary>"
        ));
        assert!(s.contains("| `kernels/c.py` | 0.0 s | store |"), "{s}");
        assert!(
            s.contains("| `kernels/d.py` | 0.0 s | in eval (compiled, kept) |"),
            "{s}"
        );
        assert!(s.contains("| `kernels/a.py` (retried) | 0.1 s | 61.0 s | 2.0 s | 2.9 s | 66.0 s | timing 0.9 s, checks 0.4 s, reference 0.3 s |"), "{s}");
        assert!(!s.contains("kernels/b.py"));
        assert_eq!(section(&Report::new(RunInfo::default())), "");
    }
}

//! `comment.md`: the sticky PR comment. Always below GitHub's 65,536-character cap (measured in
//! bytes, so the same code also keeps a check run's summary under its 65,535-*byte* cap): when
//! too long, per-kernel details go first, then table rows, each time with a pointer to the full
//! report artifact.
//!
//! Text a candidate controls (paths, exception messages, logs) is escaped with [`text`] or
//! fenced with [`code`] wherever it is rendered, so it cannot close a `<details>`, add images
//! or links, or mention anyone.

use crate::annotate::is_failure;
use crate::schema::{
    Change, ComparisonSummary, ComparisonVerdict, Interval, KernelRow, OutcomeKind, Report,
    TimedOn, Verdict,
};
use kernelgate_model::{RanOn, Severity};
use std::fmt::Write;

/// Hidden marker by which the comment is found again and updated in place.
pub const STICKY_MARKER: &str = "<!-- kernelgate:sticky -->";
/// GitHub's limit on a comment body, in characters.
pub const COMMENT_LIMIT: usize = 65_536;

const LOG_TAIL_LINES: usize = 40;
const DIFF_LINES: usize = 150;

/// Render with GitHub's limit.
pub fn render_comment(report: &Report) -> String {
    render_comment_with_limit(report, COMMENT_LIMIT)
}

/// The comment of a run whose report cannot be trusted as a verdict (a fork's own workflow run):
/// `note` (kernelgate's words, not the report's) stands under the headline, so the table is not
/// read as a verdict the check does not give.
pub fn render_unverified_comment(report: &Report, note: &str) -> String {
    render(report, COMMENT_LIMIT, Some(note))
}

/// Render, keeping the result at most `limit` bytes long (a byte limit is also a character
/// limit), cut at a row boundary with a pointer to the full report.
pub fn render_comment_with_limit(report: &Report, limit: usize) -> String {
    render(report, limit, None)
}

fn render(report: &Report, limit: usize, note: Option<&str>) -> String {
    let rows = ordered_rows(report);
    let mut detailed = rows.len();
    let mut shown = rows.len();
    let mut run_details = true;
    loop {
        let text = assemble(report, &rows, shown, detailed, run_details, note);
        if text.len() <= limit {
            return text;
        }
        if detailed > 0 {
            // Drop details from the least important rows first, a few at a time.
            detailed = detailed.saturating_sub((detailed / 4).max(1));
        } else if run_details {
            run_details = false;
        } else if shown > 0 {
            shown = shown.saturating_sub((shown / 8).max(1));
        } else {
            // Even the header is too long (huge reference diffs): cut hard, keep the marker.
            let mut cut = text[..floor_char_boundary(&text, limit.saturating_sub(200))].to_string();
            cut.push_str("\n\n… truncated; see the full report in the workflow artifact.\n");
            return cut;
        }
    }
}

/// Failures first, then warnings, then the rest; path order within each.
fn ordered_rows(report: &Report) -> Vec<&KernelRow> {
    let rank = |v: Verdict| match v {
        Verdict::Fail => 0,
        Verdict::Warn => 1,
        Verdict::Pass => 2,
        Verdict::Skipped => 3,
    };
    let mut rows: Vec<&KernelRow> = report.kernels.iter().collect();
    rows.sort_by(|a, b| {
        rank(a.verdict)
            .cmp(&rank(b.verdict))
            .then(a.path.cmp(&b.path))
    });
    rows
}

fn assemble(
    report: &Report,
    rows: &[&KernelRow],
    shown: usize,
    detailed: usize,
    run_details: bool,
    note: Option<&str>,
) -> String {
    let mut s = String::new();
    s.push_str(STICKY_MARKER);
    s.push('\n');
    s.push_str(&headline(report));
    s.push_str("\n\n");
    if let Some(note) = note {
        let _ = writeln!(s, "> [!NOTE]\n> {}\n", one_line(note));
    }
    if let Some(line) = commit_line(report) {
        s.push_str(&line);
        s.push_str("\n\n");
    }
    if !report.run.complete {
        s.push_str("> [!WARNING]\n> This run did not finish: the results below cover only the kernels evaluated so far.\n\n");
    }
    reference_banner(&mut s, report);
    problem_observations(&mut s, report);
    if !report.run.sandbox.is_empty() && !report.run.fully_sandboxed() {
        let levels: Vec<String> = report.run.sandbox.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "> [!CAUTION]\n> **sandbox: {}**: the candidates did not run fully confined (docs/sandbox.md).\n",
            one_line(&levels.join("; "))
        );
    }
    totals(&mut s, report);
    if !rows.is_empty() {
        table(&mut s, report, &rows[..shown]);
        if shown < rows.len() {
            let _ = writeln!(
                s,
                "\n_{} more kernel(s) not shown to stay within GitHub's comment limit; {}._",
                rows.len() - shown,
                artifact_pointer(report)
            );
        }
        chart(&mut s, &rows[..shown]);
        let with_details: Vec<&&KernelRow> = rows[..shown.min(detailed)]
            .iter()
            .filter(|r| has_details(report, r))
            .collect();
        for row in &with_details {
            kernel_details(&mut s, report, row);
        }
        let dropped = rows[shown.min(detailed)..shown]
            .iter()
            .filter(|r| has_details(report, r))
            .count();
        if dropped > 0 {
            let _ = writeln!(
                s,
                "\n_Details of {dropped} kernel(s) omitted for length; {}._",
                artifact_pointer(report)
            );
        }
    }
    config_changes(&mut s, report);
    if !report.other_changes.is_empty() {
        s.push_str("\n**Other changes in this PR:** ");
        let list: Vec<String> = report.other_changes.iter().map(|c| code(c)).collect();
        s.push_str(&list.join(", "));
        s.push('\n');
    }
    if run_details {
        run_section(&mut s, report);
    }
    let _ = write!(
        s,
        "\n<sub>kernelgate {} · `{}`",
        env!("CARGO_PKG_VERSION"),
        report.schema
    );
    if report.run.fully_sandboxed() {
        s.push_str(" · sandbox: full");
    }
    if let Some(url) = &report.run.artifact_url {
        let _ = write!(s, " · [full report]({url})");
    }
    s.push_str("</sub>\n");
    s
}

fn artifact_pointer(report: &Report) -> String {
    match &report.run.artifact_url {
        Some(url) => format!("the full report is in [the workflow artifact]({url})"),
        None => {
            "the full report is in the workflow's `kernelgate-report` artifact (report.json)".into()
        }
    }
}

pub(crate) fn headline(report: &Report) -> String {
    let s = &report.summary;
    let what = match s.verdict {
        Verdict::Pass if s.total == 0 => "no kernels to evaluate".to_string(),
        Verdict::Pass if s.passed == 0 => {
            format!("nothing failed; {} kernel(s) skipped", s.skipped)
        }
        Verdict::Pass if s.skipped > 0 => {
            format!("{} kernel(s) passed, {} skipped", s.passed, s.skipped)
        }
        Verdict::Pass => format!("all {} kernel(s) passed", s.passed),
        Verdict::Warn
            if s.warned == 0
                && (!report.reference_changes.is_empty()
                    || report
                        .problem_observations
                        .iter()
                        .any(|o| o.warns_the_run())) =>
        {
            format!(
                "{} kernel(s) passed, but reference problems changed: review before merging",
                s.passed
            )
        }
        Verdict::Warn => format!(
            "passed with warnings ({} of {} kernel(s) warned)",
            s.warned, s.total
        ),
        Verdict::Fail => format!("{} of {} kernel(s) failed", s.failed, s.total),
        Verdict::Skipped => "skipped".into(),
    };
    let shard = report
        .run
        .shard
        .map(|(i, n)| format!(" (shard {i}/{n})"))
        .unwrap_or_default();
    format!("## {} kernelgate: {what}{shard}", s.verdict.emoji())
}

fn reference_banner(s: &mut String, report: &Report) {
    if report.reference_changes.is_empty() {
        return;
    }
    s.push_str("> [!CAUTION]\n> **This PR changes reference problem(s):** ");
    let names: Vec<String> = report
        .reference_changes
        .iter()
        .map(|c| code(&c.path))
        .collect();
    s.push_str(&names.join(", "));
    s.push_str(
        ".\n> A changed reference changes what every kernel for it is compared against (a slower reference makes \
         every kernel look faster). This run judged the kernels by the base branch's version; the change judges \
         after the merge, and committed baselines for these problems are treated as invalid. \
         Review the diff below.\n\n",
    );
    for c in &report.reference_changes {
        let lines: Vec<&str> = c.diff.lines().collect();
        let _ = writeln!(
            s,
            "<details open><summary>Diff of <code>{}</code></summary>\n\n```diff",
            html(&c.path)
        );
        for l in lines.iter().take(DIFF_LINES) {
            s.push_str(&l.replace("```", "`\u{200b}``"));
            s.push('\n');
        }
        if lines.len() > DIFF_LINES {
            let _ = writeln!(s, "… {} more line(s)", lines.len() - DIFF_LINES);
        }
        s.push_str("```\n\n</details>\n\n");
    }
}

/// What the runs observed about their problems, once per problem: no kernel's verdict.
fn problem_observations(s: &mut String, report: &Report) {
    if report.problem_observations.is_empty() {
        return;
    }
    s.push_str(
        "#### Observations about the problems

",
    );
    s.push_str(
        "_About a problem, not a kernel: nothing in a kernel can change them, so no kernel's row \
         is judged by them._

",
    );
    for o in &report.problem_observations {
        let seen = match o.kernels.len() {
            0 => String::new(),
            1 => format!("; seen by {}", code(&o.kernels[0])),
            n => format!("; seen by {n} kernels"),
        };
        let icon = match o.severity {
            Severity::Error => "❌",
            Severity::Warning => "⚠️",
        };
        let _ = writeln!(
            s,
            "- {} {icon} {} ({}{seen})",
            problem_cell(report, &o.problem),
            cell(&o.message),
            code(&o.code)
        );
    }
    s.push('\n');
}

fn totals(s: &mut String, report: &Report) {
    let m = &report.summary;
    // No geomean here: one mixing GPU and host timings means nothing; each device's table heading
    // gives its own.
    let _ = write!(
        s,
        "**fast_0** {} · **fast_1** {} · **fast_2** {} · {} passed, {} warned, {} failed, {} skipped ",
        pct(m.fast_0),
        pct(m.fast_1),
        pct(m.fast_2),
        m.passed,
        m.warned,
        m.failed,
        m.skipped
    );
    s.push_str(FAST_P_NOTE);
    s.push_str("\n\n");
}

/// What the fast_p numbers mean, under the totals.
const FAST_P_NOTE: &str = "<sub>fast_p: the fraction of evaluated kernels that are correct and more than p× faster than the PyTorch reference (fast_0: correct at all), as KernelBench defines it.</sub>";

/// The rows by where they were timed: GPU rows first, then host (CPU) timings, then rows never
/// timed (first instead when one of them failed: a kernel stopped before its timing is what a
/// reader must see first); the order within each group is the caller's.
fn device_groups<'r>(rows: &[&'r KernelRow]) -> Vec<(Option<TimedOn>, Vec<&'r KernelRow>)> {
    let mut groups = Vec::new();
    for on in [Some(TimedOn::Gpu), Some(TimedOn::Cpu), None] {
        let group: Vec<&KernelRow> = rows.iter().copied().filter(|r| r.timed_on == on).collect();
        if !group.is_empty() {
            groups.push((on, group));
        }
    }
    if let Some((None, untimed)) = groups.last() {
        if untimed.iter().any(|r| r.verdict == Verdict::Fail) {
            groups.rotate_right(1);
        }
    }
    groups
}

/// [`device_groups`], the GPU rows split further by the row's GPU model (first-seen order): a
/// speedup on an H100 and one on an H200 are not one population.
fn model_groups<'r>(rows: &[&'r KernelRow]) -> Vec<(Option<TimedOn>, Vec<&'r KernelRow>)> {
    let mut out = Vec::new();
    for (on, group) in device_groups(rows) {
        if on != Some(TimedOn::Gpu) {
            out.push((on, group));
            continue;
        }
        let mut models: Vec<Option<&str>> = Vec::new();
        for r in &group {
            if !models.contains(&r.device.as_deref()) {
                models.push(r.device.as_deref());
            }
        }
        for m in models {
            let rows: Vec<&KernelRow> = group
                .iter()
                .copied()
                .filter(|r| r.device.as_deref() == m)
                .collect();
            out.push((on, rows));
        }
    }
    out
}

/// The geometric mean of the speedups over eager of a group's correct rows.
fn geomean(rows: &[&KernelRow]) -> Option<(f64, usize)> {
    let logs: Vec<f64> = rows
        .iter()
        .filter(|r| r.is_correct())
        .filter_map(|r| r.speedup_eager.map(|i| i.value))
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(f64::ln)
        .collect();
    (!logs.is_empty()).then(|| {
        (
            (logs.iter().sum::<f64>() / logs.len() as f64).exp(),
            logs.len(),
        )
    })
}

/// The device names of a group's rows, in first-seen order.
fn device_names(rows: &[&KernelRow]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if let Some(d) = r.device.as_deref() {
            if !names.contains(&d) {
                names.push(d);
            }
        }
    }
    names.iter().map(|n| text(n)).collect::<Vec<_>>().join(", ")
}

/// What host timings are worth, under the CPU group's heading.
const HOST_TIMING_NOTE: &str = "<sub>Host timings: the CPU is shared with the run's builds and its other evaluations, so the same kernel's times move by tens of percent between runs. Compare the speedups (candidate and reference interleaved on the same host in the same run), not the times.</sub>";

fn table(s: &mut String, report: &Report, rows: &[&KernelRow]) {
    for (on, group) in &model_groups(rows) {
        let names = device_names(group);
        let mut heading = match (on, names.is_empty()) {
            (Some(TimedOn::Gpu), false) => format!("GPU · {names}"),
            (Some(TimedOn::Gpu), true) => "GPU".to_string(),
            (Some(TimedOn::Cpu), false) => format!("CPU · host timings on {names}"),
            (Some(TimedOn::Cpu), true) => "CPU · host timings".to_string(),
            (None, _) => "Not timed".to_string(),
        };
        if let Some((g, n)) = geomean(group) {
            let _ = write!(heading, " · geomean {g:.2}× over {n} correct kernel(s)");
        }
        let _ = writeln!(s, "#### {heading}");
        if *on == Some(TimedOn::Cpu) {
            s.push_str(HOST_TIMING_NOTE);
            s.push_str("\n\n");
        }
        group_table(s, report, group);
        s.push('\n');
    }
    // What a passing row's base says about main (no details for passing rows): one line each.
    let threshold = report.policy.regression_threshold.unwrap_or(0.0);
    for r in rows.iter().filter(|r| !needs_details(r)) {
        if let Some(note) = r.history.as_ref().and_then(|h| h.base_note(threshold)) {
            let _ = writeln!(s, "- {}: {}", code(&r.path), text(&note));
        }
    }
}

/// One group's table: status, kernel, speedup over eager, efficiency, one short flag; a column
/// no row of the group fills is left out.
fn group_table(s: &mut String, report: &Report, rows: &[&KernelRow]) {
    let cells: Vec<RowCells> = rows.iter().map(|r| row_cells(report, r)).collect();
    let efficiency = cells.iter().any(|c| c.efficiency.is_some());
    let flag = cells.iter().any(|c| c.flag.is_some());
    let mut header = String::from("| | Kernel | Speedup |");
    let mut rule = String::from("|---|---|--:|");
    if efficiency {
        header.push_str(" Efficiency |");
        rule.push_str("---|");
    }
    if flag {
        header.push_str(" Flag |");
        rule.push_str("---|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    for c in &cells {
        let mut line = format!("| {} | {} | {} |", c.status, c.kernel, c.speedup);
        if efficiency {
            let _ = write!(line, " {} |", c.efficiency.as_deref().unwrap_or("–"));
        }
        if flag {
            let _ = write!(line, " {} |", c.flag.as_deref().unwrap_or(""));
        }
        let _ = writeln!(s, "{line}");
    }
}

/// A row's cells (`None`: nothing to show).
struct RowCells {
    status: &'static str,
    kernel: String,
    speedup: String,
    efficiency: Option<String>,
    flag: Option<String>,
}

fn row_cells(report: &Report, r: &KernelRow) -> RowCells {
    let kernel = match link(report, &r.path, None) {
        Some(url) => format!("[{}]({url})", code_cell(&r.path)),
        None => code_cell(&r.path),
    };
    let mut change = match &r.change {
        Change::Modified | Change::Unchanged => String::new(),
        c => format!("<br><sub>{}</sub>", cell(&c.label())),
    };
    if !r.changed_sources.is_empty() {
        // The changed files that brought the kernel in (a `.cu` it loads, a shared header).
        let shown: Vec<String> = r
            .changed_sources
            .iter()
            .take(3)
            .map(|f| code_cell(f))
            .collect();
        let more = match r.changed_sources.len() {
            n if n > 3 => format!(" and {} more", n - 3),
            _ => String::new(),
        };
        let _ = write!(change, "<br><sub>via {}{more}</sub>", shown.join(", "));
    }
    if report
        .run
        .dashboard_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"))
    {
        let _ = write!(
            change,
            "<br><sub>{}</sub>",
            problem_cell(report, &r.problem)
        );
    }
    RowCells {
        status: r.verdict.emoji(),
        kernel: format!("{kernel}{change}"),
        speedup: speedup(r.speedup_eager.as_ref()),
        efficiency: r.efficiency.as_ref().map(|e| e.label()),
        flag: short_flag(r),
    }
}

/// The one thing to know about a row, in a few words: what stopped it, else its first flag,
/// else its first finding, else a slowdown against its base or baseline.
fn short_flag(r: &KernelRow) -> Option<String> {
    if r.verdict == Verdict::Skipped && !r.outcome.message.is_empty() {
        // Why, in a few words: "skipped — needs a GPU: <the long story>" reads "needs a GPU".
        let m = one_line(&r.outcome.message);
        let why = m.split(':').next().unwrap_or_default();
        let why = why.strip_prefix("skipped").unwrap_or(why);
        let why = why.trim_start_matches([' ', '—', '-']).trim();
        if !why.is_empty() {
            return Some(format!(
                "{}<br><sub>{}</sub>",
                outcome_label(r),
                text(&clip(why, 60))
            ));
        }
    }
    if !r.is_correct() {
        return Some(outcome_label(r).to_string());
    }
    if let Some(f) = r.flags.first() {
        return Some(code_cell(f.code.as_str()));
    }
    if let Some(f) = r.findings.first() {
        return Some(format!("{} {}", f.severity, code_cell(&f.rule)));
    }
    let slower = |c: &Option<ComparisonSummary>| {
        c.as_ref()
            .is_some_and(|c| c.verdict == ComparisonVerdict::Slower)
    };
    if slower(&r.vs_base) {
        return Some("🔴 slower than base".into());
    }
    if slower(&r.vs_baseline) {
        return Some("🔴 slower than baseline".into());
    }
    None
}

/// The candidate's median with its interval, and the eager reference's median under it.
fn median_cell(t: f64, ci: Option<(f64, f64)>, reference: Option<f64>) -> String {
    let mut out = ms(t);
    if let Some((lo, hi)) = ci {
        let _ = write!(out, " <sub>[{}, {}]</sub>", ms(lo), ms(hi));
    }
    if let Some(r) = reference {
        let _ = write!(out, "<br><sub>eager {}</sub>", ms(r));
    }
    out
}

/// A device's chart appears only above this many bars: a table that short reads at a glance.
const CHART_MIN_BARS: usize = 10;

/// Most bars one chart shows: the rows furthest from parity.
const CHART_BARS: usize = 20;

/// Mermaid bar charts of the speedup vs eager of correct kernels, one per device, on a log2
/// axis (0 = parity, +1 = twice as fast), at most [`CHART_BARS`] bars each.
fn chart(s: &mut String, rows: &[&KernelRow]) {
    for (on, group) in device_groups(rows) {
        let Some(on) = on else { continue };
        let mut bars: Vec<(&str, f64)> = group
            .iter()
            .filter(|r| r.is_correct())
            .filter_map(|r| r.speedup_eager.map(|v| (r.path.as_str(), v.value)))
            .filter(|(_, v)| v.is_finite() && *v > 0.0)
            .collect();
        if bars.len() <= CHART_MIN_BARS {
            continue;
        }
        let total = bars.len();
        if total > CHART_BARS {
            let mut by_distance: Vec<(usize, f64)> = bars
                .iter()
                .enumerate()
                .map(|(i, (_, v))| (i, v.log2().abs()))
                .collect();
            by_distance.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut keep: Vec<usize> = by_distance[..CHART_BARS].iter().map(|(i, _)| *i).collect();
            keep.sort_unstable();
            bars = keep.into_iter().map(|i| bars[i]).collect();
        }
        let names = chart_labels(&bars.iter().map(|(p, _)| *p).collect::<Vec<_>>());
        let labels: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        let logs: Vec<f64> = bars.iter().map(|(_, v)| v.log2()).collect();
        let values: Vec<String> = logs.iter().map(|v| format!("{v:.2}")).collect();
        let top = logs.iter().copied().fold(1.0f64, f64::max).ceil();
        let bottom = logs.iter().copied().fold(-1.0f64, f64::min).floor();
        let device = match on {
            TimedOn::Gpu => "GPU",
            TimedOn::Cpu => "CPU (host timings)",
        };
        let shown = if total > bars.len() {
            format!(", the {} of {total} furthest from parity", bars.len())
        } else {
            String::new()
        };
        let _ = write!(
            s,
            "\n```mermaid\nxychart-beta\n    title \"{device}: speedup vs eager PyTorch, log2 (0 = parity, +1 = 2x faster){shown}\"\n    x-axis [{}]\n    y-axis \"log2 speedup\" {bottom:.0} --> {top:.0}\n    bar [{}]\n    line [{}]\n```\n",
            labels.join(", "),
            values.join(", "),
            vec!["0"; bars.len()].join(", ")
        );
    }
}

/// The outcome's label; a row that was not run and still failed or warned (lint errors, no
/// problem) says "not run", so "skipped" appears only on rows the header counts as skipped.
fn outcome_label(r: &KernelRow) -> &'static str {
    if r.outcome.kind == OutcomeKind::Skipped && r.verdict != Verdict::Skipped {
        "⛔ not run"
    } else {
        r.outcome.kind.label()
    }
}

/// Only rows that did not pass get a details block.
fn needs_details(r: &KernelRow) -> bool {
    matches!(r.verdict, Verdict::Warn | Verdict::Fail)
}

fn has_details(report: &Report, r: &KernelRow) -> bool {
    if !needs_details(r) {
        return false;
    }
    r.vs_base.is_some()
        || r.vs_baseline.is_some()
        || r.audit
            .as_ref()
            .is_some_and(|a| a.left_to_pytorch().next().is_some())
        || !r.findings.is_empty()
        || !r.reasons.is_empty()
        || !r.unresolved_sources.is_empty()
        || is_failure(r.outcome.kind)
        || r.outcome.log_tail.is_some()
        || !r.flags.is_empty()
        || !r.outcome.message.is_empty()
        || r.history.as_ref().is_some_and(|h| {
            h.base_note(report.policy.regression_threshold.unwrap_or(0.0))
                .is_some()
        })
}

fn kernel_details(s: &mut String, report: &Report, r: &KernelRow) {
    if !s.ends_with("\n\n") {
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "<details><summary>{} <code>{}</code> — {}</summary>\n",
        r.verdict.emoji(),
        html(&r.path),
        html(outcome_label(r))
    );
    // Each message once: the policy's reasons quote the outcome, runtime findings and flags.
    let said = |m: &str| !m.is_empty() && r.reasons.iter().any(|x| x.contains(m));
    for reason in &r.reasons {
        let _ = writeln!(s, "- {}", text(reason));
    }
    let threshold = report.policy.regression_threshold.unwrap_or(0.0);
    if let Some(note) = r.history.as_ref().and_then(|h| h.base_note(threshold)) {
        let _ = writeln!(s, "- {}", text(&note));
    }
    for why in &r.unresolved_sources {
        let _ = writeln!(s, "- sources: {}", text(why));
    }
    if !r.outcome.message.is_empty() && !said(&r.outcome.message) {
        let kind = r.outcome.kind.as_str().replace('_', " ");
        if r.outcome.message.starts_with(&kind) || r.outcome.message.starts_with("not run") {
            let _ = writeln!(s, "- {}", text(&r.outcome.message));
        } else {
            let _ = writeln!(s, "- **{kind}:** {}", text(&r.outcome.message));
        }
    }
    for f in r
        .findings
        .iter()
        .filter(|f| !f.is_runtime() || !said(&f.message))
    {
        let place = if !f.is_runtime() {
            let file = if f.file.is_empty() { &r.path } else { &f.file };
            // A finding in a source the kernel loads (`relu.cu`) names that file.
            let name = if *file == r.path {
                String::new()
            } else {
                format!("{} ", code(file))
            };
            match link(report, file, Some(f.line)) {
                Some(url) => format!("{name}[L{}]({url})", f.line),
                None => format!("{name}L{}", f.line),
            }
        } else {
            "runtime".into()
        };
        let _ = writeln!(
            s,
            "- {} {} {place}: {} ([docs]({}))",
            f.severity,
            code(&f.rule),
            text(&first_sentence(&f.message)),
            rule_docs(&f.rule)
        );
    }
    if let Some(a) = &r.audit {
        let left = a.describe_left(8);
        let _ = writeln!(
            s,
            "- op audit ({} time): custom code {} of {:.3} ms{}",
            match a.clock {
                kernelgate_model::AuditClock::Gpu => "GPU",
                kernelgate_model::AuditClock::Cpu => "CPU",
            },
            a.share_label(),
            a.total_ms,
            if left.is_empty() {
                String::new()
            } else {
                format!("; left to PyTorch: {}", one_line(&left))
            }
        );
    }
    if let Some(t) = r.time_ms {
        let m = median_cell(t, r.time_ci_ms, r.reference_ms).replace("<br>", " · ");
        let _ = writeln!(s, "- median ms: {m}");
    }
    if let Some(c) = &r.vs_base {
        let _ = writeln!(s, "- vs base: {}", comparison(Some(c)));
    }
    if let Some(c) = &r.vs_baseline {
        let _ = writeln!(s, "- vs baseline: {}", comparison(Some(c)));
    }
    if let Some(a) = r.vs_baseline.as_ref().and_then(|c| c.against.as_ref()) {
        let _ = writeln!(s, "- {}: {}", a.kind.label(), text(&a.detail));
    }
    if let Some(e) = &r.efficiency {
        let _ = writeln!(s, "- efficiency: {}, {}", e.label(), e.detail());
    }
    for flag in r.flags.iter().filter(|f| !said(&f.message)) {
        let _ = writeln!(
            s,
            "- {} flag {}: {} ([docs]({}))",
            flag.severity,
            code(flag.code.as_str()),
            text(&first_sentence(&flag.message)),
            condition_docs(flag.code)
        );
    }
    if r.verdict == Verdict::Fail {
        let _ = writeln!(s, "- reproduce: {}", code(&reproduce_command(r)));
    }
    // The harness's raw details stay in report.json; the comment gives what a contributor
    // acts on (the messages above, the log tail below).
    if let Some(tail) = &r.outcome.log_tail {
        let lines: Vec<&str> = tail.lines().collect();
        let start = lines.len().saturating_sub(LOG_TAIL_LINES);
        let _ = writeln!(s, "\nLog tail:\n\n```text");
        for l in &lines[start..] {
            let _ = writeln!(s, "{}", clip(&l.replace("```", "`\u{200b}``"), 500));
        }
        s.push_str("```\n");
    }
    s.push_str("\n</details>\n");
}

/// The pull request's changes to `kernelgate.toml`: a judgment setting applies after merge (this
/// run was judged with the base's value), a layout setting (`[kernels]`) in this run.
fn config_changes(s: &mut String, report: &Report) {
    if report.config_changes.is_empty() {
        return;
    }
    let judged = report
        .run
        .config
        .as_ref()
        .map_or_else(|| "the base's config".to_string(), ToString::to_string);
    let _ = writeln!(
        s,
        "\n**This PR changes `kernelgate.toml`.** It was judged with {}; the PR's judgment settings apply after merge, never to its own run:\n",
        text(&judged)
    );
    s.push_str("| setting | judged with | this PR | applies |\n|---|---|---|---|\n");
    let value = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "unset".to_string(),
        v => code_cell(&v.to_string()),
    };
    for c in &report.config_changes {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            code_cell(&c.key),
            value(&c.base),
            value(&c.head),
            c.applies.as_str()
        );
    }
}

fn run_section(s: &mut String, report: &Report) {
    let run = &report.run;
    let hw = &run.hardware;
    let mut items: Vec<String> = Vec::new();
    let mut item = |k: &str, v: &str| {
        if !v.is_empty() {
            items.push(format!("**{k}:** {}", text(v)));
        }
    };
    item("base", &run.base_sha);
    item("head", &run.head_sha);
    if let Some(c) = &run.config {
        item("judged with", &c.to_string());
    }
    item("seed", &run.seed.map(|x| x.to_string()).unwrap_or_default());
    match gpu_name(&hw.gpu) {
        Some(gpu) => {
            item("GPU", &gpu);
            item("driver", &hw.driver);
            item("CUDA", &hw.cuda);
        }
        None if !hw.gpu.is_empty() => item("device", "CPU (no GPU)"),
        None => {}
    }
    item("torch", &hw.torch);
    item("Python", &hw.python);
    item("CPU", &hw.cpu);
    item("started", &run.started_at);
    item("finished", run.finished_at.as_deref().unwrap_or(""));
    if let Some(t) = report.policy.regression_threshold {
        item("regression threshold", &format!("{:.1}%", t * 100.0));
    }
    if !report.policy.fail_on.is_empty() {
        item("fails on", &report.policy.fail_on.join(", "));
    }
    if !report.policy.warn_on.is_empty() {
        item("warns on", &report.policy.warn_on.join(", "));
    }
    for a in &report.policy.acknowledged {
        item("acknowledged", a);
    }
    if !s.ends_with("\n\n") {
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "<details><summary>Run details</summary>\n\n{}\n</details>",
        items.join(" · ")
    );
}

/// The GPU's name from the harness's device label (`cuda:0 (NVIDIA H200)`, or a bare name
/// as older reports wrote it); `None` for the CPU.
fn gpu_name(device: &str) -> Option<String> {
    let d = device.trim();
    if d.is_empty() || d.eq_ignore_ascii_case("cpu") || d.starts_with("cpu ") {
        return None;
    }
    match RanOn::parse(d) {
        RanOn::Cpu => None,
        RanOn::Cuda {
            name: Some(name), ..
        } => Some(name),
        _ => Some(d.to_string()),
    }
}

/// The problem, linked to its plot on the dashboard when the run names one.
fn problem_cell(report: &Report, problem: &str) -> String {
    match report
        .run
        .dashboard_url
        .as_deref()
        .filter(|u| u.starts_with("https://"))
    {
        Some(url) => format!(
            "[{}]({}/#{})",
            cell(problem),
            url.trim_end_matches('/'),
            crate::schema::problem_anchor(problem)
        ),
        None => cell(problem),
    }
}

/// The commit the run judged (its short SHA, linked to the commit when the repository is known)
/// and the workflow run that holds the full report; `None` when the head is no commit SHA.
fn commit_line(report: &Report) -> Option<String> {
    let sha = head_commit(report)?;
    let short = &sha[..7];
    let commit = match repo_url(report) {
        Some(repo) => format!("[`{short}`]({repo}/commit/{sha})"),
        None => format!("`{short}`"),
    };
    let run = match &report.run.artifact_url {
        Some(url) => format!(" · [workflow run]({url})"),
        None => String::new(),
    };
    Some(format!("Commit {commit}{run}"))
}

/// The head as a commit SHA (7 to 40 hex digits), the only form a link may carry: a report is
/// data, and a fork's artifact could say anything here.
fn head_commit(report: &Report) -> Option<&str> {
    let sha = report.run.head_sha.as_str();
    ((7..=40).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit())).then_some(sha)
}

/// `<server>/<owner>/<name>`; on GitHub Enterprise Server the server the workflow runs on.
fn repo_url(report: &Report) -> Option<String> {
    if report.run.repo.is_empty() {
        return None;
    }
    let server = std::env::var("GITHUB_SERVER_URL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "https://github.com".into());
    Some(format!(
        "{}/{}",
        server.trim_end_matches('/'),
        report.run.repo
    ))
}

/// Where kernelgate's documentation lives.
const DOCS_URL: &str = "https://github.com/kernelgate/kernelgate/blob/main/docs";

/// The documentation of a finding's rule: the lint rules' table, the timing findings, the
/// harness's runtime checks.
fn rule_docs(rule: &str) -> String {
    let page = if rule.starts_with("timing/") {
        "timing.md#findings"
    } else if rule.starts_with("eval/") {
        "eval.md"
    } else if rule.starts_with("audit/") {
        "policy.md#the-op-audit"
    } else {
        "rules.md"
    };
    format!("{DOCS_URL}/{page}")
}

/// The documentation of a policy condition.
fn condition_docs(c: kernelgate_model::Condition) -> String {
    use kernelgate_model::Condition as C;
    let page = match c {
        C::LintError | C::LintWarning => "rules.md",
        C::EscapedWork | C::ImplausibleTime | C::ExcessiveSpeedup => "timing.md#findings",
        C::Regression | C::NoSpeedup | C::BaselineMismatch => "timing.md#baselines",
        C::LowCustomShare | C::PartialReplacement => "policy.md#the-op-audit",
        _ => "policy.md",
    };
    format!("{DOCS_URL}/{page}")
}

/// A message's first sentence, at most 200 characters: the statistics behind it stay in
/// report.json.
fn first_sentence(m: &str) -> String {
    let line = one_line(m);
    let end = line
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .find(|&i| {
            // Not a decimal point or an abbreviation such as "e.g.".
            !line[..i].ends_with("e.g.") && !line[..i].ends_with("i.e.")
        })
        .unwrap_or(line.len());
    clip(&line[..end], 200)
}

/// The one command that reproduces a failing row on a contributor's machine: the eval with the
/// row's seed, or the linter when the lint stopped the kernel before any eval.
fn reproduce_command(r: &KernelRow) -> String {
    let path = shell_word(&r.path);
    if matches!(r.outcome.kind, OutcomeKind::NotRun | OutcomeKind::Skipped) {
        return format!("kernelgate lint {path}");
    }
    let mut cmd = format!("kernelgate eval --kernel {path}");
    if !r.problem.is_empty() {
        cmd.push_str(&format!(" --problem {}", shell_word(&r.problem)));
    }
    if let Some(seed) = r.seed {
        cmd.push_str(&format!(" --seed {seed}"));
    }
    cmd
}

/// A word a shell reads back as itself: single-quoted unless it is plain.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | ':' | '=')
        });
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub(crate) fn link(report: &Report, path: &str, line: Option<u32>) -> Option<String> {
    let sha = head_commit(report)?;
    let repo = repo_url(report)?;
    let anchor = line.map(|l| format!("#L{l}")).unwrap_or_default();
    let path: String = path
        .chars()
        .map(|c| match c {
            ' ' => "%20".to_string(),
            '(' => "%28".to_string(),
            ')' => "%29".to_string(),
            '<' => "%3C".to_string(),
            '>' => "%3E".to_string(),
            '"' => "%22".to_string(),
            '#' => "%23".to_string(),
            '?' => "%3F".to_string(),
            '|' => "%7C".to_string(),
            '`' => "%60".to_string(),
            '[' => "%5B".to_string(),
            ']' => "%5D".to_string(),
            '\\' => "%5C".to_string(),
            c if c.is_control() => String::new(),
            c => c.to_string(),
        })
        .collect();
    Some(format!("{repo}/blob/{sha}/{path}{anchor}"))
}

/// Unique bar labels from the paths: the last two components (`3_ReLU/cpp`), more of the path
/// where those collide, and a counter as a last resort.
fn chart_labels(paths: &[&str]) -> Vec<String> {
    let clean = |s: &str| -> String {
        let s: String = s
            .chars()
            .filter(|c| !matches!(c, '"' | '[' | ']' | ',' | '\n'))
            .collect();
        let n = s.chars().count();
        if n > 40 {
            format!("…{}", s.chars().skip(n - 39).collect::<String>())
        } else {
            s
        }
    };
    let tail = |p: &str, k: usize| -> String {
        let p = p.strip_suffix(".py").unwrap_or(p);
        let p = p.strip_prefix("kernels/").unwrap_or(p);
        let parts: Vec<&str> = p.split('/').collect();
        parts[parts.len().saturating_sub(k)..].join("/")
    };
    let short: Vec<String> = paths.iter().map(|p| clean(&tail(p, 2))).collect();
    let mut labels: Vec<String> = short
        .iter()
        .zip(paths)
        .map(|(l, p)| {
            if short.iter().filter(|o| *o == l).count() > 1 {
                clean(&tail(p, usize::MAX))
            } else {
                l.clone()
            }
        })
        .collect();
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for l in labels.iter_mut() {
        let n = seen.entry(l.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            l.push_str(&format!(" #{n}"));
        }
    }
    labels
}

pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

fn speedup(i: Option<&Interval>) -> String {
    match i {
        None => "–".into(),
        Some(i) => match (i.lo, i.hi) {
            (Some(lo), Some(hi)) => format!("{:.2}× <sub>[{lo:.2}, {hi:.2}]</sub>", i.value),
            _ => format!("{:.2}×", i.value),
        },
    }
}

/// The comparison as a speedup, the direction of every other column (higher is faster): the
/// ratio candidate/other time 0.80 is "1.25×".
fn comparison(c: Option<&ComparisonSummary>) -> String {
    let Some(c) = c else { return "–".into() };
    let interval = match (c.ci_lo, c.ci_hi) {
        (Some(lo), Some(hi)) if lo > 0.0 && hi > 0.0 => {
            format!(" <sub>[{:.2}, {:.2}]</sub>", 1.0 / hi, 1.0 / lo)
        }
        _ => String::new(),
    };
    let mark = match c.verdict {
        ComparisonVerdict::Faster => "🟢 faster",
        ComparisonVerdict::Slower => "🔴 slower",
        ComparisonVerdict::Same => "⚪ same",
        ComparisonVerdict::Invalid => "⚠️ invalid",
    };
    let against = match &c.against {
        Some(a) => format!("<br><sub>{}</sub>", a.kind.label()),
        None => String::new(),
    };
    if c.ratio.is_finite() && c.ratio > 0.0 {
        format!("{:.2}×{interval} {mark}{against}", 1.0 / c.ratio)
    } else {
        format!("{mark}{against}")
    }
}

/// Table cells: plain text, escaped (no newlines, no pipes, no markup).
fn cell(s: &str) -> String {
    text(s)
}

/// Candidate-controlled text as plain Markdown text on one line: HTML is escaped, Markdown
/// punctuation that could start emphasis, links, images, code or a table cell is
/// backslash-escaped, and `@mentions` and bare URLs are broken with a zero-width space.
pub(crate) fn text(s: &str) -> String {
    let line = one_line(s);
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '@' => out.push_str("@\u{200b}"),
            c => out.push(c),
        }
    }
    out.replace("://", ":\u{200b}//")
        .replace("www.", "www\u{200b}.")
}

/// Candidate-controlled text as an inline code span on one line: the fence is longer than any
/// run of backticks inside, so the text cannot close it (code spans render nothing else).
pub(crate) fn code(s: &str) -> String {
    let line = one_line(s);
    let longest = line.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if line.starts_with('`') || line.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{line}{pad}{fence}")
}

/// [`code`] inside a table row: GitHub splits rows at `|` even inside code spans.
fn code_cell(s: &str) -> String {
    code(s).replace('|', "\\|")
}

/// The largest index `<= max` that is a char boundary of `s`.
pub(crate) fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

/// One line, at most 1,000 characters: messages come from candidates and compilers.
fn one_line(s: &str) -> String {
    clip(&s.split_whitespace().collect::<Vec<_>>().join(" "), 1000)
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

fn html(s: &str) -> String {
    one_line(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('@', "@\u{200b}")
}

impl OutcomeKind {
    pub fn is_failure(self) -> bool {
        is_failure(self)
    }
}

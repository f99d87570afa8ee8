//! What the gate has to say while it runs, as typed events: the library never prints, the
//! command that runs the gate ([`Observer`]) decides where each event goes and whether it is
//! said at all (`--quiet`, GitHub Actions' annotations and groups). Each event's `Display` is
//! its line as a terminal shows it.

use kernelgate_report::{ConfigSource, KernelRow, Summary};
use std::fmt;
use std::path::{Path, PathBuf};

use super::evaluator::Device;
use super::shard::Shard;

/// Hears the gate's events as they happen: progress streams while kernels run.
pub trait Observer {
    fn event(&self, event: &Event<'_>);
}

/// Says nothing: for callers that want the report only.
pub struct Silent;

impl Observer for Silent {
    fn event(&self, _: &Event<'_>) {}
}

impl<F: Fn(&Event<'_>)> Observer for F {
    fn event(&self, event: &Event<'_>) {
        self(event)
    }
}

/// One thing the gate says, in the order it happens.
#[derive(Debug)]
pub enum Event<'a> {
    /// The plan's size and the commits it spans.
    Planned {
        kernels: usize,
        shard: Option<Shard>,
        merge_base: &'a str,
        head: &'a str,
    },
    /// Where the judging config came from.
    JudgedWith(&'a ConfigSource),
    /// A judgment setting or a reference problem the pull request changes, about `file`.
    Changed {
        file: &'a str,
        message: String,
    },
    /// The check run could not be opened; it is created when the report is published.
    CheckRunNotOpened(String),
    /// A GPU runner's CPUs shared out between CPU kernels and the rest.
    Lanes {
        lanes: usize,
        cpus_each: usize,
        cpu_kernels: usize,
        gpu_side: usize,
    },
    Building {
        path: &'a str,
        problem: &'a str,
    },
    /// A build ahead of the device failed; the eval builds it again (`error`: its first line).
    BuildNotAhead {
        path: &'a str,
        error: String,
    },
    Evaluating {
        path: &'a str,
        device: Device,
    },
    /// A kernel is finished (linted out, skipped or evaluated).
    Finished(Finished<'a>),
    /// The base compared with main's history (docs/history.md).
    HistoryCompared {
        kernels: usize,
        store: &'a Path,
    },
    HistoryUnusable(String),
    /// How many kernels' builds came from the build store and how many were compiled.
    Builds(kernelgate_report::BuildCounts),
    PublishFailed(String),
    /// What publishing the report did (a line of [`crate::ops::publish::published_lines`]).
    Published(String),
    /// The run's verdict and where its report is.
    Verdict {
        summary: &'a Summary,
        report: PathBuf,
    },
}

/// What an event is to whoever shows it: the observer picks a stream for each kind, and a
/// quiet one says only notices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// What the run finds: the plan, the judging config, each kernel, the verdict.
    Result,
    /// Work under way: lanes, builds, evals.
    Progress,
    /// Trouble the gate goes on after, and what publishing did: said even when quiet.
    Notice,
}

impl Event<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            Event::CheckRunNotOpened(_)
            | Event::HistoryUnusable(_)
            | Event::PublishFailed(_)
            | Event::Published(_) => Kind::Notice,
            Event::Lanes { .. }
            | Event::Building { .. }
            | Event::BuildNotAhead { .. }
            | Event::Evaluating { .. } => Kind::Progress,
            _ => Kind::Result,
        }
    }
}

/// A finished kernel: `n` of `total` are done, this one included.
#[derive(Debug)]
pub struct Finished<'a> {
    pub n: usize,
    pub total: usize,
    pub row: &'a KernelRow,
    pub problem: &'a str,
    /// `None`: it never reached a device.
    pub device: Option<Device>,
}

impl Finished<'_> {
    /// `[n/total] problem path outcome speedup -> verdict (device)`.
    pub fn headline(&self) -> String {
        let row = self.row;
        let mut line = format!(
            "[{}/{}] {} {} {}",
            self.n,
            self.total,
            if self.problem.is_empty() {
                "?"
            } else {
                self.problem
            },
            row.path,
            row.outcome.kind.as_str()
        );
        if let Some(s) = row.speedup_eager {
            line.push_str(&format!(" {:.2}x", s.value));
        }
        line.push_str(&format!(" -> {}", row.verdict.as_str()));
        if let Some(d) = self.device {
            line.push_str(&format!(" ({d})"));
        }
        if let Some(b) = row.time_spent.as_ref().and_then(|t| t.build) {
            line.push_str(&format!(" [build: {}]", b.as_str()));
        }
        line
    }

    /// The headline as a GitHub Actions `::group::` folding the reasons, the outcome's message
    /// and the log's tail.
    pub fn actions_group(&self) -> String {
        let row = self.row;
        let mut text = format!("::group::{}", self.headline());
        for r in &row.reasons {
            text.push_str(&format!("\n  {r}"));
        }
        if !row.outcome.message.is_empty() {
            text.push_str(&format!("\n  {}", row.outcome.message));
        }
        if let Some(tail) = &row.outcome.log_tail {
            text.push_str(&format!("\n{tail}"));
        }
        text.push_str("\n::endgroup::");
        text
    }
}

/// The headline, then the row's reasons indented.
impl fmt::Display for Finished<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.headline())?;
        for r in &self.row.reasons {
            write!(f, "\n    {r}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = |sha: &str| sha[..sha.len().min(10)].to_string();
        match self {
            Event::Planned {
                kernels,
                shard,
                merge_base,
                head,
            } => write!(
                f,
                "kernelgate pr: {kernels} kernel(s) to evaluate{} ({}..{})",
                shard.map(|s| format!(" in shard {s}")).unwrap_or_default(),
                short(merge_base),
                short(head)
            ),
            Event::JudgedWith(source) => write!(f, "judged with {source}"),
            Event::Changed { message, .. } => write!(f, "warning: {message}"),
            Event::CheckRunNotOpened(e) => write!(f, "warning: cannot open the check run: {e}"),
            Event::Lanes {
                lanes,
                cpus_each,
                cpu_kernels,
                gpu_side,
            } => write!(
                f,
                "kernelgate: {lanes} CPU lane(s) of {cpus_each} CPUs each for the {cpu_kernels} CPU kernel(s); builds and GPU evals on the other {gpu_side} CPUs"
            ),
            Event::Building { path, problem } => write!(f, "  building {path} ({problem})"),
            Event::BuildNotAhead { path, error } => write!(
                f,
                "  build of {path} did not finish ahead ({error}); the eval builds it"
            ),
            Event::Evaluating { path, device } => write!(f, "  evaluating {path} on {device}"),
            Event::Finished(done) => write!(f, "{done}"),
            Event::HistoryCompared { kernels, store } => write!(
                f,
                "history: {kernels} kernel(s) compared with {}",
                store.display()
            ),
            Event::HistoryUnusable(e) => {
                write!(f, "warning: the history store is not usable: {e}")
            }
            Event::Builds(counts) => write!(f, "builds: {counts}"),
            Event::PublishFailed(e) => write!(f, "error: publishing the report failed: {e}"),
            Event::Published(line) => write!(f, "{line}"),
            Event::Verdict { summary: s, report } => write!(
                f,
                "verdict: {} ({} passed, {} warned, {} failed, {} skipped); report in {}",
                s.verdict.as_str(),
                s.passed,
                s.warned,
                s.failed,
                s.skipped,
                report.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_report::{Change, Interval, OutcomeKind, OutcomeSummary, Verdict};

    fn row() -> KernelRow {
        let mut row = KernelRow::new(
            "kernels/relu.py",
            "level1/19_ReLU",
            kernelgate_model::Backend::Cuda,
            Default::default(),
            Change::Added,
            OutcomeSummary::new(OutcomeKind::Correct, "passed 5 correctness trials"),
        );
        row.speedup_eager = Some(Interval::new(1.234, 1.2, 1.3));
        row.verdict = Verdict::Warn;
        row.reasons = vec!["first reason".into(), "second reason".into()];
        row
    }

    #[test]
    fn a_finished_kernel_reads_as_its_headline_and_indented_reasons() {
        let row = row();
        let done = Finished {
            n: 2,
            total: 5,
            row: &row,
            problem: "",
            device: Some(Device::Cuda(1)),
        };
        let head = format!(
            "[2/5] ? kernels/relu.py {} 1.23x -> warn ({})",
            row.outcome.kind.as_str(),
            Device::Cuda(1)
        );
        assert_eq!(done.headline(), head);
        assert_eq!(
            Event::Finished(done).to_string(),
            format!("{head}\n    first reason\n    second reason")
        );
    }

    #[test]
    fn inside_actions_a_finished_kernel_is_one_group_with_its_message_and_log() {
        let mut row = row();
        row.outcome.log_tail = Some("last log line".into());
        let done = Finished {
            n: 1,
            total: 1,
            row: &row,
            problem: "level1/19_ReLU",
            device: None,
        };
        assert_eq!(
            done.actions_group(),
            format!(
                "::group::{}\n  first reason\n  second reason\n  passed 5 correctness trials\nlast log line\n::endgroup::",
                done.headline()
            )
        );
    }

    #[test]
    fn the_run_is_announced_and_closed_with_short_commits_and_the_verdict() {
        let planned = Event::Planned {
            kernels: 3,
            shard: Some("2/4".parse().unwrap()),
            merge_base: "0123456789abcdef",
            head: "fedcba9876543210",
        };
        assert_eq!(
            planned.to_string(),
            "kernelgate pr: 3 kernel(s) to evaluate in shard 2/4 (0123456789..fedcba9876)"
        );
        let summary = Summary {
            verdict: Verdict::Fail,
            passed: 1,
            warned: 2,
            failed: 3,
            skipped: 4,
            ..Summary::default()
        };
        let verdict = Event::Verdict {
            summary: &summary,
            report: PathBuf::from("kg-out/report.json"),
        };
        assert_eq!(
            verdict.to_string(),
            "verdict: fail (1 passed, 2 warned, 3 failed, 4 skipped); report in kg-out/report.json"
        );
    }
}

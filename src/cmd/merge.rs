//! `kernelgate merge`: join the reports of a sharded run (workflow matrix) into one report and
//! render it, so one check run and one comment cover every shard.

use anyhow::Context;
use kernelgate_report::{Report, Verdict};
use std::path::PathBuf;

use crate::cli::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shards' report.json files.
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// Directory for the merged report.json, comment.md, summary.md and results.sarif.
    #[arg(long)]
    pub out: PathBuf,
}

/// Exit code: 1 when the merged verdict fails, else 0 (like `kernelgate pr`).
pub fn run(_cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let reports = args
        .reports
        .iter()
        .map(|p| Report::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let merged = kernelgate_report::merge(reports)?;
    let rendered = kernelgate_report::render_all(&merged, &args.out).with_context(|| {
        format!(
            "cannot write the merged report into `{}`",
            args.out.display()
        )
    })?;
    let s = &merged.summary;
    println!(
        "{} {}: {} kernel(s) from {} report(s), {} failed, {} warned{} → {}",
        s.verdict.emoji(),
        s.verdict.as_str(),
        s.total,
        args.reports.len(),
        s.failed,
        s.warned,
        if merged.run.complete {
            ""
        } else {
            " (incomplete: a shard is missing or unfinished)"
        },
        rendered.report_json.display()
    );
    Ok(if s.verdict == Verdict::Fail { 1 } else { 0 })
}

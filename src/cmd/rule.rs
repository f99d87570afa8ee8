//! `kernelgate rule`: the documentation of one rule, or of all of them.

use crate::cli::Cli;
use kernelgate_lint::RuleMeta;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rule code, e.g. KG101.
    #[arg(required_unless_present = "all")]
    pub code: Option<String>,
    /// Every rule.
    #[arg(long)]
    pub all: bool,
    /// Markdown (the text of docs/rules.md).
    #[arg(long)]
    pub markdown: bool,
}

pub fn run(_cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    if args.all {
        if args.markdown {
            print!("{}", kernelgate_lint::docs::markdown());
        } else {
            for r in kernelgate_lint::rules() {
                println!(
                    "{}  {:<8} {:<28} {}",
                    r.code,
                    r.severity.as_str(),
                    r.name,
                    r.summary
                );
            }
        }
        return Ok(0);
    }
    let code = args.code.as_deref().unwrap_or_default();
    let Some(r) = kernelgate_lint::rule(code) else {
        eprintln!("error: unknown rule `{code}`; `kernelgate rule --all` lists them");
        return Ok(2);
    };
    if args.markdown {
        print!("{}", kernelgate_lint::docs::rule_markdown(r));
    } else {
        print!("{}", text(r));
    }
    Ok(0)
}

fn text(r: &RuleMeta) -> String {
    let indent = |s: &str| s.lines().map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        "{} ({}) [{}]\n\n{}\n\n{}\n\nError: {}.\nWarning: {}.\n\nBad:\n{}\nGood:\n{}",
        r.code,
        r.name,
        r.severity,
        r.summary,
        r.doc,
        r.error_when,
        r.warn_when,
        indent(r.bad),
        indent(r.good)
    )
}

//! `kernelgate dashboard`: the history's static dashboard ([`kernelgate::ops::history::dashboard`]).

use kernelgate::ops::history::{dashboard, DashboardOptions};
use std::path::PathBuf;

use crate::cli::{Cli, RuleArgs, StoreArg};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory for index.html, data.json and .nojekyll.
    #[arg(long)]
    pub out: PathBuf,
    /// `owner/name` shown in the header (default: `$GITHUB_REPOSITORY`).
    #[arg(long, env = "GITHUB_REPOSITORY", default_value = "")]
    pub name: String,
    /// The repository's web address; every point links to `<URL>/commit/<sha>` (default: the
    /// `origin` remote's when it is on github.com; otherwise no links).
    #[arg(long, value_parser = web_url)]
    pub repo_url: Option<String>,
    #[command(flatten)]
    pub rule: RuleArgs,
    #[command(flatten)]
    pub store: StoreArg,
}

/// `--repo-url`: an `http(s)://` address, the only kind the page links to.
fn web_url(s: &str) -> Result<String, String> {
    let lower = s.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        Ok(s.trim_end_matches('/').to_string())
    } else {
        Err("expected the repository's web address, `https://github.com/owner/name`".into())
    }
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let opts = DashboardOptions {
        out: args.out.clone(),
        name: args.name.clone(),
        repo_url: args.repo_url.clone(),
        rule: args.rule.options(),
    };
    print!("{}", dashboard(&cli.repo, &args.store.options(cli), &opts)?);
    Ok(0)
}

//! `kernelgate pch`: precompile torch's extension header once for this runner's C++ extension
//! builds, and the interpreter's bytecode where torch was installed without its own
//! ([`kernelgate_eval::build_pch`]); every later job reads them, none can write them.

use anyhow::Context;
use kernelgate_eval::{build_pch, pch_root, PchBuild, PCH_DIR_ENV};
use kernelgate_model::Config;
use std::path::PathBuf;

use crate::cli::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the entries go. Default: where jobs look, `$KERNELGATE_PCH_DIR`, else
    /// `~/.cache/kernelgate/pch`.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

pub fn run(cli: &Cli, args: &Args) -> anyhow::Result<i32> {
    let cfg = Config::load(&cli.repo, cli.config.as_deref())?;
    let python = kernelgate_eval::runner_python(&cfg, &cli.repo);
    let harness = kernelgate_eval::find_harness()?;
    let looked_in = pch_root();
    let root = match (&args.dir, &looked_in) {
        (Some(dir), _) => dir.clone(),
        (None, Some(root)) => root.clone(),
        (None, None) => anyhow::bail!(
            "no place for the precompiled header: {PCH_DIR_ENV} is off or HOME is unset; \
             pass --dir or set {PCH_DIR_ENV}"
        ),
    };
    if looked_in.as_ref() != Some(&root) {
        eprintln!(
            "note: jobs look in {}; set {PCH_DIR_ENV}={} for them to use this one",
            looked_in.map_or_else(|| "no directory".into(), |p| p.display().to_string()),
            root.display()
        );
    }
    let scratch = tempfile::Builder::new()
        .prefix("kernelgate-pch-")
        .tempdir()?;
    let ended = build_pch(&python, &harness, &root, scratch.path()).with_context(|| {
        format!(
            "starting {} (set KERNELGATE_PYTHON or [harness] python to a Python with torch)",
            python.display()
        )
    })?;
    match ended {
        PchBuild::Done(said) => {
            println!("{said}");
            Ok(0)
        }
        PchBuild::Failed(why) => {
            eprintln!(
                "error: precompiling torch/extension.h or Python's bytecode into {} failed \
                 ({why}); jobs go on without what is missing",
                root.display()
            );
            Ok(1)
        }
    }
}

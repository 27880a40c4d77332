//! `rulegym phantomwiki verify PWDIR`: import a PhantomWiki 1.0.3 output directory, answer every
//! question with the engine and rulegym's rule base, compare the articles, print a JSON report.

use rulegym::dataset::phantomwiki::{read_dir, verify_dir};
use rulegym::{Error, Result};
use std::path::PathBuf;

/// Flags of `rulegym phantomwiki`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Answer every question of a PhantomWiki output directory (facts.pl, questions.json,
    /// articles.json) with rulegym's engine and compare. Prints a JSON report (and one line
    /// per question shape on stderr); exits 1 when a question disagrees, fails or is malformed,
    /// or an article states different sentences or facts (ambiguous questions do not fail).
    Verify {
        /// The PhantomWiki output directory.
        dir: PathBuf,
        /// Print the report on one line.
        #[arg(long)]
        compact: bool,
    },
}

/// Runs `rulegym phantomwiki`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Verify { dir, compact } => {
            let pw = read_dir(&dir)?;
            let report = verify_dir(&pw)?;
            let json = if compact {
                serde_json::to_string(&report)
            } else {
                serde_json::to_string_pretty(&report)
            }
            .map_err(|source| Error::Json {
                context: "serialising the report".into(),
                source,
            })?;
            println!("{json}");
            let q = &report.questions;
            for (shape, c) in &q.by_shape {
                eprintln!(
                    "{shape}: {} questions, {} agree, {} disagree, {} errors, {} ambiguous, {} malformed",
                    c.questions, c.agree, c.disagree, c.errors, c.ambiguous, c.malformed
                );
            }
            if report.ok() {
                Ok(())
            } else {
                let articles = report.articles.as_ref().map_or(String::new(), |a| {
                    format!(
                        ", {} articles differ, {} state other facts, {} missing",
                        a.differ,
                        a.facts_differ,
                        a.missing + a.people_without_article
                    )
                });
                Err(Error::Config(format!(
                    "{}: {} of {} questions disagree, {} failed, {} malformed ({} ambiguous){articles}",
                    dir.display(),
                    q.disagree,
                    q.questions,
                    q.errors,
                    q.malformed,
                    q.ambiguous
                )))
            }
        }
    }
}

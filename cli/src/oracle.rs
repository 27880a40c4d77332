//! `rulegym oracle`: proof-derived trajectories replayed in the search environment.

use rayon::prelude::*;
use rulegym::Result;
use rulegym::dataset::load_universe;
use rulegym::question::Question;
use rulegym::retrieval::SearchIndex;
use rulegym::search::oracle::replay;
use rulegym::search::{Retriever, SearchEnvConfig};
use rulegym::universe::Universe;
use std::path::PathBuf;
use std::sync::Arc;

/// The dataset and index flags of the commands that play the search environment.
#[derive(clap::Args, Debug)]
pub struct SearchData {
    /// A directory written by `rulegym generate` (universe and questions.jsonl).
    #[arg(long)]
    dataset: PathBuf,
    /// A search index over the dataset's articles [default: the dataset's own `index.idx`,
    /// written by `rulegym generate`; or one built by `rulegym index`].
    #[arg(long)]
    index: Option<PathBuf>,
}

impl SearchData {
    /// Loads the universe, its questions (file order) and the index.
    pub fn load(&self) -> Result<(Universe, Vec<Question>, Arc<dyn Retriever>)> {
        let universe = load_universe(&self.dataset)?;
        let questions = rulegym::dataset::load_questions(&self.dataset)?;
        let path = self
            .index
            .clone()
            .unwrap_or_else(|| self.dataset.join(rulegym::dataset::INDEX_FILE));
        let index: Arc<dyn Retriever> = Arc::new(SearchIndex::load(&path)?);
        Ok((universe, questions, index))
    }
}

/// Flags of `rulegym oracle`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: SearchData,
    /// Output JSONL: one line per question (id, messages, f1, retrieval_misses, failure).
    #[arg(long)]
    out: PathBuf,
    /// Passages per search.
    #[arg(long, default_value_t = 3)]
    top_k: usize,
}

/// Runs `rulegym oracle`.
pub fn run(args: Args) -> Result<()> {
    let (universe, questions, index) = args.data.load()?;
    let config = SearchEnvConfig {
        top_k: args.top_k,
        ..SearchEnvConfig::default()
    };
    let (mut perfect, mut reasons) = (0usize, std::collections::BTreeMap::<String, usize>::new());
    // Questions replay independently: in parallel, collected in question order.
    let trajectories: Vec<_> = questions
        .par_iter()
        .map(|q| replay(&universe, index.clone(), &config, q))
        .collect::<Result<_>>()?;
    for t in &trajectories {
        if t.f1 == 1.0 {
            perfect += 1;
        } else {
            let reason = if t.retrieval_misses.is_empty() {
                "answer"
            } else {
                "retrieval miss"
            };
            *reasons.entry(reason.to_owned()).or_default() += 1;
        }
    }
    rulegym::io::write_jsonl(&args.out, &trajectories)?;
    println!(
        "{perfect} of {} oracle trajectories replay to F1 = 1 ({:.1}%)",
        questions.len(),
        100.0 * perfect as f64 / questions.len().max(1) as f64
    );
    for (reason, n) in reasons {
        println!("  {n} failed: {reason}");
    }
    Ok(())
}

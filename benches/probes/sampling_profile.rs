//! Where question sampling spends its time: index build, certifier table, proposals with and
//! without certificates. `cargo run --release --example sampling_profile -- [trees] [per-cell] [families]`
use rulegym::dataset::build::article_index;
use rulegym::question::{self, QuestionConfig};
use rulegym::search::oracle::Certifier;
use rulegym::universe::{Universe, UniverseConfig};
use std::time::Instant;

fn main() -> rulegym::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let trees = args.first().map_or(100, |a| a.parse().expect("trees"));
    let per = args.get(1).map_or(10, |a| a.parse().expect("per-cell"));
    let families = args.get(2).map_or("base".to_owned(), |a| a.clone());
    let universe = Universe::generate(&UniverseConfig {
        num_family_trees: trees,
        ..Default::default()
    })?;
    let config = QuestionConfig {
        families: families
            .split(',')
            .map(|f| f.parse().map_err(rulegym::Error::Config))
            .collect::<rulegym::Result<_>>()?,
        per_template: per,
        ..Default::default()
    };
    let t = Instant::now();
    let articles = rulegym::corpus::articles(&universe);
    println!("articles: {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let index = article_index(&articles)?;
    println!("index: {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let certifier = Certifier::new(&universe, &index, config.solvability)?;
    println!("certifier name table: {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let plain = question::propose_all(&universe, &config, None)?;
    println!(
        "proposals without certificates: {:.3} s ({} questions)",
        t.elapsed().as_secs_f64(),
        plain.questions().len()
    );
    let t = Instant::now();
    let certified = question::propose_all(&universe, &config, Some(&certifier))?;
    println!(
        "proposals with certificates: {:.3} s ({} questions)",
        t.elapsed().as_secs_f64(),
        certified.questions().len()
    );
    for (name, p) in [("without", &plain), ("with", &certified)] {
        println!("{name}: {:?}", p.report().total());
    }
    Ok(())
}

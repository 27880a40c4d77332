//! Many universes per process (`rulegym generate --seeds`): the same bytes as single-seed runs
//! whatever the workers or the engine reuse, nothing leaking between universes, bad input
//! refused before any work, and a failed universe leaving the others intact.

use super::cli;
use rulegym::Error;
use rulegym::dataset::batch::{self, Batch, BatchEvent, EngineSource, SeedRange};
use rulegym::dataset::{self, BuildConfig};
use rulegym::engine::{Engine, Term, Value, Var};
use rulegym::io::sha256_hex;
use rulegym::question::QuestionConfig;
use rulegym::universe::{Universe, UniverseConfig};
use std::path::Path;

fn small(trees: usize) -> BuildConfig {
    BuildConfig::new(
        UniverseConfig {
            num_family_trees: trees,
            ..Default::default()
        },
        Some(QuestionConfig {
            per_template: 2,
            ..Default::default()
        }),
    )
}

/// The files of a dataset directory, by name.
fn dir_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn single_run_files(config: &BuildConfig) -> Vec<(String, Vec<u8>)> {
    let mut files = dataset::build(config).unwrap().files().unwrap();
    files.sort();
    files
}

#[test]
fn every_universe_equals_its_single_seed_run_for_any_workers_and_engine_reuse() {
    let seeds: SeedRange = "4..=9".parse().unwrap();
    let base = small(12);
    // Warm engines kept for the whole batch, replaced after every universe, and in between;
    // one worker and two; forked children of one zygote engine (Linux) with two workers and one.
    let runs = [
        (1, usize::MAX, false),
        (2, usize::MAX, false),
        (2, 0, false),
        (1, 60_000, false),
        (2, 0, true),
        (1, 0, true),
    ];
    let root = tempfile::tempdir().unwrap();
    let mut started = Vec::new();
    for (i, (workers, budget, zygote)) in runs.into_iter().enumerate() {
        let out = root.path().join(format!("run{i}"));
        let batch = Batch {
            workers,
            engine_budget: budget,
            zygote,
            ..Batch::new(base.clone(), seeds)
        };
        let report = batch::generate(&batch, &out, false, &|_| {}).unwrap();
        assert_eq!(report.universes.len(), 6);
        assert_eq!(
            report.universes.iter().map(|f| f.seed).collect::<Vec<_>>(),
            (4..=9).collect::<Vec<_>>()
        );
        started.push(report.engines_started);
        for seed in seeds.seeds() {
            let single = single_run_files(&batch.config_for(seed));
            assert_eq!(
                dir_files(&Batch::dir(&out, seed)),
                single,
                "seed {seed}, {workers} workers, engine budget {budget}, zygote {zygote}"
            );
            let engine = &report.universes[(seed - 4) as usize].engine;
            let expected = match (zygote && cfg!(target_os = "linux"), budget) {
                (true, _) => Some(EngineSource::Forked),
                (false, 0) => Some(EngineSource::Started),
                _ => None,
            };
            if let Some(expected) = expected {
                assert_eq!(*engine, expected, "seed {seed}, run {i}");
            }
        }
    }
    // The budgets did what they say: one engine per worker, one per universe, in between.
    assert_eq!(started[0], 1);
    assert_eq!(started[1], 2);
    assert_eq!(started[2], 6);
    assert!(
        started[3] > 1 && started[3] < 6,
        "a 60 KB budget recycles some of the time: {}",
        started[3]
    );
    // The zygote starts one engine for the whole batch.
    let zygote_started = if cfg!(target_os = "linux") { 1 } else { 6 };
    assert_eq!(&started[4..], [zygote_started, zygote_started]);
}

#[test]
fn a_warm_engine_answers_the_default_universe_exactly_as_a_fresh_one() {
    // Seed 0 first, then seed 1 (the golden default universe) on the same warm engine: its
    // questions are the golden bytes that a fresh single-seed build gives.
    let batch = Batch {
        workers: 1,
        engine_budget: usize::MAX,
        ..Batch::new(
            BuildConfig::new(UniverseConfig::default(), Some(QuestionConfig::default())),
            "0..=1".parse().unwrap(),
        )
    };
    let built = batch::build_all(&batch).unwrap();
    let fresh = dataset::build(&batch.config_for(1)).unwrap();
    let bytes = |d: &dataset::Dataset| rulegym::io::jsonl_bytes(&d.questions).unwrap();
    assert_eq!(sha256_hex(&bytes(&built[1])), sha256_hex(&bytes(&fresh)));
    assert_eq!(built[1].files().unwrap(), fresh.files().unwrap());
    assert_ne!(bytes(&built[0]), bytes(&built[1]));
}

fn count(engine: &Engine, name: &str, arity: usize) -> i64 {
    let n = Var::new("N").unwrap();
    let head = Term::compound(name, (0..arity).map(|_| Term::var(&Var::anonymous())));
    let goal = Term::compound("count_solutions", [head, Term::var(&n)]);
    engine.query(&goal, std::slice::from_ref(&n)).unwrap()[0][0]
        .as_int()
        .unwrap()
}

#[test]
fn nothing_leaks_from_one_universe_into_the_next() {
    let big = Universe::generate(&UniverseConfig {
        num_family_trees: 8,
        ..Default::default()
    })
    .unwrap();
    let engine = Engine::new().unwrap();
    engine.replace_facts(&big.facts()).unwrap();
    assert_eq!(count(&engine, "person", 8), big.people.len() as i64);
    assert!(count(&engine, "with_job", 2) > 0);
    let someone = big.people[0].name.clone();

    // The next universe defines person/8 only: no job, hobby or birth-date index, none of the
    // previous people. A static reconsult would keep the old with_job/2 clauses.
    let next = "person('Ada Lone',female,'0001-02-03',pilot,chess,[],[],[]).\n";
    engine.replace_facts(next).unwrap();
    for (name, arity, want) in [
        ("person", 8, 1),
        ("with_job", 2, 0),
        ("with_hobby", 2, 0),
        ("with_dob", 2, 0),
    ] {
        assert_eq!(count(&engine, name, arity), want, "{name}/{arity}");
    }
    let g = Var::new("G").unwrap();
    let gender = |who: &str| {
        engine
            .query(
                &Term::compound("gender", [Term::atom(who), Term::var(&g)]),
                std::slice::from_ref(&g),
            )
            .unwrap()
    };
    assert!(gender(&someone).is_empty(), "{someone} leaked");
    assert_eq!(gender("Ada Lone"), vec![vec![Value::Atom("female".into())]]);

    // Back to the big universe: the rule base still answers over it.
    engine.replace_facts(&big.facts()).unwrap();
    assert_eq!(count(&engine, "person", 8), big.people.len() as i64);
    assert_eq!(gender("Ada Lone"), Vec::<Vec<Value>>::new());

    // An engine whose facts were consulted statically refuses, with an error, not a panic.
    let fixed = Engine::with_facts(next).unwrap();
    assert!(fixed.replace_facts(&big.facts()).is_err());
    assert_eq!(count(&fixed, "person", 8), 1);
}

#[test]
fn bad_seed_ranges_and_existing_outputs_fail_before_any_work() {
    for (text, says) in [
        ("5..5", "empty"),
        ("7..3", "reversed"),
        ("7..=3", "reversed"),
        ("x..4", "expected A..B"),
        ("12", "expected A..B"),
        ("-1..4", "expected A..B"),
    ] {
        let err = text.parse::<SeedRange>().unwrap_err().to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
    assert_eq!("3..=3".parse::<SeedRange>().unwrap().len(), 1);
    assert_eq!("3..5".parse::<SeedRange>().unwrap().len(), 2);

    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("many");
    std::fs::create_dir(&out).unwrap();
    let run = |extra: &[&str]| {
        cli::run(
            cli::rulegym()
                .args(["generate", "--quiet", "--num-family-trees", "3", "--out"])
                .arg(&out)
                .args(extra),
        )
    };
    for (flags, says) in [
        (vec!["--seeds", "1..3"], "already exists"),
        (vec!["--seeds", "4..4", "--force"], "empty"),
        (vec!["--seeds", "9..2", "--force"], "reversed"),
        (
            vec!["--seeds", "1..3", "--seed", "2"],
            "cannot be used with",
        ),
        (vec!["--workers", "2"], "--seeds"),
    ] {
        let o = run(&flags);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && stderr.contains(says),
            "{flags:?}: {stderr}"
        );
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            0,
            "{flags:?} wrote"
        );
    }
    // --force never replaces something that is not a dataset.
    std::fs::write(out.join("seed-2"), b"notes").unwrap();
    let o = run(&["--seeds", "1..3", "--force"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("refusing to replace"));
    assert!(
        !out.join("seed-1").exists(),
        "work started before the check"
    );
    assert_eq!(std::fs::read(out.join("seed-2")).unwrap(), b"notes");
}

#[test]
fn a_failed_universe_leaves_the_others_written_and_is_named() {
    for zygote in [false, true] {
        a_failed_universe_is_named(zygote);
    }
}

fn a_failed_universe_is_named(zygote: bool) {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("many");
    let batch = Batch {
        workers: 1,
        zygote,
        ..Batch::new(small(3), "1..=3".parse().unwrap())
    };
    // One worker builds the seeds in order; when seed 1 is written, a file takes seed 2's
    // place, so writing seed 2 fails (it is not a dataset directory) and seed 3 goes on.
    let blocker = Batch::dir(&out, 2);
    let report = batch::generate(&batch, &out, true, &|event| {
        if let BatchEvent::Written(f) = event
            && f.seed == 1
        {
            std::fs::write(&blocker, b"in the way").unwrap();
        }
    });
    match report {
        Err(Error::BatchFailed { written, failed }) => {
            assert_eq!(written, vec![1, 3]);
            assert_eq!(failed.len(), 1);
            assert_eq!(failed[0].0, 2);
            assert!(
                failed[0].1.contains("refusing to replace"),
                "zygote {zygote}: {}",
                failed[0].1
            );
        }
        other => panic!("expected a batch failure, got {other:?}"),
    }
    for seed in [1, 3] {
        let dir = Batch::dir(&out, seed);
        assert_eq!(
            dir_files(&dir),
            single_run_files(&batch.config_for(seed)),
            "seed {seed}"
        );
    }
    assert_eq!(std::fs::read(&blocker).unwrap(), b"in the way");

    // The CLI says which universe failed.
    let err = rulegym::Error::BatchFailed {
        written: vec![1, 3],
        failed: vec![(2, "boom".into())],
    };
    assert_eq!(err.to_string(), "1 of 3 universes failed: seed 2: boom");
}

#[test]
fn cli_seeds_write_one_directory_per_seed() {
    let root = tempfile::tempdir().unwrap();
    let many = root.path().join("many");
    cli::run_ok(
        cli::rulegym()
            .args([
                "generate",
                "--quiet",
                "--num-family-trees",
                "5",
                "--seeds",
                "2..=4",
                "--out",
            ])
            .arg(&many),
    );
    let one = root.path().join("one");
    cli::generate_small(&one);
    // generate_small is seed 3 with 5 trees: the batch's seed-3 is the same bytes.
    assert_eq!(dir_files(&Batch::dir(&many, 3)), dir_files(&one));
    let mut names: Vec<_> = std::fs::read_dir(&many)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["seed-2", "seed-3", "seed-4"]);
}

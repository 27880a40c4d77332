//! Loading dataset directories: every invariant the generator guarantees is checked on load with
//! an error naming the file and line; randomly mutated directories never make a loader or the
//! question generator panic, and a directory that loads generates verified questions.

use proptest::prelude::*;
use rulegym::dataset::{self, BuildConfig, PersonRecord};
use rulegym::engine::Engine;
use rulegym::question::{self, QuestionConfig};
use rulegym::universe::UniverseConfig;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A small valid dataset (12 trees, with questions), written once.
fn source() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let config = BuildConfig::new(
            UniverseConfig {
                num_family_trees: 12,
                ..UniverseConfig::default()
            },
            Some(QuestionConfig::default()),
        );
        dataset::build(&config)
            .unwrap()
            .write(&path, false)
            .unwrap();
        (dir, path)
    });
    path
}

fn records(dir: &Path) -> Vec<PersonRecord> {
    rulegym::io::read_jsonl(&dir.join("people.jsonl")).unwrap()
}

/// Writes `people` as the dataset's people.jsonl and updates the manifest's SHA-256, so the
/// loader's own checks (not the hash) must catch a broken record.
fn write_people(dir: &Path, people: &[u8]) {
    std::fs::write(dir.join("people.jsonl"), people).unwrap();
    let path = dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["sha256"]["people.jsonl"] = rulegym::io::sha256_hex(people).into();
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
}

fn copy(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(source()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// One semantic mutation of the people records, each breaking an invariant the generator
/// guarantees (`kind` modulo 14).
fn mutate(people: &mut Vec<PersonRecord>, kind: u8, a: usize, b: usize) {
    let n = people.len();
    let (a, b) = (a % n, b % n);
    let name_b = people[b].name.clone();
    let name_a = people[a].name.clone();
    match kind % 14 {
        0 => people[a].name = String::new(),
        1 => people[a].name.push('\0'),
        2 => {
            if a == b {
                people[a].name = people[(a + 1) % n].name.clone();
            } else {
                people[a].name = name_b;
            }
        }
        3 => people[a].parents = vec![name_a.clone(), name_a],
        4 => people[a]
            .parents
            .extend([name_b.clone(), name_b.clone(), name_b]),
        5 => people[a].dob = "2021-02-30".into(),
        6 => people[a].dob = "yesterday".into(),
        7 => people.clear(),
        8 => people[a].gender = "other".into(),
        9 => people[a].friends.push("Nobody Known".into()),
        10 => people[a].spouse = Some(name_a),
        11 => {
            // A one-sided friendship (or, when already friends, a repeated friend).
            if a == b {
                people[a].friends.push(name_a);
            } else {
                people[a].friends.push(name_b);
            }
        }
        12 => {
            people.remove(a);
        }
        _ => people[a].occupation = "\n".into(),
    }
}

#[test]
fn each_broken_invariant_is_an_error_naming_the_file_and_line() {
    let base = records(source());
    for kind in 0..14u8 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d");
        copy(&data);
        let mut people = base.clone();
        mutate(&mut people, kind, 5, 9);
        write_people(&data, &rulegym::io::jsonl_bytes(&people).unwrap());
        let err = dataset::load_universe(&data).unwrap_err().to_string();
        assert!(err.contains("people.jsonl"), "mutation {kind}: {err}");
        if kind != 7 {
            assert!(err.contains("line "), "mutation {kind}: {err}");
        }
    }
    // An edit that keeps every invariant (a new hobby) loads and generates verified questions.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    copy(&data);
    let mut people = base.clone();
    people[3].hobby = "zither".into();
    write_people(&data, &rulegym::io::jsonl_bytes(&people).unwrap());
    let universe = dataset::load_universe(&data).unwrap();
    let engine = Engine::with_facts(&universe.engine_facts()).unwrap();
    let (questions, _) =
        question::generate(&universe, &engine, &QuestionConfig::default(), None).unwrap();
    assert!(!questions.is_empty());
    // The untouched copy loads, and a modified questions.jsonl is refused by its hash.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    copy(&data);
    dataset::load_universe(&data).unwrap();
    assert!(!dataset::load_questions(&data).unwrap().is_empty());
    std::fs::write(data.join("questions.jsonl"), b"").unwrap();
    let err = dataset::load_questions(&data).unwrap_err().to_string();
    assert!(err.contains("SHA-256"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Random byte edits of people.jsonl (hash updated) or manifest.json: loading never panics,
    /// and whatever loads generates engine-verified questions without a disagreement.
    #[test]
    fn mutated_dataset_directories_never_panic(
        target in 0u8..3,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        kind in any::<u8>(),
        a in any::<usize>(),
        b in any::<usize>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d");
        copy(&data);
        match target {
            0 => {
                let mut bytes = std::fs::read(data.join("people.jsonl")).unwrap();
                for (at, byte) in &edits {
                    let at = at % bytes.len();
                    bytes[at] = *byte;
                }
                write_people(&data, &bytes);
            }
            1 => {
                let mut people = records(&data);
                mutate(&mut people, kind, a, b);
                write_people(&data, &rulegym::io::jsonl_bytes(&people).unwrap());
            }
            _ => {
                let path = data.join("manifest.json");
                let mut bytes = std::fs::read(&path).unwrap();
                for (at, byte) in &edits {
                    let at = at % bytes.len();
                    bytes[at] = *byte;
                }
                std::fs::write(&path, bytes).unwrap();
            }
        }
        if let Ok(universe) = dataset::load_universe(&data) {
            let engine = Engine::with_facts(&universe.engine_facts()).unwrap();
            let config = QuestionConfig { per_template: 2, ..QuestionConfig::default() };
            let generated = question::generate(&universe, &engine, &config, None);
            prop_assert!(generated.is_ok(), "{:?}", generated.err());
        }
        let _ = dataset::load_questions(&data);
    }
}

/// A process id no process has (above Linux's largest `pid_max`).
const DEAD_PID: u32 = 4_194_999;

#[test]
fn force_replaces_only_datasets_or_empty_folders() {
    let dir = tempfile::tempdir().unwrap();
    let generate = |out: &Path| {
        super::cli::run(
            super::cli::rulegym()
                .args([
                    "generate",
                    "--quiet",
                    "--num-family-trees",
                    "3",
                    "--force",
                    "--out",
                ])
                .arg(out),
        )
    };
    // A regular file: refused before any work, left as it was.
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, b"keep me").unwrap();
    let o = generate(&file);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("refusing to replace"));
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // A folder that is not a dataset: refused, untouched.
    let other = dir.path().join("photos");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("a.jpg"), b"jpg").unwrap();
    let o = generate(&other);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(other.join("a.jpg")).unwrap(), b"jpg");
    // An empty folder and an existing dataset are replaced.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(generate(&empty).status.success());
    dataset::load_universe(&empty).unwrap();
    assert!(generate(&empty).status.success());
    dataset::load_universe(&empty).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(names.is_empty(), "leftovers {names:?}");
}

#[test]
fn leftovers_of_killed_writers_are_cleaned_or_restored() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    copy(&data);
    // A staging folder of a dead writer is removed by the next write.
    let stale = dir.path().join(format!(".d.tmp-{DEAD_PID}"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("facts.pl"), b"partial").unwrap();
    let universe = dataset::load_universe(&data).unwrap();
    let rebuilt = BuildConfig::new(universe.config.clone(), None);
    dataset::build(&rebuilt)
        .unwrap()
        .write(&data, true)
        .unwrap();
    assert!(!stale.exists());
    // A dead writer killed between moving NAME aside and renaming the new one in: NAME is
    // missing and `.NAME.old-PID` holds the old dataset; it is put back, never lost.
    let old = dir.path().join(format!(".d.old-{DEAD_PID}"));
    std::fs::rename(&data, &old).unwrap();
    dataset::check_output(&data, true).unwrap();
    assert!(!old.exists());
    dataset::load_universe(&data).unwrap();
    // A live writer's staging folder (this process's parent is alive) is left alone.
    let live = dir
        .path()
        .join(format!(".d.tmp-{}", std::os::unix::process::parent_id()));
    std::fs::create_dir(&live).unwrap();
    dataset::check_output(&data, true).unwrap();
    assert!(live.exists());
}

#[test]
fn a_kill_at_any_instant_leaves_the_old_or_the_new_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d");
    super::cli::generate_small(&out);
    for step in 0..16u64 {
        let mut child = super::cli::rulegym()
            .args([
                "generate",
                "--quiet",
                "--num-family-trees",
                "5",
                "--force",
                "--out",
            ])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5 + step * 12));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let universe = dataset::load_universe(&out)
            .unwrap_or_else(|e| panic!("after a kill at step {step}: {e}"));
        assert!(!universe.people.is_empty());
        assert!(!dataset::load_questions(&out).unwrap().is_empty());
    }
}

/// A question file about a dataset's universe (`rulegym questions --out FILE`) is played by
/// `oracle`, `export`, `openenv` and `mcp` with `--questions FILE` once the engine has checked
/// every gold answer; an edited answer is refused naming its line and question, and an edited
/// `questions.jsonl` of the dataset says how to play it.
#[test]
fn a_question_file_is_played_after_the_engine_checks_it() {
    use crate::cli::{generate_small, rulegym, run, run_ok};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_small(&data);
    let file = dir.path().join("q.jsonl");
    run_ok(
        rulegym()
            .args([
                "questions",
                "--quiet",
                "--families",
                "hops",
                "--per-template",
                "2",
            ])
            .arg("--universe")
            .arg(&data)
            .arg("--out")
            .arg(&file),
    );
    let lines = std::fs::read_to_string(&file).unwrap();
    let n = lines.lines().count();
    assert!(n >= 10, "{n} questions");
    let out = run_ok(
        rulegym()
            .args(["oracle", "--dataset"])
            .arg(&data)
            .arg("--questions")
            .arg(&file)
            .arg("--out")
            .arg(dir.path().join("oracle.jsonl")),
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("{n} of {n} oracle trajectories")),
        "{said}"
    );
    run_ok(
        rulegym()
            .args(["export", "--format", "trl", "--dataset"])
            .arg(&data)
            .arg("--questions")
            .arg(&file)
            .arg("--out")
            .arg(dir.path().join("trl.jsonl")),
    );
    let rows = std::fs::read_to_string(dir.path().join("trl.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), n);
    // The servers' world holds the file's questions.
    use rulegym::toolcall::{SearchWorld, World, WorldKind};
    let world = SearchWorld::load(
        &data,
        None,
        Some(&file),
        rulegym::search::SearchEnvConfig::default(),
    )
    .unwrap();
    assert_eq!(World::new("search", WorldKind::Search(world)).len(), n);

    // Beside a task file the flag has no questions to replace: refused, not ignored.
    let tasks = dir.path().join("tasks.jsonl");
    run_ok(
        rulegym()
            .args(["tools", "generate", "--count", "2", "--universe"])
            .arg(&data)
            .arg("--out")
            .arg(&tasks),
    );
    let out = run(rulegym()
        .args(["export", "--format", "trl", "--tasks"])
        .arg(&tasks)
        .arg("--questions")
        .arg(&file)
        .arg("--out")
        .arg(dir.path().join("tasks-trl.jsonl")));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not apply to --tasks"), "{err}");

    // One edited answer: refused before any work, naming the line and the question.
    let mut edited: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    edited[3]["answers"] = serde_json::json!(["Nobody Anybody"]);
    let bad = dir.path().join("bad.jsonl");
    let text: String = edited.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&bad, text).unwrap();
    let out = run(rulegym()
        .args(["oracle", "--dataset"])
        .arg(&data)
        .arg("--questions")
        .arg(&bad)
        .arg("--out")
        .arg(dir.path().join("o2.jsonl")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let id = edited[3]["id"].as_str().unwrap();
    assert!(
        err.contains("bad.jsonl line 4") && err.contains(id),
        "{err}"
    );
    assert!(err.contains("the engine answers"), "{err}");
    assert!(!dir.path().join("o2.jsonl").exists());

    // The dataset's own file edited: the error says what to do.
    std::fs::write(data.join("questions.jsonl"), &lines).unwrap();
    let out = run(rulegym()
        .args(["oracle", "--dataset"])
        .arg(&data)
        .arg("--out")
        .arg(dir.path().join("o3.jsonl")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("question set of its own"), "{err}");
}

/// `manifest.json` records the whole question configuration, so two datasets of one universe
/// and different question flags have different manifests; a manifest written without it (older
/// rulegym) still loads.
#[test]
fn the_manifest_records_the_question_config_and_old_ones_load() {
    use crate::cli::{rulegym, run_ok};
    let dir = tempfile::tempdir().unwrap();
    let manifest = |name: &str, extra: &[&str]| -> serde_json::Value {
        let out = dir.path().join(name);
        run_ok(
            rulegym()
                .args(["generate", "--quiet", "--num-family-trees", "4", "--out"])
                .arg(&out)
                .args(extra),
        );
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap()
    };
    let plain = manifest("plain", &[]);
    let hops = manifest(
        "hops",
        &["--families", "hops", "--per-template", "3", "--balance"],
    );
    assert_eq!(plain["config"], hops["config"]);
    assert_eq!(plain["questions"]["families"], serde_json::json!(["base"]));
    assert_eq!(hops["questions"]["families"], serde_json::json!(["hops"]));
    assert_eq!(hops["questions"]["per_template"], 3);
    assert_eq!(hops["questions"]["balance"], true);
    assert!(
        plain["questions"]["sampler"].is_string(),
        "{}",
        plain["questions"]
    );
    // The recorded configuration is the one that ran: it reproduces the questions.
    let config: rulegym::question::QuestionConfig =
        serde_json::from_value(hops["questions"].clone()).unwrap();
    let universe = dataset::load_universe(&dir.path().join("hops")).unwrap();
    let again = rulegym::dataset::build::build_questions(universe, config, 1).unwrap();
    assert_eq!(
        again.questions,
        dataset::load_questions(&dir.path().join("hops")).unwrap()
    );
    // An older manifest, without the record, loads.
    let old = dir.path().join("plain");
    let mut m = plain.clone();
    m.as_object_mut().unwrap().remove("questions");
    std::fs::write(
        old.join("manifest.json"),
        serde_json::to_vec_pretty(&m).unwrap(),
    )
    .unwrap();
    dataset::load_universe(&old).unwrap();
    assert!(!dataset::load_questions(&old).unwrap().is_empty());
}

//! The engine: typed queries, hostile input, errors that leave the engine usable.

use rulegym::engine::{Engine, EngineError, QueryLimits, Term, Value, Var};

fn engine_with(facts: &str) -> Engine {
    Engine::with_facts(facts).expect("engine starts")
}

#[test]
fn hostile_atoms_round_trip_as_data() {
    let names = [
        "O'Neil",
        "back\\slash",
        "quote\"double",
        "bracket ) ] } ( [ {",
        "end. halt.",
        "new\nline\ttab",
        "') :- halt. %",
        "0'c",
        "ünïcödé 名前",
        "",
    ];
    let mut facts = String::new();
    for (i, name) in names.iter().enumerate() {
        let mut line = String::from("person(");
        rulegym::engine::write_atom(name, &mut line).unwrap();
        line.push_str(&format!(
            ",female,'0001-01-0{}',j,h,[],[],[]).\n",
            i % 9 + 1
        ));
        facts.push_str(&line);
    }
    let engine = engine_with(&facts);
    let g = Var::new("G").unwrap();
    for name in names {
        let goal = Term::compound("gender", [Term::atom(name), Term::var(&g)]);
        let rows = engine.query(&goal, std::slice::from_ref(&g)).unwrap();
        assert_eq!(rows, vec![vec![Value::Atom("female".into())]], "{name:?}");
    }
    // Reading the names back gives the exact same text.
    let p = Var::new("P").unwrap();
    let goal = Term::compound(
        "person",
        [
            Term::var(&p),
            Term::atom("female"),
            Term::Var(Var::new("_D").unwrap()),
            Term::atom("j"),
            Term::atom("h"),
            Term::List(vec![]),
            Term::List(vec![]),
            Term::List(vec![]),
        ],
    );
    let mut got: Vec<String> = engine
        .query(&goal, &[p])
        .unwrap()
        .into_iter()
        .map(|r| r[0].as_text().unwrap().to_owned())
        .collect();
    let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn errors_leave_the_engine_usable() {
    let engine = engine_with("person(a,female,'0001-01-01',j,h,[],[],[]).\n");
    let x = Var::new("X").unwrap();
    let ok = Term::compound("gender", [Term::atom("a"), Term::var(&x)]);
    let check = |engine: &Engine| {
        assert_eq!(
            engine.query(&ok, std::slice::from_ref(&x)).unwrap().len(),
            1
        );
    };
    // Unknown predicate.
    let err = engine
        .query(
            &Term::compound("no_such_relation", [Term::atom("a"), Term::var(&x)]),
            std::slice::from_ref(&x),
        )
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Prolog(ref m) if m.contains("existence_error")),
        "{err}"
    );
    check(&engine);
    // Instantiation and type errors.
    let err = engine
        .query(
            &Term::compound("atom_length", [Term::var(&x), Term::Int(3)]),
            std::slice::from_ref(&x),
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::Prolog(_)));
    check(&engine);
    // User-thrown terms.
    assert!(
        engine
            .query(&Term::compound("throw", [Term::atom("boom")]), &[])
            .is_err()
    );
    check(&engine);
    // NUL, bad variable names, reserved names, non-UTF-8 bytes, empty compounds.
    assert!(matches!(
        engine.query(&Term::atom("a\0"), &[]),
        Err(EngineError::InvalidTerm(_))
    ));
    assert!(
        Var::new("x").is_err() && Var::new("X Y").is_err() && Var::new("Rulegym__Error").is_err()
    );
    assert!(Term::atom_from_bytes(&[0x66, 0xff, 0xfe]).is_err());
    assert!(engine.query(&Term::compound("f", []), &[]).is_err());
    check(&engine);
}

#[test]
fn limits_stop_runaway_queries() {
    let engine = engine_with("loop(X) :- loop(X).\n");
    let x = Var::new("X").unwrap();
    let limits = QueryLimits {
        inferences: Some(100_000),
        max_solutions: 10,
    };
    let err = engine
        .query_with(
            &Term::compound("loop", [Term::var(&x)]),
            std::slice::from_ref(&x),
            limits,
        )
        .unwrap_err();
    assert_eq!(err, EngineError::InferenceLimit(100_000));
    let err = engine
        .query_with(
            &Term::atom("repeat"),
            &[],
            QueryLimits {
                inferences: None,
                max_solutions: 10,
            },
        )
        .unwrap_err();
    assert_eq!(err, EngineError::TooManySolutions(10));
    let rows = engine
        .query(
            &Term::compound("between", [Term::Int(1), Term::Int(3), Term::var(&x)]),
            std::slice::from_ref(&x),
        )
        .unwrap();
    assert_eq!(
        rows,
        vec![
            vec![Value::Int(1)],
            vec![Value::Int(2)],
            vec![Value::Int(3)]
        ]
    );
}

#[test]
fn engines_run_on_many_threads() {
    std::thread::scope(|scope| {
        for i in 0..4i64 {
            scope.spawn(move || {
                let engine = engine_with(&format!("value({i}).\n"));
                let x = Var::new("X").unwrap();
                let rows = engine
                    .query(&Term::compound("value", [Term::var(&x)]), &[x])
                    .unwrap();
                assert_eq!(rows, vec![vec![Value::Int(i)]]);
            });
        }
    });
    // One engine shared by several threads (the handle is Send + Sync).
    let engine = engine_with("value(7).\n");
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let x = Var::new("X").unwrap();
                let rows = engine
                    .query(&Term::compound("value", [Term::var(&x)]), &[x])
                    .unwrap();
                assert_eq!(rows, vec![vec![Value::Int(7)]]);
            });
        }
    });
}

/// Waits for a forked child and returns its raw wait status.
#[cfg(target_os = "linux")]
fn wait_for(pid: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    // SAFETY: waits for the test's own child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    status
}

/// The zygote: a forked child runs on a copy of the engine as loaded so far, what it consults
/// stays in the child, its exit status is the job's (101 when the job panics), and the
/// parent's engine goes on answering.
#[cfg(target_os = "linux")]
#[test]
fn a_forked_child_gets_a_copy_of_the_engine_and_the_parent_keeps_its_own() {
    let parent = engine_with("zyg(1).\n");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("child.txt");
    let x = Var::new("X").unwrap();
    let path = report.clone();
    let xs = x.clone();
    let job = Box::new(move |engine: Engine| {
        engine.consult("child", "only_in_child(2).\n").unwrap();
        let mut seen = Vec::new();
        for name in ["zyg", "only_in_child"] {
            let rows = engine
                .query(
                    &Term::compound(name, [Term::var(&xs)]),
                    std::slice::from_ref(&xs),
                )
                .unwrap();
            seen.push(format!("{name}={rows:?}"));
        }
        std::fs::write(&path, seen.join(";")).unwrap();
        7
    });
    // SAFETY: the job only uses its engine and the file system.
    let pid = unsafe { parent.fork(job) }.unwrap();
    let status = wait_for(pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7);
    assert_eq!(
        std::fs::read_to_string(&report).unwrap(),
        "zyg=[[Int(1)]];only_in_child=[[Int(2)]]"
    );
    // The child's clauses are not in the parent, whose engine still answers.
    let unknown = Term::compound("only_in_child", [Term::var(&x)]);
    assert!(matches!(
        parent.query(&unknown, std::slice::from_ref(&x)),
        Err(EngineError::Prolog(_))
    ));
    let rows = parent
        .query(
            &Term::compound("zyg", [Term::var(&x)]),
            std::slice::from_ref(&x),
        )
        .unwrap();
    assert_eq!(rows, vec![vec![Value::Int(1)]]);

    // A job that panics exits with 101; the parent can fork again.
    // SAFETY: the job touches nothing.
    let pid = unsafe { parent.fork(Box::new(|_| panic!("job failed"))) }.unwrap();
    let status = wait_for(pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 101);
}

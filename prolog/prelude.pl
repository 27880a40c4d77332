%% prelude.pl: the stored facts of a universe, the base relations over them, and the libraries
%% the typed queries rely on. Convention as in PhantomWiki: rel(X, Y) reads "Y is the rel of X".
%%
%% Stored facts (module file `facts`); values are atoms (first-argument indexing does not look
%% inside strings), a person is their name (the dataset's facts.pl) or, in the facts rulegym's
%% engine holds, their id (an integer: no name enters scryer's atom table, and the typed queries
%% name their anchors by id); each predicate's first argument is the one a walk binds:
%%   person(Name, Gender, Dob, Job, Hobby, Parents, Children, Friends)
%%       Parents is [] or [Father, Mother]; Children in birth order; Friends stored both ways
%%   with_job(Job, [Person, ...])   with_hobby(Hobby, [Person, ...])
%%   with_dob(Year, [Dob-Person, ...])   dates of birth are nearly unique: grouped by year
%% A date of birth is the atom 'YYYY-MM-DD' (facts.pl) or, in the engine's facts, the integer
%% YYYYMMDD, which orders as the date does (its year: Dob // 10000).
%% One clause per person: scryer's consult costs ~25 us per clause, more than the clause's size.
%% The facts are static: consulting them as dynamic clauses takes ~20% longer.

:- use_module(library(lists)).
:- use_module(library(iso_ext)).
:- use_module(library(between)).

%% parents(?Child, ?Father, ?Mother).
parents(C, F, M) :- person(C, _, _, _, _, [F, M], _, _).
%% children(?Parent, ?Children): in birth order; only people with children.
children(P, Cs) :- person(P, _, _, _, _, _, Cs, _), Cs \== [].
%% parent(?Child, ?Parent): father first, then mother.
parent(C, P) :- person(C, _, _, _, _, Ps, _, _), member(P, Ps).
%% child(?Parent, ?Child): in birth order.
child(P, C) :- person(P, _, _, _, _, _, Cs, _), member(C, Cs).
%% friend(?X, ?Y): Y is a friend of X (stored both ways).
friend(X, Y) :- person(X, _, _, _, _, _, _, Ys), member(Y, Ys).

gender(P, G) :- person(P, G, _, _, _, _, _, _).
dob(P, D) :- person(P, _, D, _, _, _, _, _).
job(P, J) :- person(P, _, _, J, _, _, _, _).
hobby(P, H) :- person(P, _, _, _, H, _, _, _).
has_dob(D, P) :-
    (   atom(D) -> dob_year(D, Y)
    ;   integer(D) -> Y is D // 10000
    ;   true
    ),
    with_dob(Y, Ps), member(D-P, Ps).
has_job(J, P) :- with_job(J, Ps), member(P, Ps).
has_hobby(H, P) :- with_hobby(H, Ps), member(P, Ps).

%% dob_year(+Dob, -Year): the text before the first '-' (the whole atom if there is none).
dob_year(D, Y) :-
    (   sub_atom(D, B, 1, _, '-') -> sub_atom(D, 0, B, _, Y)
    ;   Y = D
    ).

%% hop_set/3 (one hop of a chain, set-at-a-time) is in hops.pl.

%% count_solutions(+Goal, -N): the number of solutions of Goal.
count_solutions(Goal, N) :- findall(x, Goal, Xs), length(Xs, N).

%% filter_set(+Attr, +Value, +Xs, -Ys): the members of the sorted set Xs whose Attr is Value.
filter_set(Attr, Value, Xs, Ys) :-
    findall(X, (member(X, Xs), call(Attr, X, Value)), Ys).

%% count_each(+Rel, +Xs, -Counts): the sorted set of N such that some X in Xs has exactly N
%% distinct Rel-relatives (PhantomWiki's per-binding aggregate_all(count, distinct(...))).
count_each(Rel, Xs, Counts) :-
    findall(N, (member(X, Xs), findall(Y, call(Rel, X, Y), Ys), sort(Ys, U), length(U, N)), Ns),
    sort(Ns, Counts).

%% older_of(+As, +Bs, -[Older]): the one person every pairing of a member of As with a member of
%% Bs names as born first (PhantomWiki's answer: the union over the pairings; a tie names
%% nobody). For one person on each side, whichever was born first. Fails on a tie, on an empty
%% side, or when the pairings name different people (an ambiguous comparison).
older_of(As, Bs, [Older]) :- pairing_winners(first, As, Bs, [Older]).

%% younger_of(+As, +Bs, -[Younger]): as older_of/3, born last.
younger_of(As, Bs, [Younger]) :- pairing_winners(last, As, Bs, [Younger]).

%% pairing_winners(+Which, +As, +Bs, -Ws): the sorted people who win at least one pairing of a
%% member of As with a member of Bs. A member of As wins one exactly when it beats the weakest
%% date of Bs (the latest for first, the earliest for last), and the other way round: linear in
%% the sides, not in their product.
pairing_winners(Which, As, Bs, Ws) :-
    findall(D, (member(A, As), dob(A, D)), DAs),
    findall(D, (member(B, Bs), dob(B, D)), DBs),
    weakest(Which, DAs, WA),
    weakest(Which, DBs, WB),
    findall(P,
            (   member(P, As), dob(P, D), beats(Which, D, WB)
            ;   member(P, Bs), dob(P, D), beats(Which, D, WA)
            ),
            Ps),
    sort(Ps, Ws).

beats(first, D, E) :- D @< E.
beats(last, D, E) :- D @> E.

%% weakest(+Which, +Dates, -W): the date of a non-empty list that beats none of the others.
weakest(Which, [D|Ds], W) :- weakest_(Ds, Which, D, W).
weakest_([], _, W, W).
weakest_([D|Ds], Which, W0, W) :-
    (   beats(Which, W0, D) -> weakest_(Ds, Which, D, W)
    ;   weakest_(Ds, Which, W0, W)
    ).

%% oldest_each(+Rel, +Xs, -Ys) / youngest_each(+Rel, +Xs, -Ys): the sorted union, over each X
%% in Xs, of X's Rel-relatives born first / last (all of them on a tie). One hop_set per X and
%% one pass over its relatives: bounded by the relatives of Xs, deterministic.
oldest_each(Rel, Xs, Ys) :- extreme_each(first, Rel, Xs, Ys).
youngest_each(Rel, Xs, Ys) :- extreme_each(last, Rel, Xs, Ys).

extreme_each(Which, Rel, Xs, Ys) :-
    findall(Y,
            (   member(X, Xs),
                hop_set(Rel, [X], Rs),
                Rs \== [],
                findall(D, (member(R, Rs), dob(R, D)), Ds),
                sort(Ds, Sorted),
                extreme(Which, Sorted, Best),
                member(Y, Rs),
                dob(Y, Best)
            ),
            F),
    sort(F, Ys).

%% extreme(+Which, +Sorted, -E): the first or the last element of a non-empty sorted list.
extreme(first, [E|_], E).
extreme(last, Sorted, E) :- last_of(Sorted, E).

last_of([E], E) :- !.
last_of([_|T], E) :- last_of(T, E).

%% most_related(+Rel, +Xs, -Ys): the members of Xs with the largest number of distinct
%% Rel-relatives (all of them on a tie; [] when Xs is empty).
most_related(Rel, Xs, Ys) :-
    findall(N-X, (member(X, Xs), hop_set(Rel, [X], Rs), length(Rs, N)), Ps),
    (   Ps == [] -> Ys = []
    ;   findall(N, member(N-_, Ps), Ns),
        sort(Ns, SortedNs),
        last_of(SortedNs, Max),
        findall(X, member(Max-X, Ps), F),
        sort(F, Ys)
    ).

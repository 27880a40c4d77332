%% queries.pl: the typed queries of src/question/query.rs, as data, answered by one predicate.
%% A query written as data names no variable but its answer, so the engine compiles nothing
%% per question: as a conjunction of one goal per hop, scryer spent ~0.15 ms per question
%% compiling the meta-called goals, more than evaluating them (BENCHMARKS.md, issue 28).
%%
%%   Query:  who(Chain) | what(Chain, Attr) | how_many(Chain, Rel)
%%         | older(Chain, Chain) | younger(Chain, Chain)
%%         | oldest(Chain, Rel) | youngest(Chain, Rel) | most(Chain, Rel)
%%   Chain:  chain(Anchor, Steps)
%%   Anchor: name(Name) | attribute(HasAttr, Value)      (HasAttr: has_job, has_hobby, has_dob)
%%   Steps:  a list of relation names and filter(Attr, Value)

%% query_answer(+Query, -Answer): the query's answer set (no solution when it has none, e.g. an
%% ambiguous comparison).
query_answer(who(C), A) :- chain_end(C, A).
query_answer(what(C, Attr), A) :- chain_end(C, E), hop_set(Attr, E, A).
query_answer(how_many(C, Rel), A) :- chain_end(C, E), count_each(Rel, E, A).
query_answer(older(C1, C2), A) :- chain_end(C1, E1), chain_end(C2, E2), older_of(E1, E2, A).
query_answer(younger(C1, C2), A) :- chain_end(C1, E1), chain_end(C2, E2), younger_of(E1, E2, A).
query_answer(oldest(C, Rel), A) :- chain_end(C, E), oldest_each(Rel, E, A).
query_answer(youngest(C, Rel), A) :- chain_end(C, E), youngest_each(Rel, E, A).
query_answer(most(C, Rel), A) :- chain_end(C, E), most_related(Rel, E, A).

%% batch_answers(+Queries, -Lists): for each query, the list of its solutions.
batch_answers([], []).
batch_answers([Q|Qs], [L|Ls]) :-
    findall(A, query_answer(Q, A), L),
    batch_answers(Qs, Ls).

%% chain_end(+Chain, -End): the sorted set of people the chain denotes, set-at-a-time.
chain_end(chain(Anchor, Steps), End) :-
    anchor_set(Anchor, Xs),
    chain_steps(Steps, Xs, End).

anchor_set(name(Name), [Name]).
anchor_set(attribute(HasAttr, Value), Xs) :- hop_set(HasAttr, [Value], Xs).

%% chain_steps(+Steps, +Xs, -Ys): each step applied in turn (first-argument indexed on Steps).
chain_steps([], Xs, Xs).
chain_steps([Step|Steps], Xs, Ys) :-
    chain_step(Step, Xs, Zs),
    chain_steps(Steps, Zs, Ys).

chain_step(filter(Attr, Value), Xs, Ys) :- !, filter_set(Attr, Value, Xs, Ys).
chain_step(Rel, Xs, Ys) :- hop_set(Rel, Xs, Ys).

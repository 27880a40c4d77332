%% rubric.pl: evaluation of tool-use rubric items over the facts of one trajectory.
%%
%% The facts of a trajectory arrive as ONE term passed to each query (no assert/retract churn):
%%   facts(ToolCalls, ToolResults, ToolErrors, AskedUser, UserSaid, UserRevealed, Answered, Said,
%%         Stopped, FinalState, StateMatches, Turns)
%% each argument a list of fact terms, e.g. tool_call(Step, Tool, Args). JSON values are terms:
%% objects obj("key1", Value1, "key2", Value2, ...) with sorted string keys (the atom obj when
%% empty; a flat term is several times cheaper to pass than a list of pairs), strings "...",
%% integers, other numbers num("1.5"), true, false, null, arrays as lists.
%%
%% A task's rubric is compiled (in Rust, from checked rule bodies) into clauses
%%   Pred(Index, Facts, Step) :- Body.
%% consulted once per task; rg_score/5 evaluates every item under an inference budget.

:- use_module(library(lists)).
:- use_module(library(iso_ext)).
:- use_module(library(between)).

%% rg_score(+Pred, +Indices, +Limit, +Facts, -Results): every item under ONE inference budget
%% (one call_with_inference_limit is much cheaper than one per item). Results is a list with one
%% result per index: passed(Step) (Step unbound when the rule reports none), failed or error(E);
%% or the atom limit when the budget ran out (rg_score_each/5 then tells which item).
rg_score(P, Is, L, F, Rs) :-
    (   call_with_inference_limit(rg_all(P, Is, F, Rs0), L, D)
    ->  ( D == inference_limit_exceeded -> Rs = limit ; Rs = Rs0 )
    ;   Rs = limit
    ).

rg_all(_, [], _, []).
rg_all(P, [I|Is], F, [R|Rs]) :-
    (   catch(call(P, I, F, S), E, true)
    ->  ( nonvar(E) -> rg_error(E, R) ; rg_passed(S, R) )
    ;   R = failed
    ),
    rg_all(P, Is, F, Rs).

%% rg_passed(+Step, -Result): passed(Step) for an integer or unbound step; anything else is an
%% error, so no large term ever crosses into Rust.
rg_passed(S, passed(S)) :- var(S), !.
rg_passed(S, passed(S)) :- integer(S), !.
rg_passed(_, error(type_error(integer, step))).

%% rg_error(+Exception, -Result): a small error term: the formal error's name and, when atomic,
%% its first argument (never the culprit, which may be huge).
rg_error(error(Formal, _), error(Short)) :- !, rg_short(Formal, Short).
rg_error(E, error(Short)) :- rg_short(E, Short).
rg_short(F, F) :- atomic(F), !.
rg_short(F, S) :- compound(F), functor(F, N, _), arg(1, F, A), atomic(A), !, S =.. [N, A].
rg_short(F, N) :- compound(F), !, functor(F, N, _).
rg_short(_, unknown).

%% rg_score_each(+Pred, +Indices, +Limit, +Facts, -Results): like rg_score/5 with a budget of
%% Limit per item; a result is limit for an item that ran out.
rg_score_each(_, [], _, _, []).
rg_score_each(P, [I|Is], L, F, [R|Rs]) :-
    rg_item(P, I, L, F, R),
    rg_score_each(P, Is, L, F, Rs).

rg_item(P, I, L, F, R) :-
    (   catch(call_with_inference_limit(call(P, I, F, S), L, D), E, true)
    ->  (   nonvar(E) -> rg_error(E, R)
        ;   D == inference_limit_exceeded -> R = limit
        ;   rg_passed(S, R)
        )
    ;   R = failed
    ).

%% rg_count(+Goal, -N): the number of solutions of Goal.
rg_count(G, N) :- findall(x, G, Xs), length(Xs, N).

%% Fact helpers (Facts first).
%% called(Tool), called(Tool, Args): Tool was called (with Args).
rg_called(F, T) :- arg(1, F, L), memberchk(tool_call(_, T, _), L).
rg_called(F, T, A) :- arg(1, F, L), member(tool_call(_, T, A), L).
%% first_call(Tool, Step): the earliest step that called Tool.
rg_first_call(F, T, S) :- arg(1, F, L), memberchk(tool_call(S, T, _), L).
%% call_count(Tool, N): how many times Tool was called.
rg_call_count(F, T, N) :- arg(1, F, L), rg_count(member(tool_call(_, T, _), L), N).
%% revealed(Slot): the user revealed Slot at some step.
rg_revealed(F, Slot) :- arg(6, F, L), memberchk(user_revealed(_, Slot), L).
%% revealed_before(Slot, Step): the user revealed Slot strictly before Step.
rg_revealed_before(F, Slot, S) :-
    arg(6, F, L), member(user_revealed(R, Slot), L), R < S, !.
%% state_field(Table, Key, Field, Value): a field of a record of the final state.
rg_state_field(F, T, K, Field, V) :-
    arg(10, F, L), rg_text(K, KC),
    member(final_state(T, KC, Record), L),
    rg_json_get(Record, Field, V).

%% Pure helpers.
%% json_get(+Json, +Key, -Value): Key an atom or a string.
rg_json_get(O, K, V) :-
    compound(O), functor(O, obj, N), rg_text(K, KC), rg_obj_get(O, 1, N, KC, V).
rg_obj_get(O, I, N, K, V) :-
    I < N, arg(I, O, K0),
    (   K0 == K -> J is I + 1, arg(J, O, V)
    ;   I2 is I + 2, rg_obj_get(O, I2, N, K, V)
    ).
%% json_pairs(+Json, -Pairs): the object as a list of "key"-Value pairs.
rg_json_pairs(obj, []) :- !.
rg_json_pairs(O, Ps) :- compound(O), functor(O, obj, N), rg_pairs(O, 1, N, Ps).
rg_pairs(O, I, N, Ps) :-
    (   I > N -> Ps = []
    ;   arg(I, O, K), J is I + 1, arg(J, O, V), Ps = [K-V|Rest],
        I2 is I + 2, rg_pairs(O, I2, N, Rest)
    ).
%% text_contains(+Text, +Sub), text_contains_ci(+Text, +Sub): substring tests on strings or atoms.
rg_text_contains(T, Sub) :- rg_text(T, TC), rg_text(Sub, SC), rg_sub(TC, SC), !.
rg_text_contains_ci(T, Sub) :-
    rg_text(T, TC0), rg_text(Sub, SC0), rg_lower(TC0, TC), rg_lower(SC0, SC), rg_sub(TC, SC), !.
%% len(+List, -N): length of a proper list (never generates lists).
rg_len(L, N) :- rg_is_list(L), length(L, N).

%% Bounded resources. Rule bodies cannot recurse, so what can grow without inferences is
%% arithmetic (big integers) and findall's copies; both are charged here.

%% rg_findall(+Template, +Goal, -List): findall/3 that walks each solution before it is copied,
%% one inference per cell, so the inference budget bounds what findall copies (and a cyclic
%% solution runs into the budget instead of being copied).
rg_findall(T, G, L) :- findall(T, (G, rg_charge(T)), L).
rg_charge(T) :- rg_walk([T]).
rg_walk([]).
rg_walk([T|Ts]) :-
    (   compound(T) -> T =.. [_|As], append(As, Ts, Ts1) ; Ts1 = Ts ),
    rg_walk(Ts1).

%% Arithmetic: every operand is checked when the goal runs (a variable may hold any
%% expression): integers within +-10^18 and + - * // mod min max abs only, nested at most 48
%% deep; results are checked too, so repeated squaring stops at the bound.
rg_arith(E) :- rg_arith(E, 0).
rg_arith(E, _) :- var(E), !, throw(error(instantiation_error, rg_arith/1)).
rg_arith(E, _) :-
    integer(E), !,
    (   E =< 1000000000000000000, E >= -1000000000000000000 -> true
    ;   throw(error(evaluation_error(integer_bound), rg_arith/1))
    ).
rg_arith(E, D) :-
    compound(E), D < 48, functor(E, Op, Ar), rg_arith_op(Op, Ar), !,
    D1 is D + 1,
    E =.. [_|As],
    rg_arith_args(As, D1).
rg_arith(E, _) :-
    (   compound(E) -> functor(E, Op, Ar), Culprit = Op/Ar ; Culprit = E ),
    throw(error(type_error(rubric_arithmetic, Culprit), rg_arith/1)).
rg_arith_args([], _).
rg_arith_args([A|As], D) :- rg_arith(A, D), rg_arith_args(As, D).
rg_arith_op(+, 2).
rg_arith_op(-, 2).
rg_arith_op(*, 2).
rg_arith_op(//, 2).
rg_arith_op(mod, 2).
rg_arith_op(min, 2).
rg_arith_op(max, 2).
rg_arith_op(-, 1).
rg_arith_op(abs, 1).
rg_is(X, E) :- rg_arith(E), X0 is E, rg_arith(X0), X = X0.
rg_arith_eq(A, B) :- rg_arith(A), rg_arith(B), A =:= B.
rg_arith_ne(A, B) :- rg_arith(A), rg_arith(B), A =\= B.
rg_arith_lt(A, B) :- rg_arith(A), rg_arith(B), A < B.
rg_arith_gt(A, B) :- rg_arith(A), rg_arith(B), A > B.
rg_arith_le(A, B) :- rg_arith(A), rg_arith(B), A =< B.
rg_arith_ge(A, B) :- rg_arith(A), rg_arith(B), A >= B.

%% List predicates missing from scryer's libraries or evaluating their elements.
rg_is_list(L) :- nonvar(L), ( L == [] -> true ; L = [_|T], rg_is_list(T) ).
rg_last([X|Xs], Last) :- rg_last_(Xs, X, Last).
rg_last_([], Last, Last).
rg_last_([X|Xs], _, Last) :- rg_last_(Xs, X, Last).
rg_msort(L, S) :- rg_is_list(L), rg_keyed(L, Ps), keysort(Ps, Sorted), rg_keyed(S, Sorted).
rg_keyed([], []).
rg_keyed([X|Xs], [X-x|Ps]) :- rg_keyed(Xs, Ps).
rg_sum_list(L, S) :- rg_fold(L, +, 0, S).
rg_max_list([X|Xs], M) :- rg_fold(Xs, max, X, M).
rg_min_list([X|Xs], M) :- rg_fold(Xs, min, X, M).
rg_fold([], _, A, A).
rg_fold([X|Xs], Op, A0, A) :- E =.. [Op, A0, X], rg_is(A1, E), rg_fold(Xs, Op, A1, A).

rg_text(T, Cs) :- atom(T), !, atom_chars(T, Cs).
rg_text(T, T).
rg_sub(T, S) :- append(_, Rest, T), append(S, _, Rest).
rg_lower([], []).
rg_lower([C|Cs], [D|Ds]) :-
    char_code(C, X),
    (   X >= 65, X =< 90 -> Y is X + 32, char_code(D, Y) ; D = C ),
    rg_lower(Cs, Ds).

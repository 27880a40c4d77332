%% rubric.pl: evaluation of tool-use rubric items over the facts of one trajectory.
%%
%% The facts of a trajectory arrive as ONE term passed to each query (no assert/retract churn):
%%   facts(ToolCalls, ToolResults, ToolErrors, AskedUser, UserSaid, UserRevealed, Answered, Said,
%%         Stopped, FinalState, StateMatches, Turns)
%% each argument a list of fact terms, e.g. tool_call(Step, Tool, Args). JSON values are terms:
%% objects json(["key"-Value, ...]) with sorted string keys, strings "...", integers, floats
%% num("1.5"), true, false, null, arrays as lists.
%%
%% A task's rubric is compiled (in Rust, from checked rule bodies) into clauses
%%   Pred(Index, Facts, Step) :- Body.
%% consulted once per task; rg_score/5 evaluates every item under a per-item inference limit.

:- use_module(library(lists)).
:- use_module(library(iso_ext)).
:- use_module(library(between)).

%% rg_score(+Pred, +Indices, +Limit, +Facts, -Results): one result per index, in order:
%% passed(Step) (Step unbound when the rule reports none), failed, limit, or error(E).
rg_score(_, [], _, _, []).
rg_score(P, [I|Is], L, F, [R|Rs]) :-
    rg_item(P, I, L, F, R),
    rg_score(P, Is, L, F, Rs).

rg_item(P, I, L, F, R) :-
    (   catch(call_with_inference_limit(call(P, I, F, S), L, D), E, true)
    ->  (   nonvar(E) -> R = error(E)
        ;   D == inference_limit_exceeded -> R = limit
        ;   R = passed(S)
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
rg_json_get(json(Pairs), K, V) :- rg_text(K, KC), member(KC-V, Pairs).
%% text_contains(+Text, +Sub), text_contains_ci(+Text, +Sub): substring tests on strings or atoms.
rg_text_contains(T, Sub) :- rg_text(T, TC), rg_text(Sub, SC), rg_sub(TC, SC), !.
rg_text_contains_ci(T, Sub) :-
    rg_text(T, TC0), rg_text(Sub, SC0), rg_lower(TC0, TC), rg_lower(SC0, SC), rg_sub(TC, SC), !.
%% len(+List, -N): length of a proper list (never generates lists).
rg_len(L, N) :- is_list(L), length(L, N).

rg_text(T, Cs) :- atom(T), !, atom_chars(T, Cs).
rg_text(T, T).
rg_sub(T, S) :- append(_, Rest, T), append(S, _, Rest).
rg_lower([], []).
rg_lower([C|Cs], [D|Ds]) :-
    char_code(C, X),
    (   X >= 65, X =< 90 -> Y is X + 32, char_code(D, Y) ; D = C ),
    rg_lower(Cs, Ds).

%% family.pl: PhantomWiki's family relations over prelude.pl's base relations (parents/3,
%% children/2, parent/2, child/2, gender/2), which read the stored person/8 facts.
%% rel(X, Y): "Y is the rel of X". Every rule walks from X through first-argument-indexed facts.

female(X) :- gender(X, female).
male(X) :- gender(X, male).

%% sibling(?X, ?Y): Y shares X's parents. Walks through the father's children only, so each
%% sibling is proved once (couples share all their children: the generator makes no
%% half-siblings); PhantomWiki's rule proves every sibling once per parent, 2^k proofs along a
%% k-sibling chain.
sibling(X, Y) :-
    parents(X, F, _),
    children(F, Cs),
    member(Y, Cs),
    Y \== X.

%% married(?X, ?Y): Y shares a child with X (every couple has one). Walks through X's first child
%% only, so a couple with k children is proved once, not k times.
married(X, Y) :-
    children(X, [C|_]),
    parents(C, F, M),
    ( X == F -> Y = M ; Y = F ).

mother(X, Y) :- parent(X, Y), female(Y).
father(X, Y) :- parent(X, Y), male(Y).
son(X, Y) :- child(X, Y), male(Y).
daughter(X, Y) :- child(X, Y), female(Y).
sister(X, Y) :- sibling(X, Y), female(Y).
brother(X, Y) :- sibling(X, Y), male(Y).
wife(X, Y) :- married(X, Y), female(Y).
husband(X, Y) :- married(X, Y), male(Y).

niece(X, Y) :- sibling(X, A), daughter(A, Y).
nephew(X, Y) :- sibling(X, A), son(A, Y).
aunt(X, Y) :- parent(X, A), sister(A, Y).
uncle(X, Y) :- parent(X, A), brother(A, Y).

grandparent(X, Y) :- parent(X, Z), parent(Z, Y).
grandmother(X, Y) :- grandparent(X, Y), female(Y).
grandfather(X, Y) :- grandparent(X, Y), male(Y).
grandchild(X, Y) :- child(X, Z), child(Z, Y).
grandson(X, Y) :- grandchild(X, Y), male(Y).
granddaughter(X, Y) :- grandchild(X, Y), female(Y).

great_aunt(X, Y) :- grandparent(X, A), sister(A, Y).
great_uncle(X, Y) :- grandparent(X, A), brother(A, Y).
great_grandparent(X, Y) :- grandparent(X, Z), parent(Z, Y).
great_grandmother(X, Y) :- great_grandparent(X, Y), female(Y).
great_grandfather(X, Y) :- great_grandparent(X, Y), male(Y).
great_grandchild(X, Y) :- grandchild(X, Z), child(Z, Y).
great_grandson(X, Y) :- great_grandchild(X, Y), male(Y).
great_granddaughter(X, Y) :- great_grandchild(X, Y), female(Y).

cousin(X, Y) :- parent(X, A), sibling(A, B), child(B, Y), Y \== X.
female_cousin(X, Y) :- cousin(X, Y), female(Y).
male_cousin(X, Y) :- cousin(X, Y), male(Y).

second_aunt(X, Y) :- great_grandparent(X, A), sister(A, Y).
second_uncle(X, Y) :- great_grandparent(X, A), brother(A, Y).
female_second_cousin(X, Y) :- parent(X, A), cousin(A, B), child(B, Y), female(Y), Y \== X.
male_second_cousin(X, Y) :- parent(X, A), cousin(A, B), child(B, Y), male(Y), Y \== X.
female_first_cousin_once_removed(X, Y) :- cousin(X, A), daughter(A, Y), Y \== X.
male_first_cousin_once_removed(X, Y) :- cousin(X, A), son(A, Y), Y \== X.

%% In-laws; sister_in_law and brother_in_law are the spouse's siblings only, as in PhantomWiki.
mother_in_law(X, Y) :- married(X, A), mother(A, Y).
father_in_law(X, Y) :- married(X, A), father(A, Y).
son_in_law(X, Y) :- child(X, A), husband(A, Y).
daughter_in_law(X, Y) :- child(X, A), wife(A, Y).
sister_in_law(X, Y) :- married(X, A), sister(A, Y).
brother_in_law(X, Y) :- married(X, A), brother(A, Y).

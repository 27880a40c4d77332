%% prelude.pl: libraries the rule base and the typed queries rely on.
%%
%% Facts of a universe (consulted separately as module file `facts`):
%%   parent(Child, Parent)   child(Parent, Child)     -- both directions, so first-argument
%%   friend(X, Y)            (stored both ways)          indexing serves every walk
%%   gender(Person, Gender)  dob(Person, Date)  job(Person, Job)  hobby(Person, Hobby)
%%   has_dob(Date, Person)   has_job(Job, Person)   has_hobby(Hobby, Person)
%%                           -- inverse attribute facts, for "the person whose X is V"
%% Names and values are atoms (first-argument indexing does not look inside strings).
%% Convention as in PhantomWiki: rel(X, Y) reads "Y is the rel of X".

:- use_module(library(lists)).
:- use_module(library(iso_ext)).
:- use_module(library(between)).
:- use_module(library(aggregate)).

:- dynamic(parent/2).
:- dynamic(child/2).
:- dynamic(friend/2).
:- dynamic(gender/2).
:- dynamic(dob/2).
:- dynamic(job/2).
:- dynamic(hobby/2).
:- dynamic(has_dob/2).
:- dynamic(has_job/2).
:- dynamic(has_hobby/2).

%% hop_set(+Rel, +Xs, -Ys): Ys is the sorted set of every Y with Rel(X, Y) for some X in Xs.
%% Evaluates one hop of a chain set-at-a-time, so duplicate proofs never multiply across hops.
hop_set(Rel, Xs, Ys) :-
    findall(Y, (member(X, Xs), call(Rel, X, Y)), Found),
    sort(Found, Ys).

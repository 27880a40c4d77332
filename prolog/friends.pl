%% friends.pl: friendship. friend(X, Y) is defined in prelude.pl over each person's stored
%% friend list (person/8), which holds every edge in both directions, so friend(+X, -Y) is one
%% first-argument-indexed lookup either way.

%% friend_count(+X, -N): how many friends X has.
friend_count(X, N) :- findall(Y, friend(X, Y), Ys), length(Ys, N).

%% friends.pl: friendship. friend(X, Y) is stored as facts in both directions (the symmetric
%% closure of the generated edges), so friend(+X, -Y) is first-argument indexed either way.

%% friend_count(+X, -N): how many friends X has.
friend_count(X, N) :- findall(Y, friend(X, Y), Ys), length(Ys, N).

%% attributes.pl: attribute lookups in both directions.
%% attribute(?Name, ?Person, ?Value): Person's attribute Name (dob, job, hobby, gender) is Value.
%% person_with(+Name, +Value, -Person): inverse lookup through the indexed has_* facts.

attribute(dob, P, V) :- dob(P, V).
attribute(job, P, V) :- job(P, V).
attribute(hobby, P, V) :- hobby(P, V).
attribute(gender, P, V) :- gender(P, V).

person_with(dob, V, P) :- has_dob(V, P).
person_with(job, V, P) :- has_job(V, P).
person_with(hobby, V, P) :- has_hobby(V, P).
person_with(gender, V, P) :- gender(P, V).

%% older(+X, +Y): X was born before Y (ISO dates with 4-digit years compare as atoms).
older(X, Y) :- dob(X, DX), dob(Y, DY), DX @< DY.

%% spin: 4 Erlang processes spin on the schedulers' threads, each building
%% and folding lists (garbage for the collector) a fixed number of rounds,
%% then main prints each one's result. The output depends on the rounds
%% alone.
%%
%%   erl -noshell -pa DIR -run spin main [ROUNDS]   (default 300)
-module(spin).
-export([main/0, main/1]).

main() -> main(["300"]).

main([Rounds]) ->
    N = list_to_integer(Rounds),
    Self = self(),
    Pids = [spawn(fun() -> Self ! {self(), work(I, N, 0)} end) || I <- lists:seq(1, 4)],
    Results = [receive {P, R} -> R end || P <- Pids],
    [io:format("process ~b ~b~n", [I, R]) || {I, R} <- lists:zip(lists:seq(1, 4), Results)],
    halt(0).

work(_, 0, Acc) -> Acc;
work(I, N, Acc) ->
    L = [X * I rem 7919 || X <- lists:seq(1, 2000)],
    T = list_to_tuple(lists:reverse(L)),
    S = lists:foldl(fun(X, A) -> (A * 31 + X) rem 1000000007 end, Acc, tuple_to_list(T)),
    work(I, N - 1, S).

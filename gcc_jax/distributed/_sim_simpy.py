"""The serving-cluster model of :mod:`gcc_jax.distributed._sim` as SimPy processes: the
reference engine (``simulate(..., engine="simpy")``).

Instances are processes pulling jobs from one ``simpy.Store`` per pool (FCFS; idle instances
take jobs in the order they became idle); a job carries its work and a completion event.
Queries wait on those events: ParM's on "own output, or the parity and the other ``k − 1``",
replication's on either copy, an approximate code's group on its ``(N − S)``-th result or its
deadline. It shares the draws and the episode schedules with the heap engine and nothing else.
"""

from __future__ import annotations

import math

import numpy as np

from ._sim import DECODED, MISSED, OWN

__all__ = ["simpy_engine"]


def _pool(env, simpy, episodes, first: int, size: int, busy: list):
    """A FCFS pool of instances ``first .. first + size − 1``; returns its queue."""
    store = simpy.Store(env)

    def instance(j):
        while True:
            work, done = yield store.get()
            start = env.now
            end = episodes[j].finish(start, work)
            busy[0] += end - start
            yield env.timeout(end - start)
            done.succeed(end)

    for j in range(first, first + size):
        env.process(instance(j))
    return store


def _submit(env, store, work: float):
    done = env.event()
    store.put((float(work), done))
    return done


def simpy_engine(st) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(answer time, source, mask, busy time)`` per query of the ``_Setup`` ``st``."""
    import simpy

    env = simpy.Environment()
    busy = [0.0]
    q, k = len(st.arrivals), st.k
    answer = np.zeros(q)
    source = np.full(q, OWN, dtype=np.int8)
    mask = np.zeros(q, dtype=np.int64)
    base = _pool(env, simpy, st.episodes, 0, st.base, busy)
    extra = _pool(env, simpy, st.episodes, st.base, st.extra, busy) if st.extra else None
    coded = st.scheme in ("gcc", "bacc")
    own: list = [None] * q

    def waiter(i, decoded_event=None, copy=None):
        events = [own[i]] + [e for e in (decoded_event, copy) if e is not None]
        yield env.any_of(events)
        answer[i] = env.now
        if decoded_event is not None and not own[i].triggered:
            source[i] = DECODED
            mask[i] = ((1 << (k + 1)) - 1) & ~(1 << (i % k))

    decodable: list = [None] * q  # ParM: triggered once the parity and the other k − 1 are in

    def parm_group(g):
        members = list(range(g * k, g * k + k))
        parity = _submit(env, extra, st.extra_work[g])
        for i in members:
            others = env.all_of([parity] + [own[j] for j in members if j != i])
            others.callbacks.append(lambda _, ev=decodable[i]: ev.succeed())

    def arrivals():
        for i in range(q):
            yield env.timeout(max(st.arrivals[i] - env.now, 0.0))
            if coded:
                frontend.arrive(i)
                continue
            own[i] = _submit(env, base, st.work[i])
            if st.scheme == "parm":
                if i < (q // k) * k:  # the last, short group has no parity
                    decodable[i] = env.event()
                env.process(waiter(i, decoded_event=decodable[i]))
                if i % k == k - 1:
                    parm_group(i // k)
            elif st.scheme == "replication" and i % k == 0:
                copy = _submit(env, extra, st.extra_work[i // k])
                env.process(waiter(i, copy=copy))
            else:
                env.process(waiter(i))
        if coded and st.max_wait_s is None:
            frontend.flush()

    frontend = _Frontend(env, st, base, answer, source, mask) if coded else None
    env.process(arrivals())
    env.run()
    return answer, source, mask, busy[0]


class _Frontend:
    """An approximate code's frontend: opens a group at a query with none open, closes it at
    its ``k``-th query or ``max_wait_s`` later, queues its ``N`` coded tasks, and releases its
    queries at the ``(N − S)``-th result or the deadline."""

    def __init__(self, env, st, store, answer, source, mask):
        self.env, self.st, self.store = env, st, store
        self.answer, self.source, self.mask = answer, source, mask
        self.open: list[int] = []
        self.groups = 0

    def arrive(self, i: int) -> None:
        if not self.open and self.st.max_wait_s is not None:
            self.env.process(self._timer(self.groups))
        self.open.append(i)
        if len(self.open) == self.st.k:
            self._close()

    def _timer(self, g):
        yield self.env.timeout(self.st.max_wait_s)
        if self.groups == g and self.open:
            self._close()

    def flush(self) -> None:
        """Close the open group after the last query (no more will join it)."""
        if self.open:
            self._close()

    def _close(self) -> None:
        members, self.open = self.open, []
        g = self.groups
        self.groups += 1
        st = self.st
        works = [st.work[members[min(n, len(members) - 1)]] for n in range(st.k)]
        works.append(st.extra_work[g])
        events = [_submit(self.env, self.store, w) for w in works]
        self.env.process(self._decode(members, events))

    def _decode(self, members, events):
        env, st = self.env, self.st
        need = env.event()
        count = [0]

        def one_more(_):
            count[0] += 1
            if count[0] == st.need and not need.triggered:
                need.succeed()

        for e in events:
            e.callbacks.append(one_more)
        if math.isfinite(st.deadline_s):
            yield need | env.timeout(st.deadline_s)
        else:
            yield need
        bits = sum(1 << n for n, e in enumerate(events) if e.triggered)
        live = sum(1 for e in events if e.triggered)
        for i in members:
            self.answer[i] = env.now
            self.mask[i] = bits
            self.source[i] = DECODED if live >= st.min_live else MISSED

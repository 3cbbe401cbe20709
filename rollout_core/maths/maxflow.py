"""Many max flows on one graph that differ only in one node's out-capacities: Dinic's algorithm compiled by numba.

Attention flow solves n max-flow problems per explained row on the same layered graph, one per input token, where
only the source slot's n out-edges change (maths.flow.RowGraph). scipy's `maximum_flow` rebuilds its residual graph
(transpose and merge) on every call, most of a call's time here, and cannot be handed one; python-igraph,
OR-tools and PyMaxflow solve slower per call on these graphs (benchmarks/RESULTS.md). Here the residual graph
(every edge plus its reverse, in CSR order) is built once with numpy, and each problem resets the edges the previous
one changed, rewrites the slot's edges and runs Dinic in compiled code: BFS levels, then blocking flows by an
iterative DFS with current-arc pointers (the first phase skips the reverse edges: none can be admissible yet).
Capacities are int64, so the arithmetic is exact and the search ends.

A solve stops as soon as its flow equals the smaller trivial cut, the source's out-capacity or the sink's
in-capacity: no flow exceeds a cut, so that cut is minimum and the flow maximum. On diffuse attention every problem
ends so, in its first phase, without the last BFS (which scanned most of the graph; benchmarks/RESULTS.md).
Otherwise the last BFS (the one that no longer reaches the sink) leaves level >= 0 on exactly the nodes reachable
from the source in the residual graph. Either way `level` marks the source side of a minimum cut, which the bounded
flow (maths.flow_bounded) needs for its error bound.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit


@dataclass
class Network:
    """A residual graph in CSR order (edge k runs from its row to heads[k]; reverse[k] is its partner edge)
    with its work arrays, solved from `source` to `sink`. slot[i] is where the i-th rewritable edge sits."""

    indptr: np.ndarray  # (nodes + 1,) int32
    heads: np.ndarray  # (2E,) int32
    reverse: np.ndarray  # (2E,) int32
    capacity: np.ndarray  # (2E,) int64: input capacities, 0 on the added reverse edges
    slot: np.ndarray  # (s,) int32
    own_end: np.ndarray  # (nodes,) int32: a node's own edges are indptr[u]:own_end[u], its reverses follow
    source: int
    sink: int
    level: np.ndarray = field(init=False)  # after solve: >= 0 exactly on the source side of a minimum cut

    def __post_init__(self) -> None:
        size = len(self.indptr) - 1
        self.residual = self.capacity.copy()
        self.residual[self.slot] = 1
        self.level = np.empty(size, np.int64)
        self._queue = np.empty(size, np.int32)
        self._arc = np.empty(size, np.int32)
        self._path = np.empty(size, np.int32)
        self._end = self.indptr[1:].copy()
        # the edges the last solve changed, so the next one resets only those (-1 in _logged: too many, copy all)
        self._log = np.empty(len(self.heads), np.int32)
        self._logged = np.zeros(1, np.int64)
        # The first phase's levels, from a BFS with every slot edge open. Any levels give a correct result
        # (every DFS path is an augmenting path, and only the last, failing BFS decides); these equal the true
        # first BFS on a layered graph, where every path to a node has the same length, so each problem
        # saves one BFS.
        _levels(self.indptr, self.heads, self.residual, self.source, self.sink, self.level, self._queue)
        self._start = self.level.copy()

    def solve(self, slot_capacity: np.ndarray) -> int:
        """The max flow with the slot's edges set to `slot_capacity` (int64)."""
        return int(_solve(self.indptr, self.heads, self.reverse, self.capacity, self.slot, slot_capacity,
                          self.source, self.sink, self._start, self.own_end, self._end, self.residual, self.level,
                          self._queue, self._arc, self._path, self._log, self._logged))


def network(tails: np.ndarray, heads: np.ndarray, capacity: np.ndarray, size: int, slot_edges: int, source: int,
            sink: int) -> Network:
    """The residual graph of `size` nodes with edges tails[k] -> heads[k] of int capacity[k] > 0, none of them
    with its reverse among the edges. The first `slot_edges` edges are the ones `Network.solve` rewrites."""
    count = len(tails)
    both_tails = np.concatenate([tails, heads])
    order = np.argsort(both_tails, kind="stable")  # within a node: its own edges first, then the reverses
    position = np.empty(2 * count, np.int32)
    position[order] = np.arange(2 * count)
    partner = np.concatenate([np.arange(count, 2 * count), np.arange(count)])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(both_tails, minlength=size))]).astype(np.int32)
    return Network(
        indptr=indptr,
        heads=np.concatenate([heads, tails]).astype(np.int32)[order],
        reverse=position[partner[order]],
        capacity=np.concatenate([capacity, np.zeros(count)]).astype(np.int64)[order],
        slot=position[:slot_edges], own_end=(indptr[:-1] + np.bincount(tails, minlength=size)).astype(np.int32),
        source=source, sink=sink,
    )


@njit(cache=True, nogil=True)
def _levels(indptr, heads, residual, source, sink, level, queue):  # pragma: no cover (compiled)
    """BFS distances from the source over edges with residual > 0, up to the sink's level (-1: not reached)."""
    level[:] = -1
    level[source] = 0
    queue[0] = source
    head, tail = 0, 1
    while head < tail:
        u = queue[head]
        head += 1
        if level[sink] >= 0 and level[u] >= level[sink]:
            break
        for e in range(indptr[u], indptr[u + 1]):
            v = heads[e]
            if residual[e] > 0 and level[v] < 0:
                level[v] = level[u] + 1
                queue[tail] = v
                tail += 1


@njit(cache=True, nogil=True)
def _solve(indptr, heads, reverse, capacity, slot, slot_capacity, source, sink, start, own_end, end, residual, level,
           queue, arc, path, log, logged):  # pragma: no cover (compiled; its results are tested through maths.flow)
    if logged[0] < 0:  # the previous solve changed more edges than the log holds
        residual[:] = capacity
    else:
        for k in range(logged[0]):
            residual[log[k]] = capacity[log[k]]
    logged[0] = 0
    for i in range(len(slot)):
        residual[slot[i]] = slot_capacity[i]
    out_of_source, into_sink = 0, 0
    for e in range(indptr[source], indptr[source + 1]):
        out_of_source += residual[e]
    for e in range(indptr[sink], indptr[sink + 1]):
        into_sink += residual[reverse[e]]
    bound = min(out_of_source, into_sink)
    level[:] = start
    ends = own_end  # first phase: a reverse edge is never admissible (it only gains residual pointing one level down)
    total = 0
    while True:
        if total == bound:  # a trivial cut is saturated: it is a minimum cut, no final BFS needed
            level[:] = -1 if total == out_of_source else 0
            level[source] = 0
            level[sink] = -1
            return total
        if level[sink] < 0:
            return total
        arc[:] = indptr[:-1]
        depth, u = 0, source
        while total < bound:
            if u == sink:
                push = residual[path[0]]
                for k in range(1, depth):
                    push = min(push, residual[path[k]])
                cut = -1
                for k in range(depth):
                    e = path[k]
                    residual[e] -= push
                    residual[reverse[e]] += push
                    if logged[0] >= 0:
                        if logged[0] + 2 > len(log):
                            logged[0] = -1
                        else:
                            log[logged[0]] = e
                            log[logged[0] + 1] = reverse[e]
                            logged[0] += 2
                    if cut < 0 and residual[e] == 0:
                        cut = k
                total += push
                depth = cut
                u = source if cut == 0 else heads[path[cut - 1]]
                continue
            while arc[u] < ends[u]:
                e = arc[u]
                if residual[e] > 0 and level[heads[e]] == level[u] + 1:
                    break
                arc[u] += 1
            if arc[u] < ends[u]:
                path[depth] = arc[u]
                depth += 1
                u = heads[arc[u]]
            elif u == source:
                break
            else:  # dead end: no later DFS of this phase enters u, and its parent moves past the edge to it
                level[u] = -1
                depth -= 1
                u = source if depth == 0 else heads[path[depth - 1]]
                arc[u] += 1
        ends = end
        if total < bound:
            _levels(indptr, heads, residual, source, sink, level, queue)

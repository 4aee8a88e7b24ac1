"""Control-flow facts of one host function: dominators, post-dominators, natural loops."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from sirius.analysis.irview import Block, Function

_EXIT = "<exit>"


@dataclass(eq=False)
class NaturalLoop:
    header: Block
    blocks: set[Block]
    latches: list[Block]
    exits: list[tuple[Block, Block]]  # (exiting block inside, target outside)
    parent: NaturalLoop | None = None
    children: list[NaturalLoop] = field(default_factory=list)


class FunctionCFG:
    def __init__(self, fn: Function):
        self.fn = fn
        g = nx.DiGraph()
        for b in fn.blocks:
            g.add_node(b)
            for s in b.succs:
                g.add_edge(b, s)
        self.graph = g
        self.preds = {b: list(g.predecessors(b)) for b in fn.blocks}
        self.idom = nx.immediate_dominators(g, fn.entry)
        rg = g.reverse(copy=True)
        rg.add_node(_EXIT)
        for b in fn.blocks:
            if not b.succs:
                rg.add_edge(_EXIT, b)
        # Blocks that cannot reach an exit (infinite loops) have no post-dominator.
        reach = nx.descendants(rg, _EXIT) | {_EXIT}
        self.ipdom = nx.immediate_dominators(rg.subgraph(reach), _EXIT)
        self._number_dominator_tree()
        self.loops = self._find_loops()

    def _number_dominator_tree(self) -> None:
        """Entry and exit numbers of a depth-first walk of the dominator tree: a dominates b
        when b's interval lies in a's (one test, where walking b's idom chain costs the depth
        of the tree: thousands of blocks in a host function of unrolled launches)."""
        children: dict[Block, list[Block]] = {}
        for b, d in self.idom.items():
            if d is not b:
                children.setdefault(d, []).append(b)
        self._pre: dict[Block, int] = {}
        self._post: dict[Block, int] = {}
        clock = 0
        stack: list[tuple[Block, bool]] = [(self.fn.entry, False)]
        while stack:
            b, done = stack.pop()
            if done:
                self._post[b] = clock
                clock += 1
                continue
            self._pre[b] = clock
            clock += 1
            stack.append((b, True))
            stack.extend((c, False) for c in reversed(children.get(b, ())))

    def dominates(self, a: Block, b: Block) -> bool:
        if a is b:
            return True
        pa, pb = self._pre.get(a), self._pre.get(b)
        if pa is None or pb is None:  # unreachable from the entry: dominated by nothing
            return False
        return pa < pb and self._post[b] < self._post[a]

    def _find_loops(self) -> dict[Block, NaturalLoop]:
        loops: dict[Block, NaturalLoop] = {}
        for u, h in self.graph.edges:
            if u in self.idom and self.dominates(h, u):
                body = {h, u}
                stack = [u]
                while stack:
                    x = stack.pop()
                    if x is h:
                        continue
                    for p in self.preds[x]:
                        if p not in body:
                            body.add(p)
                            stack.append(p)
                if h in loops:
                    loops[h].blocks |= body
                    loops[h].latches.append(u)
                else:
                    loops[h] = NaturalLoop(h, body, [u], [])
        where = {b: k for k, b in enumerate(self.fn.blocks)}
        for lp in loops.values():
            lp.exits = [(b, s) for b in sorted(lp.blocks, key=where.__getitem__)
                        for s in b.succs if s not in lp.blocks]
        ordered = sorted(loops.values(), key=lambda lp: len(lp.blocks))
        for i, lp in enumerate(ordered):
            for outer in ordered[i + 1:]:
                if lp.header in outer.blocks:
                    lp.parent = outer
                    outer.children.append(lp)
                    break
        return loops

    def post_dominator(self, b: Block) -> Block | None:
        p = self.ipdom.get(b)
        return None if p is None or p == _EXIT else p

    def common_post_dominator(self, blocks: list[Block]) -> Block | None:
        def chain(b: Block) -> list:
            out = [b]
            while (nxt := self.ipdom.get(out[-1])) is not None and nxt != out[-1]:
                out.append(nxt)
            return out

        chains = [chain(b) for b in blocks]
        for cand in chains[0]:
            if cand == _EXIT:
                return None
            if all(cand in c for c in chains[1:]):
                return cand
        return None

    def reachable(self, starts: list[Block], stop: Block | None) -> set[Block]:
        seen: set[Block] = set()
        stack = [s for s in starts if s is not stop]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            stack.extend(s for s in x.succs if s is not stop and s not in seen)
        return seen

    def dead_end(self, b: Block) -> bool:
        """True when no path from `b` returns (error exits: exit(), abort, unreachable)."""
        return not any(x.terminator.opcode == "ret" for x in self.reachable([b], None))

"""The hierarchical quota tree (KEP-79): scheduling spec docs/scheduling.md#hierarchical-quota.

Nodes are ClusterQueues (always leaves) and Cohorts (inner nodes). Every quantity is
an exact integer per FR = (flavor, resource). Per node we store:

* ``sq``: subtree quota SQ (docs/scheduling.md#per-node-quantities);
* ``g``: guaranteed quota G, the part of SQ never lent upward;
* ``u``: usage U. For a CQ it is the authoritative ledger (what workloads hold);
  for a cohort it is derived from the children and maintained incrementally.

Formulas (docs/scheduling.md#per-node-quantities), with LA = local available = max(0, G - U)::

    G(n)      = max(0, SQ(n) - LL(n)) if LL(n) is set, else 0
    SQ(cq)    = N(cq)
    SQ(co)    = N(co) + sum over children c of (SQ(c) - G(c))
    U(co)     = sum over children c of max(0, U(c) - G(c))
    avail(root) = SQ - U
    avail(n)  = LA(n) + min(avail(parent), (SQ - G) - max(0, U - G) + BL)   # min only if BL set
    pot(root) = SQ;  pot(n) = min(G(n) + pot(parent), SQ(n) + BL(n))       # min only if BL set

Nodes are addressed by :class:`NodeRef` where both kinds are possible (a CQ and a
cohort may share a name), and by plain names where only one kind makes sense.

Structure changes (set/delete of a CQ or cohort) rebuild every affected tree from
the leaves; usage changes (add/remove) are incremental (docs/scheduling.md#changing-usage) because
they happen on every admission. Trees containing a parent cycle (docs/scheduling.md#cohort-cycles)
are not evaluated: their cohorts hold no quantities and their CQs report nothing available, while
the CQ usage ledger is still kept so nothing is lost when the cycle is broken.

Iteration orders visible to callers are always name ascending (D3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from scheduler.core.resources import FlavorResource

NodeKind = Literal["cq", "cohort"]


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A node of the tree: ``NodeRef("cq", name)`` or ``NodeRef("cohort", name)``.

    CQ and cohort names live in separate namespaces, hence the kind.
    """

    kind: NodeKind
    name: str

    @classmethod
    def cq(cls, name: str) -> NodeRef:
        return cls("cq", name)

    @classmethod
    def cohort(cls, name: str) -> NodeRef:
        return cls("cohort", name)

    @property
    def is_cq(self) -> bool:
        return self.kind == "cq"


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota of one FR on a CQ or cohort; limits of ``None`` mean unset
    (docs/scheduling.md#clusterqueue)."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    def __post_init__(self) -> None:
        # Validation (docs/scheduling.md#invalid-input) rejects negative quantities before they
        # reach the core; failing loudly here catches a caller that skipped it.
        if self.nominal < 0:
            raise ValueError(f"nominal quota must be >= 0, got {self.nominal}")
        if self.borrowing_limit is not None and self.borrowing_limit < 0:
            raise ValueError(f"borrowingLimit must be >= 0, got {self.borrowing_limit}")
        if self.lending_limit is not None and self.lending_limit < 0:
            raise ValueError(f"lendingLimit must be >= 0, got {self.lending_limit}")


_EMPTY_QUOTAS: Mapping[FlavorResource, ResourceQuota] = MappingProxyType({})


class _Node:
    """Mutable per-node state. ``quotas``, ``sq`` and ``g`` are only ever replaced
    wholesale (never mutated in place), so clones may share them; ``u`` and the
    child sets are mutated in place and are copied by :meth:`copy`."""

    __slots__ = (
        "child_cohorts",
        "child_cqs",
        "cyclic",
        "explicit",
        "g",
        "generation",
        "height",
        "kind",
        "name",
        "parent",
        "quotas",
        "sq",
        "u",
        "weight",
    )

    def __init__(self, kind: NodeKind, name: str) -> None:
        self.kind: NodeKind = kind
        self.name = name
        self.parent: str | None = None  # always the name of a cohort
        self.quotas: Mapping[FlavorResource, ResourceQuota] = _EMPTY_QUOTAS
        self.explicit = kind == "cq"
        self.weight = 1.0
        self.sq: dict[FlavorResource, int] = {}
        self.g: dict[FlavorResource, int] = {}
        self.u: dict[FlavorResource, int] = {}
        self.child_cqs: set[str] = set()
        self.child_cohorts: set[str] = set()
        self.cyclic = False
        self.height = 0
        self.generation = 0

    def copy(self) -> _Node:
        other = _Node(self.kind, self.name)
        other.parent = self.parent
        other.quotas = self.quotas
        other.explicit = self.explicit
        other.weight = self.weight
        other.sq = self.sq
        other.g = self.g
        other.u = dict(self.u)
        other.child_cqs = set(self.child_cqs)
        other.child_cohorts = set(self.child_cohorts)
        other.cyclic = self.cyclic
        other.height = self.height
        other.generation = self.generation
        return other

    def has_children(self) -> bool:
        return bool(self.child_cqs or self.child_cohorts)

    def la(self, fr: FlavorResource) -> int:
        return max(0, self.g.get(fr, 0) - self.u.get(fr, 0))

    def borrowing_limit(self, fr: FlavorResource) -> int | None:
        q = self.quotas.get(fr)
        return None if q is None else q.borrowing_limit


def _guaranteed(
    sq: Mapping[FlavorResource, int], quotas: Mapping[FlavorResource, ResourceQuota]
) -> dict[FlavorResource, int]:
    # G exists only where a lending limit is set; elsewhere it is 0 (absent key).
    return {
        fr: max(0, sq.get(fr, 0) - q.lending_limit)
        for fr, q in quotas.items()
        if q.lending_limit is not None
    }


def _set_amount(target: dict[FlavorResource, int], fr: FlavorResource, value: int) -> None:
    # Zero entries are dropped so usage dicts stay as small as the live workload set.
    if value:
        target[fr] = value
    else:
        target.pop(fr, None)


class QuotaTree:
    """All ClusterQueues and Cohorts with their quotas and usage
    (docs/scheduling.md#hierarchical-quota)."""

    __slots__ = ("_chains", "_children", "_cohorts", "_cqs", "_gen_counter", "_structure")

    def __init__(self) -> None:
        self._cqs: dict[str, _Node] = {}
        self._cohorts: dict[str, _Node] = {}
        # One counter for the whole tree: a CQ's generation only ever increases, even
        # across delete and re-create, so a stale flavor-scan record
        # (docs/scheduling.md#flavor-scan-resumption) can never match a new CQ of the same name.
        self._gen_counter = 0
        # Moves on every structural change (which tree each node is in, and quotas).
        self._structure = 0
        # CQ name -> its node and ancestors (acyclic trees only), until the next change.
        self._chains: dict[str, list[_Node]] = {}
        # (kind, name) -> its children by name, until the next change. Shared with
        # clones: it depends on the structure alone, which a change replaces (with a
        # new dict), so a clone never sees another structure's entries.
        self._children: dict[tuple[str, str], list[NodeRef]] = {}

    # ------------------------------------------------------------------ structure

    def set_cluster_queue(
        self,
        name: str,
        cohort: str | None,
        quotas: Mapping[FlavorResource, ResourceQuota],
        weight: float = 1.0,
    ) -> None:
        """Create or replace a CQ's spec; its usage is kept. ``""`` means no cohort.

        A call that changes neither cohort nor quotas is not a spec change for the
        tree (only the weight is stored): nothing is rebuilt and no generation moves.
        """
        cohort = cohort or None
        new_quotas = MappingProxyType(dict(quotas))
        node = self._cqs.get(name)
        if node is not None and node.parent == cohort and node.quotas == new_quotas:
            node.weight = weight
            return
        cohort_seeds: list[str] = []
        if node is None:
            node = _Node("cq", name)
            self._cqs[name] = node
        elif node.parent is not None:
            cohort_seeds.append(node.parent)
        before_cohorts, before_cqs = self._members(cohort_seeds)

        self._detach(node)
        node.quotas = new_quotas
        node.weight = weight
        node.sq = {fr: q.nominal for fr, q in new_quotas.items()}
        node.g = _guaranteed(node.sq, new_quotas)
        self._attach(node, cohort)

        if cohort is not None:
            before_cohorts.add(cohort)
        before_cqs.add(name)
        self._settle(before_cohorts, before_cqs)

    def delete_cluster_queue(self, name: str) -> None:
        """Remove a CQ and its usage ledger; unknown names are ignored."""
        node = self._cqs.get(name)
        if node is None:
            return
        seeds = [node.parent] if node.parent is not None else []
        before_cohorts, before_cqs = self._members(seeds)
        self._detach(node)
        del self._cqs[name]
        self._settle(before_cohorts, before_cqs)

    def set_cohort(
        self,
        name: str,
        parent: str | None,
        quotas: Mapping[FlavorResource, ResourceQuota],
        weight: float = 1.0,
    ) -> None:
        """Create or replace an explicit Cohort object. ``""`` means no parent.

        As for CQs, a weight-only change does not rebuild or bump generations.
        """
        parent = parent or None
        new_quotas = MappingProxyType(dict(quotas))
        node = self._cohorts.get(name)
        if (
            node is not None
            and node.explicit
            and node.parent == parent
            and node.quotas == new_quotas
        ):
            node.weight = weight
            return
        if node is None:
            node = _Node("cohort", name)
            self._cohorts[name] = node
            before_cohorts: set[str] = set()
            before_cqs: set[str] = set()
        else:
            before_cohorts, before_cqs = self._members([name])

        self._detach(node)
        node.explicit = True
        node.quotas = new_quotas
        node.weight = weight
        self._attach(node, parent)

        before_cohorts.add(name)
        if parent is not None:
            before_cohorts.add(parent)
        self._settle(before_cohorts, before_cqs)

    def delete_cohort(self, name: str) -> None:
        """Delete a Cohort object: it becomes implicit (no quota, no parent, weight 1)
        if a CQ or cohort still references it, otherwise it disappears."""
        node = self._cohorts.get(name)
        if node is None or not node.explicit:
            return
        before_cohorts, before_cqs = self._members([name])
        self._detach(node)
        if node.has_children():
            node.explicit = False
            node.quotas = _EMPTY_QUOTAS
            node.weight = 1.0
        else:
            del self._cohorts[name]
        self._settle(before_cohorts, before_cqs)

    def _attach(self, node: _Node, parent: str | None) -> None:
        node.parent = parent
        if parent is None:
            return
        pnode = self._cohorts.get(parent)
        # referenced but no object: implicit cohort (docs/scheduling.md#the-quota-tree)
        if pnode is None:
            pnode = _Node("cohort", parent)
            self._cohorts[parent] = pnode
        if node.kind == "cq":
            pnode.child_cqs.add(node.name)
        else:
            pnode.child_cohorts.add(node.name)

    def _detach(self, node: _Node) -> None:
        parent = node.parent
        node.parent = None
        if parent is None:
            return
        pnode = self._cohorts[parent]
        if node.kind == "cq":
            pnode.child_cqs.discard(node.name)
        else:
            pnode.child_cohorts.discard(node.name)
        # An implicit cohort exists only while referenced.
        if not pnode.explicit and not pnode.has_children():
            del self._cohorts[parent]

    def _component(self, seed: str) -> tuple[str, bool, list[str], list[str]]:
        """The tree containing cohort ``seed``: (top, cyclic, cohorts, cqs).

        ``top`` is the root, or for a cyclic tree the smallest name on the cycle.
        Each cohort has at most one parent, so a connected structure holds at most one
        cycle and every member's parent chain ends at the root or in that cycle;
        walking child links down from ``top`` therefore reaches every member.
        """
        index: dict[str, int] = {}
        path: list[str] = []
        cur = seed
        while True:
            if cur in index:
                top, cyclic = min(path[index[cur] :]), True
                break
            index[cur] = len(path)
            path.append(cur)
            parent = self._cohorts[cur].parent
            if parent is None:
                top, cyclic = cur, False
                break
            cur = parent
        cohorts: list[str] = []
        cqs: list[str] = []
        seen = {top}
        stack = [top]
        while stack:
            name = stack.pop()
            cohorts.append(name)
            node = self._cohorts[name]
            cqs.extend(node.child_cqs)
            for child in node.child_cohorts:
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return top, cyclic, cohorts, cqs

    def _members(self, seeds: Iterable[str]) -> tuple[set[str], set[str]]:
        """Cohorts and CQs of the trees containing the seed cohorts (before a change)."""
        cohorts: set[str] = set()
        cqs: set[str] = set()
        for seed in seeds:
            if seed in self._cohorts and seed not in cohorts:
                _, _, members, leaves = self._component(seed)
                cohorts.update(members)
                cqs.update(leaves)
        return cohorts, cqs

    def _settle(self, cohort_seeds: Iterable[str], cq_seeds: Iterable[str]) -> None:
        """After a structural change: re-derive every tree that contains a seed (the
        seeds are the members of the affected trees before the change plus the changed
        nodes), then bump the generation of every CQ that was or is in them
        (docs/scheduling.md#changing-usage)."""
        self._structure += 1
        self._chains = {}
        self._children = {}
        bump = {name for name in cq_seeds if name in self._cqs}
        done: set[str] = set()
        for seed in sorted(cohort_seeds):
            if seed not in self._cohorts or seed in done:
                continue
            top, cyclic, cohorts, cqs = self._component(seed)
            done.update(cohorts)
            bump.update(cqs)
            if cyclic:
                self._mark_cyclic(cohorts, cqs)
            else:
                self._rebuild(top)
        for name in bump:
            node = self._cqs[name]
            if node.parent is None:  # standalone root leaf: never cyclic
                node.cyclic = False
        for name in sorted(bump):
            self._bump(self._cqs[name])

    def _mark_cyclic(self, cohorts: Iterable[str], cqs: Iterable[str]) -> None:
        # Quantities of a cyclic tree are meaningless; clearing them makes every query
        # answer "nothing" instead of stale numbers. CQ ledgers are kept.
        for name in cohorts:
            node = self._cohorts[name]
            node.cyclic = True
            node.sq, node.g, node.u = {}, {}, {}
            node.height = 0
        for name in cqs:
            self._cqs[name].cyclic = True

    def _rebuild(self, top: str) -> None:
        """Recompute SQ, G, U and height of an acyclic tree from the leaves
        (docs/scheduling.md#per-node-quantities)."""
        order: list[_Node] = []
        stack = [self._cohorts[top]]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(self._cohorts[c] for c in node.child_cohorts)
        # Pre-order reversed: every child is computed before its parent.
        for node in reversed(order):
            sq = {fr: q.nominal for fr, q in node.quotas.items()}
            u: dict[FlavorResource, int] = {}
            height = 1 if node.has_children() else 0
            children: list[_Node] = [self._cqs[c] for c in node.child_cqs]
            for c in node.child_cohorts:
                child = self._cohorts[c]
                children.append(child)
                height = max(height, 1 + child.height)
            for child in children:
                child.cyclic = False
                for fr, v in child.sq.items():
                    sq[fr] = sq.get(fr, 0) + v - child.g.get(fr, 0)
                for fr, v in child.u.items():
                    over = v - child.g.get(fr, 0)
                    if over > 0:
                        u[fr] = u.get(fr, 0) + over
            node.sq = sq
            node.g = _guaranteed(sq, node.quotas)
            node.u = u
            node.height = height
            node.cyclic = False

    def _bump(self, node: _Node) -> None:
        self._gen_counter += 1
        node.generation = self._gen_counter

    # ------------------------------------------------------------------ usage (hot)

    def add_usage(self, cq: str, amounts: Mapping[FlavorResource, int]) -> None:
        """Add usage to a CQ and propagate it up (docs/scheduling.md#changing-usage). Raises
        KeyError for an unknown CQ: usage of a CQ that does not exist yet is the caller's to re-add
        when the CQ is created (docs/scheduling.md#invalid-input)."""
        node = self._cq(cq)
        for fr, v in amounts.items():
            if v > 0:
                self._add(node, fr, v)
            elif v < 0:
                self._remove(node, fr, -v)

    def withdraw_usage(self, cq: str, amounts: Mapping[FlavorResource, int]) -> None:
        """Take usage away for a what-if (preemption search, re-fit check) and keep the
        allocatable generation: nothing really left, so flavor-scan records stay valid."""
        self.add_usage(cq, {fr: -v for fr, v in amounts.items()})

    def remove_usage(self, cq: str, amounts: Mapping[FlavorResource, int]) -> None:
        """Remove usage from a CQ (docs/scheduling.md#changing-usage) and bump its generation (a
        workload left).

        An unknown CQ is ignored: its ledger was dropped when it was deleted.
        """
        node = self._cqs.get(cq)
        if node is None:
            return
        for fr, v in amounts.items():
            if v > 0:
                self._remove(node, fr, v)
            elif v < 0:
                self._add(node, fr, -v)
        self._bump(node)

    def _add(self, node: _Node, fr: FlavorResource, v: int) -> None:
        # A cyclic tree is not evaluated: only the CQ ledger moves.
        propagate = not node.cyclic
        while True:
            before = node.la(fr)
            _set_amount(node.u, fr, node.u.get(fr, 0) + v)
            if not propagate or node.parent is None or v <= before:
                return
            # Only what does not fit in the guaranteed part shows up in the parent.
            v -= before
            node = self._cohorts[node.parent]

    def _remove(self, node: _Node, fr: FlavorResource, v: int) -> None:
        propagate = not node.cyclic
        while True:
            stored = node.u.get(fr, 0) - node.g.get(fr, 0)
            _set_amount(node.u, fr, node.u.get(fr, 0) - v)
            if not propagate or node.parent is None or stored <= 0:
                return
            # Only the part that was above G had been passed to the parent.
            v = min(v, stored)
            node = self._cohorts[node.parent]

    # ------------------------------------------------------------------ quantities

    def available(self, cq: str, fr: FlavorResource) -> int:
        """Available(CQ) = max(0, avail(CQ)) (docs/scheduling.md#per-node-quantities); 0 in a cyclic
        tree."""
        chain = self._cq_chain(cq)
        return 0 if chain is None else max(0, self._available(chain, fr))

    def raw_available(self, node: NodeRef, fr: FlavorResource) -> int:
        """avail(n) of docs/scheduling.md#per-node-quantities, unclamped (may be negative after a
        quota decrease)."""
        chain = self._chain_of(node)
        return 0 if chain is None else self._available(chain, fr)

    def _chain_of(self, node: NodeRef) -> list[_Node] | None:
        """The node and its ancestors up to the root; None in a cyclic tree."""
        if node.kind == "cq":
            return self._cq_chain(node.name)
        n = self._node(node)
        return None if n.cyclic else self._chain(n)

    def _cq_chain(self, cq: str) -> list[_Node] | None:
        """A ClusterQueue's chain, kept until the structure changes (the hot path: no
        NodeRef is made)."""
        chain = self._chains.get(cq)
        if chain is None:
            n = self._cq(cq)
            if n.cyclic:
                return None
            chain = self._chains[cq] = self._chain(n)
        return chain

    @staticmethod
    def _available(chain: list[_Node], fr: FlavorResource) -> int:
        root = chain[-1]
        value = root.sq.get(fr, 0) - root.u.get(fr, 0)
        for cur in reversed(chain[:-1]):
            bl = cur.borrowing_limit(fr)
            if bl is not None:
                g = cur.g.get(fr, 0)
                lent_up = max(0, cur.u.get(fr, 0) - g)
                value = min(value, cur.sq.get(fr, 0) - g - lent_up + bl)
            value = cur.la(fr) + value
        return value

    def potential_available(self, cq: str, fr: FlavorResource) -> int:
        """PotentialAvailable(CQ) = pot(CQ) (docs/scheduling.md#per-node-quantities); 0 in a cyclic
        tree."""
        return self.potential(NodeRef("cq", cq), fr)

    def potential(self, node: NodeRef, fr: FlavorResource) -> int:
        """pot(n) for any node (DRS uses pot(parent), docs/scheduling.md#dominant-resource-share); 0
        in a cyclic tree."""
        chain = self._chain_of(node)
        if chain is None:
            return 0
        value = chain[-1].sq.get(fr, 0)
        for cur in reversed(chain[:-1]):
            value += cur.g.get(fr, 0)
            bl = cur.borrowing_limit(fr)
            if bl is not None:
                value = min(value, cur.sq.get(fr, 0) + bl)
        return value

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        q = self._cq(cq).quotas.get(fr)
        return 0 if q is None else q.nominal

    def usage(self, cq: str, fr: FlavorResource) -> int:
        return self._cq(cq).u.get(fr, 0)

    def borrowing_limit(self, cq: str, fr: FlavorResource) -> int | None:
        return self._cq(cq).borrowing_limit(fr)

    def lending_limit(self, cq: str, fr: FlavorResource) -> int | None:
        q = self._cq(cq).quotas.get(fr)
        return None if q is None else q.lending_limit

    def quotas(self, node: NodeRef) -> Mapping[FlavorResource, ResourceQuota]:
        """The node's own spec quotas (read-only; empty for implicit cohorts)."""
        return self._node(node).quotas

    def subtree_quota(self, node: NodeRef, fr: FlavorResource) -> int:
        """SQ(n, fr)."""
        return self._node(node).sq.get(fr, 0)

    def subtree_quotas(self, node: NodeRef) -> dict[FlavorResource, int]:
        """SQ(n) for every FR present in the node's subtree (a copy)."""
        return dict(self._node(node).sq)

    def node_usage(self, node: NodeRef, fr: FlavorResource) -> int:
        """U(n, fr) of a CQ or cohort."""
        return self._node(node).u.get(fr, 0)

    def node_usages(self, node: NodeRef) -> dict[FlavorResource, int]:
        """U(n) of every FR with non-zero usage (a copy)."""
        return dict(self._node(node).u)

    def guaranteed(self, node: NodeRef, fr: FlavorResource) -> int:
        """G(n, fr)."""
        return self._node(node).g.get(fr, 0)

    def local_available(self, node: NodeRef, fr: FlavorResource) -> int:
        """LA(n, fr) = max(0, G - U)."""
        return self._node(node).la(fr)

    def weight(self, node: NodeRef) -> float:
        """Fair-sharing weight (1 for implicit cohorts)."""
        return self._node(node).weight

    # ------------------------------------------------------------------ predicates

    def borrows(self, node: NodeRef, fr: FlavorResource, value: int) -> bool:
        """docs/scheduling.md#quota-predicates: U + value > SQ (for a CQ SQ is its nominal)."""
        n = self._node(node)
        return n.u.get(fr, 0) + value > n.sq.get(fr, 0)

    def within_nominal(self, node: NodeRef, frs: Iterable[FlavorResource]) -> bool:
        """docs/scheduling.md#quota-predicates: U <= SQ for every given FR."""
        n = self._node(node)
        return all(n.u.get(fr, 0) <= n.sq.get(fr, 0) for fr in frs)

    def fits_in_quota(
        self, node: NodeRef, requests: Mapping[FlavorResource, int]
    ) -> tuple[bool, dict[FlavorResource, int]]:
        """docs/scheduling.md#quota-predicates: (every U + R <= SQ, remaining requests for the
        parent).

        The remaining dict has an entry for every requested FR, zero included, so
        the parent's check covers the same FRs.
        """
        n = self._node(node)
        fits = True
        remaining: dict[FlavorResource, int] = {}
        for fr, value in requests.items():
            if n.u.get(fr, 0) + value > n.sq.get(fr, 0):
                fits = False
            remaining[fr] = max(0, value - n.la(fr))
        return fits, remaining

    def borrowing_level(self, cq: str, fr: FlavorResource, value: int) -> tuple[int, bool]:
        """docs/scheduling.md#quota-predicates: (borrowing level, mayReclaimInHierarchy) of a
        request on a CQ.

        (0, False) in a cyclic tree, where no level is meaningful.
        """
        node = self._cq(cq)
        if node.cyclic:
            return 0, False
        if node.parent is None or node.u.get(fr, 0) + value <= node.sq.get(fr, 0):
            return 0, node.parent is not None
        rem = value - node.la(fr)
        anc = self._cohorts[node.parent]
        while True:
            if anc.u.get(fr, 0) + rem <= anc.sq.get(fr, 0):
                return anc.height, anc.parent is not None
            if anc.parent is None:
                return anc.height, False
            rem -= anc.la(fr)
            anc = self._cohorts[anc.parent]

    # ------------------------------------------------------------------ navigation

    def parent(self, node: NodeRef) -> NodeRef | None:
        p = self._node(node).parent
        return None if p is None else NodeRef("cohort", p)

    def cohort_of(self, cq: str) -> str | None:
        return self._cq(cq).parent

    def children(self, node: NodeRef) -> list[NodeRef]:
        """Child cohorts and CQs together, by name (a cohort before a CQ of the
        same name). A CQ has none."""
        key = (node.kind, node.name)
        refs = self._children.get(key)
        if refs is None:
            n = self._node(node)
            refs = [NodeRef("cohort", c) for c in n.child_cohorts]
            refs.extend(NodeRef("cq", c) for c in n.child_cqs)
            refs.sort(key=lambda r: (r.name, r.kind))
            self._children[key] = refs
        return list(refs)

    def child_cohorts(self, cohort: str) -> list[str]:
        return sorted(self._cohort(cohort).child_cohorts)

    def child_cluster_queues(self, cohort: str) -> list[str]:
        return sorted(self._cohort(cohort).child_cqs)

    def height(self, cohort: str) -> int:
        """docs/scheduling.md#the-quota-tree height of a cohort (0 in a cyclic tree). CQs have
        height 0."""
        return self._cohort(cohort).height

    def root(self, node: NodeRef) -> NodeRef:
        """The root of the node's tree (the node itself if it has no parent). In a
        cyclic tree there is no root: the smallest cohort name on the cycle stands
        in for it."""
        n = self._node(node)
        if n.parent is None:
            return node
        if n.cyclic:
            top, _, _, _ = self._component(n.parent)
            return NodeRef("cohort", top)
        return NodeRef("cohort", self._chain(n)[-1].name)

    def path_to_root(self, node: NodeRef) -> list[NodeRef]:
        """The node and its ancestors, bottom-up ([] in a cyclic tree)."""
        n = self._node(node)
        if n.cyclic:
            return []
        return [NodeRef(c.kind, c.name) for c in self._chain(n)]

    def tree_cluster_queues(self, cq: str) -> list[str]:
        """Every CQ of ``cq``'s root tree by name (the flush scope of docs/scheduling.md#flush):
        ``[cq]`` without a cohort, ``[]`` in a cyclic tree."""
        node = self._cq(cq)
        if node.cyclic:
            return []
        if node.parent is None:
            return [cq]
        _, _, _, cqs = self._component(node.parent)
        return sorted(cqs)

    def tree_cohorts(self, cohort: str) -> list[str]:
        """Every cohort of the tree containing ``cohort`` (cyclic or not), by name."""
        self._cohort(cohort)
        _, _, cohorts, _ = self._component(cohort)
        return sorted(cohorts)

    # ------------------------------------------------------------------ cycles

    def in_cycle(self, cq: str) -> bool:
        """The CQ's cohort tree contains a parent cycle (docs/scheduling.md#cohort-cycles)."""
        return self._cq(cq).cyclic

    def cohort_in_cycle(self, cohort: str) -> bool:
        n = self._cohorts.get(cohort)
        return n is not None and n.cyclic

    def cycle_description(self, cohort: str) -> str:
        """The cycle reached by following parent links from ``cohort``, written from
        the first cohort of the cycle met on the way: ``"a -> b -> a"``. For a cohort
        on the cycle that is itself. ``""`` if the cohort is not in a cyclic tree."""
        n = self._cohorts.get(cohort)
        if n is None or not n.cyclic:
            return ""
        index: dict[str, int] = {}
        path: list[str] = []
        cur: str | None = cohort
        while cur is not None and cur not in index:
            index[cur] = len(path)
            path.append(cur)
            cur = self._cohorts[cur].parent
        if cur is None:  # defensive: flags and links disagree
            return ""
        cycle = path[index[cur] :]
        cycle.append(cur)
        return " -> ".join(cycle)

    # ------------------------------------------------------------------ listings

    def cohorts(self) -> list[str]:
        """Every cohort, explicit or implicit, by name."""
        return sorted(self._cohorts)

    def explicit_cohorts(self) -> list[str]:
        return sorted(name for name, n in self._cohorts.items() if n.explicit)

    def cluster_queues(self) -> list[str]:
        return sorted(self._cqs)

    def has_cluster_queue(self, cq: str) -> bool:
        return cq in self._cqs

    def has_cohort(self, cohort: str) -> bool:
        return cohort in self._cohorts

    def is_explicit(self, cohort: str) -> bool:
        return self._cohort(cohort).explicit

    def generation(self, cq: str) -> int:
        """Allocatable generation (docs/scheduling.md#changing-usage, #flavor-scan-resumption):
        strictly increases when the CQ's tree changes shape or quota, or when usage is removed from
        the CQ."""
        return self._cq(cq).generation

    def frs(self) -> set[FlavorResource]:
        """Every FR with quota on some node or usage on some CQ."""
        out: set[FlavorResource] = set()
        for n in self._cqs.values():
            out.update(n.quotas)
            out.update(n.u)
        for n in self._cohorts.values():
            out.update(n.quotas)
        return out

    def clone(self) -> QuotaTree:
        """An independent deep copy (the cycle snapshot, docs/scheduling.md#cycle-snapshot)."""
        other = QuotaTree()
        other._cqs = {name: n.copy() for name, n in self._cqs.items()}
        other._cohorts = {name: n.copy() for name, n in self._cohorts.items()}
        other._gen_counter = self._gen_counter
        other._structure = self._structure
        other._children = self._children
        return other

    @property
    def structure_version(self) -> int:
        """Changes whenever a node is added, removed, moved or given new quotas, so
        anything derived from the shape of the trees can be kept until it moves."""
        return self._structure

    # ------------------------------------------------------------------ internals

    def _cq(self, name: str) -> _Node:
        node = self._cqs.get(name)
        if node is None:
            raise KeyError(f"unknown ClusterQueue {name!r}")
        return node

    def _cohort(self, name: str) -> _Node:
        node = self._cohorts.get(name)
        if node is None:
            raise KeyError(f"unknown cohort {name!r}")
        return node

    def _node(self, ref: NodeRef) -> _Node:
        return self._cq(ref.name) if ref.kind == "cq" else self._cohort(ref.name)

    def _chain(self, node: _Node) -> list[_Node]:
        """The node and its ancestors up to the root; only for acyclic trees."""
        chain = [node]
        while node.parent is not None:
            node = self._cohorts[node.parent]
            chain.append(node)
        return chain

"""The shape of the quota trees (KEP-79): which ClusterQueue and Cohort hangs under which
cohort, which trees hold a parent cycle, and the listings in name order
(docs/scheduling.md#the-quota-tree). The quantities on the nodes (subtree quota,
guaranteed quota, usage) are computed by :class:`scheduler.core.quota.QuotaTree`, which
extends this structure with the arithmetic.

Nodes are ClusterQueues (always leaves) and Cohorts (inner nodes), addressed by
:class:`NodeRef` where both kinds are possible (a CQ and a cohort may share a name), and
by plain names where only one kind makes sense. A cohort referenced by a CQ or cohort
but with no object of its own is implicit: it exists only while referenced. Iteration
orders visible to callers are always name ascending.
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


EMPTY_QUOTAS: Mapping[FlavorResource, ResourceQuota] = MappingProxyType({})


class QuotaNode:
    """One node's mutable state: its place in the forest and its quantities
    (docs/scheduling.md#per-node-quantities). ``quotas``, ``subtree_quota`` and
    ``guaranteed`` are only ever replaced wholesale (never mutated in place), so clones
    may share them; ``usage`` and the child sets are mutated in place and are copied by
    :meth:`copy`."""

    __slots__ = (
        "child_cohorts",
        "child_cqs",
        "cyclic",
        "explicit",
        "generation",
        "guaranteed",
        "height",
        "kind",
        "name",
        "parent",
        "quotas",
        "subtree_quota",
        "usage",
        "weight",
    )

    def __init__(self, kind: NodeKind, name: str) -> None:
        self.kind: NodeKind = kind
        self.name = name
        self.parent: str | None = None  # always the name of a cohort
        self.quotas: Mapping[FlavorResource, ResourceQuota] = EMPTY_QUOTAS
        self.explicit = kind == "cq"
        self.weight = 1.0
        self.subtree_quota: dict[FlavorResource, int] = {}  # SQ
        self.guaranteed: dict[FlavorResource, int] = {}  # G: the part of SQ never lent up
        self.usage: dict[FlavorResource, int] = {}  # U
        self.child_cqs: set[str] = set()
        self.child_cohorts: set[str] = set()
        self.cyclic = False
        self.height = 0
        self.generation = 0

    def copy(self) -> QuotaNode:
        other = QuotaNode(self.kind, self.name)
        other.parent = self.parent
        other.quotas = self.quotas
        other.explicit = self.explicit
        other.weight = self.weight
        other.subtree_quota = self.subtree_quota
        other.guaranteed = self.guaranteed
        other.usage = dict(self.usage)
        other.child_cqs = set(self.child_cqs)
        other.child_cohorts = set(self.child_cohorts)
        other.cyclic = self.cyclic
        other.height = self.height
        other.generation = self.generation
        return other

    def has_children(self) -> bool:
        return bool(self.child_cqs or self.child_cohorts)

    def local_available(self, fr: FlavorResource) -> int:
        """LA = max(0, G - U): guaranteed quota not in use."""
        return max(0, self.guaranteed.get(fr, 0) - self.usage.get(fr, 0))

    def borrowing_limit(self, fr: FlavorResource) -> int | None:
        q = self.quotas.get(fr)
        return None if q is None else q.borrowing_limit


@dataclass(frozen=True, slots=True)
class Component:
    """One connected tree: its top (the root, or for a cyclic tree the smallest name on
    the cycle), whether it holds a cycle, and its members."""

    top: str
    cyclic: bool
    cohorts: list[str]
    cqs: list[str]


class CohortForest:
    """Every ClusterQueue and Cohort node and how they hang together."""

    __slots__ = ("_chains", "_children", "_cohorts", "_cqs", "_structure")

    def __init__(self) -> None:
        self._cqs: dict[str, QuotaNode] = {}
        self._cohorts: dict[str, QuotaNode] = {}
        # Moves on every structural change (which tree each node is in, and quotas).
        self._structure = 0
        # CQ name -> its node and ancestors (acyclic trees only), until the next change.
        self._chains: dict[str, list[QuotaNode]] = {}
        # (kind, name) -> its children by name, until the next change. Shared with
        # clones: it depends on the structure alone, which a change replaces (with a
        # new dict), so a clone never sees another structure's entries.
        self._children: dict[tuple[str, str], list[NodeRef]] = {}

    # ------------------------------------------------------------------ changes

    def _attach(self, node: QuotaNode, parent: str | None) -> None:
        node.parent = parent
        if parent is None:
            return
        pnode = self._cohorts.get(parent)
        # referenced but no object: implicit cohort (docs/scheduling.md#the-quota-tree)
        if pnode is None:
            pnode = QuotaNode("cohort", parent)
            self._cohorts[parent] = pnode
        if node.kind == "cq":
            pnode.child_cqs.add(node.name)
        else:
            pnode.child_cohorts.add(node.name)

    def _detach(self, node: QuotaNode) -> None:
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

    def _structure_changed(self) -> None:
        """Forget what was derived from the shape of the trees."""
        self._structure += 1
        self._chains = {}
        self._children = {}

    def _copy_into(self, other: CohortForest) -> None:
        """Give `other` copies of every node (usage and child sets copied, the rest
        shared: see QuotaNode) and this structure's version and children cache."""
        other._cqs = {name: n.copy() for name, n in self._cqs.items()}
        other._cohorts = {name: n.copy() for name, n in self._cohorts.items()}
        other._structure = self._structure
        other._children = self._children

    def _component(self, seed: str) -> Component:
        """The tree containing cohort ``seed``.

        Each cohort has at most one parent, so a connected structure holds at most one
        cycle and every member's parent chain ends at the root or in that cycle;
        walking child links down from the top therefore reaches every member.
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
        return Component(top, cyclic, cohorts, cqs)

    def _members(self, seeds: Iterable[str]) -> tuple[set[str], set[str]]:
        """Cohorts and CQs of the trees containing the seed cohorts (before a change)."""
        cohorts: set[str] = set()
        cqs: set[str] = set()
        for seed in seeds:
            if seed in self._cohorts and seed not in cohorts:
                component = self._component(seed)
                cohorts.update(component.cohorts)
                cqs.update(component.cqs)
        return cohorts, cqs

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
            return NodeRef("cohort", self._component(n.parent).top)
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
        return sorted(self._component(node.parent).cqs)

    def tree_cohorts(self, cohort: str) -> list[str]:
        """Every cohort of the tree containing ``cohort`` (cyclic or not), by name."""
        self._cohort(cohort)
        return sorted(self._component(cohort).cohorts)

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

    def quotas(self, node: NodeRef) -> Mapping[FlavorResource, ResourceQuota]:
        """The node's own spec quotas (read-only; empty for implicit cohorts)."""
        return self._node(node).quotas

    def weight(self, node: NodeRef) -> float:
        """Fair-sharing weight (1 for implicit cohorts)."""
        return self._node(node).weight

    @property
    def structure_version(self) -> int:
        """Changes whenever a node is added, removed, moved or given new quotas, so
        anything derived from the shape of the trees can be kept until it moves."""
        return self._structure

    # ------------------------------------------------------------------ lookups

    def _cq(self, name: str) -> QuotaNode:
        node = self._cqs.get(name)
        if node is None:
            raise KeyError(f"unknown ClusterQueue {name!r}")
        return node

    def _cohort(self, name: str) -> QuotaNode:
        node = self._cohorts.get(name)
        if node is None:
            raise KeyError(f"unknown cohort {name!r}")
        return node

    def _node(self, ref: NodeRef) -> QuotaNode:
        return self._cq(ref.name) if ref.kind == "cq" else self._cohort(ref.name)

    def _chain(self, node: QuotaNode) -> list[QuotaNode]:
        """The node and its ancestors up to the root; only for acyclic trees."""
        chain = [node]
        while node.parent is not None:
            node = self._cohorts[node.parent]
            chain.append(node)
        return chain

    def _cq_chain(self, cq: str) -> list[QuotaNode] | None:
        """A ClusterQueue's chain, kept until the structure changes (the hot path: no
        NodeRef is made); None in a cyclic tree."""
        chain = self._chains.get(cq)
        if chain is None:
            n = self._cq(cq)
            if n.cyclic:
                return None
            chain = self._chains[cq] = self._chain(n)
        return chain

    def _chain_of(self, node: NodeRef) -> list[QuotaNode] | None:
        """The node and its ancestors up to the root; None in a cyclic tree."""
        if node.kind == "cq":
            return self._cq_chain(node.name)
        n = self._node(node)
        return None if n.cyclic else self._chain(n)

"""The arithmetic of the hierarchical quota trees (KEP-79,
docs/scheduling.md#hierarchical-quota); their shape is :mod:`scheduler.core.cohort_forest`.

Every quantity is an exact integer per FR = (flavor, resource). Per node we store:

* ``subtree_quota``: SQ (docs/scheduling.md#per-node-quantities);
* ``guaranteed``: G, the part of SQ never lent upward;
* ``usage``: U. For a CQ it is the authoritative ledger (what workloads hold);
  for a cohort it is derived from the children and maintained incrementally.

Formulas (docs/scheduling.md#per-node-quantities), with LA = local available = max(0, G - U)::

    G(n)      = max(0, SQ(n) - LL(n)) if LL(n) is set, else 0
    SQ(cq)    = N(cq)
    SQ(co)    = N(co) + sum over children c of (SQ(c) - G(c))
    U(co)     = sum over children c of max(0, U(c) - G(c))
    avail(root) = SQ - U
    avail(n)  = LA(n) + min(avail(parent), (SQ - G) - max(0, U - G) + BL)   # min only if BL set
    pot(root) = SQ;  pot(n) = min(G(n) + pot(parent), SQ(n) + BL(n))       # min only if BL set

Structure changes (set/delete of a CQ or cohort) rebuild every affected tree from
the leaves; usage changes (add/remove) are incremental (docs/scheduling.md#changing-usage) because
they happen on every admission. Trees containing a parent cycle (docs/scheduling.md#cohort-cycles)
are not evaluated: their cohorts hold no quantities and their CQs report nothing available, while
the CQ usage ledger is still kept so nothing is lost when the cycle is broken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from scheduler.core.cohort_forest import (
    EMPTY_QUOTAS,
    CohortForest,
    NodeKind,
    NodeRef,
    QuotaNode,
    ResourceQuota,
)
from scheduler.core.resources import FlavorResource

__all__ = ["NodeKind", "NodeRef", "QuotaTree", "ResourceQuota"]


def _guaranteed(
    subtree_quota: Mapping[FlavorResource, int], quotas: Mapping[FlavorResource, ResourceQuota]
) -> dict[FlavorResource, int]:
    # G exists only where a lending limit is set; elsewhere it is 0 (absent key).
    return {
        fr: max(0, subtree_quota.get(fr, 0) - q.lending_limit)
        for fr, q in quotas.items()
        if q.lending_limit is not None
    }


def _set_amount(target: dict[FlavorResource, int], fr: FlavorResource, value: int) -> None:
    # Zero entries are dropped so usage dicts stay as small as the live workload set.
    if value:
        target[fr] = value
    else:
        target.pop(fr, None)


class QuotaTree(CohortForest):
    """All ClusterQueues and Cohorts with their quotas and usage
    (docs/scheduling.md#hierarchical-quota)."""

    __slots__ = ("_gen_counter",)

    def __init__(self) -> None:
        super().__init__()
        # One counter for the whole tree: a CQ's generation only ever increases, even
        # across delete and re-create, so a stale flavor-scan record
        # (docs/scheduling.md#flavor-scan-resumption) can never match a new CQ of the same name.
        self._gen_counter = 0

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
            node = QuotaNode("cq", name)
            self._cqs[name] = node
        elif node.parent is not None:
            cohort_seeds.append(node.parent)
        before_cohorts, before_cqs = self._members(cohort_seeds)

        self._detach(node)
        node.quotas = new_quotas
        node.weight = weight
        node.subtree_quota = {fr: q.nominal for fr, q in new_quotas.items()}
        node.guaranteed = _guaranteed(node.subtree_quota, new_quotas)
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
            node = QuotaNode("cohort", name)
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
            node.quotas = EMPTY_QUOTAS
            node.weight = 1.0
        else:
            del self._cohorts[name]
        self._settle(before_cohorts, before_cqs)

    def _settle(self, cohort_seeds: Iterable[str], cq_seeds: Iterable[str]) -> None:
        """After a structural change: re-derive every tree that contains a seed (the
        seeds are the members of the affected trees before the change plus the changed
        nodes), then bump the generation of every CQ that was or is in them
        (docs/scheduling.md#changing-usage)."""
        self._structure_changed()
        bump = {name for name in cq_seeds if name in self._cqs}
        done: set[str] = set()
        for seed in sorted(cohort_seeds):
            if seed not in self._cohorts or seed in done:
                continue
            component = self._component(seed)
            done.update(component.cohorts)
            bump.update(component.cqs)
            if component.cyclic:
                self._mark_cyclic(component.cohorts, component.cqs)
            else:
                self._rebuild(component.top)
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
            node.subtree_quota, node.guaranteed, node.usage = {}, {}, {}
            node.height = 0
        for name in cqs:
            self._cqs[name].cyclic = True

    def _rebuild(self, top: str) -> None:
        """Recompute SQ, G, U and height of an acyclic tree from the leaves
        (docs/scheduling.md#per-node-quantities)."""
        order: list[QuotaNode] = []
        stack = [self._cohorts[top]]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(self._cohorts[c] for c in node.child_cohorts)
        # Pre-order reversed: every child is computed before its parent.
        for node in reversed(order):
            subtree = {fr: q.nominal for fr, q in node.quotas.items()}
            u: dict[FlavorResource, int] = {}
            height = 1 if node.has_children() else 0
            children: list[QuotaNode] = [self._cqs[c] for c in node.child_cqs]
            for c in node.child_cohorts:
                child = self._cohorts[c]
                children.append(child)
                height = max(height, 1 + child.height)
            for child in children:
                child.cyclic = False
                for fr, v in child.subtree_quota.items():
                    subtree[fr] = subtree.get(fr, 0) + v - child.guaranteed.get(fr, 0)
                for fr, v in child.usage.items():
                    over = v - child.guaranteed.get(fr, 0)
                    if over > 0:
                        u[fr] = u.get(fr, 0) + over
            node.subtree_quota = subtree
            node.guaranteed = _guaranteed(subtree, node.quotas)
            node.usage = u
            node.height = height
            node.cyclic = False

    def _bump(self, node: QuotaNode) -> None:
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

    def _add(self, node: QuotaNode, fr: FlavorResource, v: int) -> None:
        # A cyclic tree is not evaluated: only the CQ ledger moves.
        propagate = not node.cyclic
        while True:
            before = node.local_available(fr)
            _set_amount(node.usage, fr, node.usage.get(fr, 0) + v)
            if not propagate or node.parent is None or v <= before:
                return
            # Only what does not fit in the guaranteed part shows up in the parent.
            v -= before
            node = self._cohorts[node.parent]

    def _remove(self, node: QuotaNode, fr: FlavorResource, v: int) -> None:
        propagate = not node.cyclic
        while True:
            stored = node.usage.get(fr, 0) - node.guaranteed.get(fr, 0)
            _set_amount(node.usage, fr, node.usage.get(fr, 0) - v)
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

    @staticmethod
    def _available(chain: list[QuotaNode], fr: FlavorResource) -> int:
        root = chain[-1]
        value = root.subtree_quota.get(fr, 0) - root.usage.get(fr, 0)
        for cur in reversed(chain[:-1]):
            bl = cur.borrowing_limit(fr)
            if bl is not None:
                g = cur.guaranteed.get(fr, 0)
                lent_up = max(0, cur.usage.get(fr, 0) - g)
                value = min(value, cur.subtree_quota.get(fr, 0) - g - lent_up + bl)
            value = cur.local_available(fr) + value
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
        value = chain[-1].subtree_quota.get(fr, 0)
        for cur in reversed(chain[:-1]):
            value += cur.guaranteed.get(fr, 0)
            bl = cur.borrowing_limit(fr)
            if bl is not None:
                value = min(value, cur.subtree_quota.get(fr, 0) + bl)
        return value

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        q = self._cq(cq).quotas.get(fr)
        return 0 if q is None else q.nominal

    def usage(self, cq: str, fr: FlavorResource) -> int:
        return self._cq(cq).usage.get(fr, 0)

    def borrowing_limit(self, cq: str, fr: FlavorResource) -> int | None:
        return self._cq(cq).borrowing_limit(fr)

    def lending_limit(self, cq: str, fr: FlavorResource) -> int | None:
        q = self._cq(cq).quotas.get(fr)
        return None if q is None else q.lending_limit

    def subtree_quota(self, node: NodeRef, fr: FlavorResource) -> int:
        """SQ(n, fr)."""
        return self._node(node).subtree_quota.get(fr, 0)

    def subtree_quotas(self, node: NodeRef) -> dict[FlavorResource, int]:
        """SQ(n) for every FR present in the node's subtree (a copy)."""
        return dict(self._node(node).subtree_quota)

    def node_usage(self, node: NodeRef, fr: FlavorResource) -> int:
        """U(n, fr) of a CQ or cohort."""
        return self._node(node).usage.get(fr, 0)

    def node_usages(self, node: NodeRef) -> dict[FlavorResource, int]:
        """U(n) of every FR with non-zero usage (a copy)."""
        return dict(self._node(node).usage)

    def guaranteed(self, node: NodeRef, fr: FlavorResource) -> int:
        """G(n, fr)."""
        return self._node(node).guaranteed.get(fr, 0)

    def local_available(self, node: NodeRef, fr: FlavorResource) -> int:
        """LA(n, fr) = max(0, G - U)."""
        return self._node(node).local_available(fr)

    # ------------------------------------------------------------------ predicates

    def borrows(self, node: NodeRef, fr: FlavorResource, value: int) -> bool:
        """docs/scheduling.md#quota-predicates: U + value > SQ (for a CQ SQ is its nominal)."""
        n = self._node(node)
        return n.usage.get(fr, 0) + value > n.subtree_quota.get(fr, 0)

    def within_nominal(self, node: NodeRef, frs: Iterable[FlavorResource]) -> bool:
        """docs/scheduling.md#quota-predicates: U <= SQ for every given FR."""
        n = self._node(node)
        return all(n.usage.get(fr, 0) <= n.subtree_quota.get(fr, 0) for fr in frs)

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
            if n.usage.get(fr, 0) + value > n.subtree_quota.get(fr, 0):
                fits = False
            remaining[fr] = max(0, value - n.local_available(fr))
        return fits, remaining

    def borrowing_level(self, cq: str, fr: FlavorResource, value: int) -> tuple[int, bool]:
        """docs/scheduling.md#quota-predicates: (borrowing level, mayReclaimInHierarchy) of a
        request on a CQ.

        (0, False) in a cyclic tree, where no level is meaningful.
        """
        node = self._cq(cq)
        if node.cyclic:
            return 0, False
        if node.parent is None or node.usage.get(fr, 0) + value <= node.subtree_quota.get(fr, 0):
            return 0, node.parent is not None
        rem = value - node.local_available(fr)
        anc = self._cohorts[node.parent]
        while True:
            if anc.usage.get(fr, 0) + rem <= anc.subtree_quota.get(fr, 0):
                return anc.height, anc.parent is not None
            if anc.parent is None:
                return anc.height, False
            rem -= anc.local_available(fr)
            anc = self._cohorts[anc.parent]

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
            out.update(n.usage)
        for n in self._cohorts.values():
            out.update(n.quotas)
        return out

    def clone(self) -> QuotaTree:
        """An independent deep copy (the cycle snapshot, docs/scheduling.md#cycle-snapshot)."""
        other = QuotaTree()
        self._copy_into(other)
        other._gen_counter = self._gen_counter
        return other

"""Value hierarchies for extended p-sensitive k-anonymity (Campan & Truta).

A confidential attribute may carry a value hierarchy (a tree whose leaves are the data values)
in which some nodes are *protected*: an intruder must not learn that a person's value lies under
a protected node. Two values below the same protected node therefore give no diversity.

The paper reduces extended p-sensitive k-anonymity to the basic property in two steps:

1. replace every value by its *strong ancestor*: the protected ancestor-or-self closest to the
   root when the value has one, the value itself otherwise;
2. require (and produce) basic p-sensitive k-anonymity on the replaced attribute.

The released table keeps the original values; only the grouping uses the strong ancestors.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from locpriv.errors import ConfigError


@dataclass
class Hierarchy:
    """A tree given as child -> parent; the root has no entry. ``protected`` lists nodes."""

    parent: Mapping[Hashable, Hashable]
    protected: frozenset[Hashable] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for node in self.protected:
            if node not in self.parent and node not in set(self.parent.values()):
                raise ConfigError(f"protected node {node!r} is not in the hierarchy")
        for start in self.parent:  # reject cycles
            seen = {start}
            node = start
            while node in self.parent:
                node = self.parent[node]
                if node in seen:
                    raise ConfigError(f"hierarchy has a cycle through {node!r}")
                seen.add(node)

    def ancestors(self, value: Hashable) -> list[Hashable]:
        """``value`` and its ancestors, from the value up to the root."""
        out = [value]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out

    def strong_ancestor(self, value: Hashable) -> Hashable:
        """The protected ancestor-or-self nearest the root, or ``value`` if none is protected."""
        chain = self.ancestors(value)
        prot = [a for a in chain if a in self.protected]
        return prot[-1] if prot else value

    def reduce(self, values: Iterable[Hashable]) -> list[Hashable]:
        """Step 1 of the reduction: every value replaced by its strong ancestor."""
        return [self.strong_ancestor(v) for v in values]

    @classmethod
    def from_edges(
        cls, edges: Iterable[tuple[Hashable, Hashable]], protected: Iterable[Hashable] = ()
    ) -> Hierarchy:
        """Build from ``(parent, child)`` pairs."""
        parent: dict[Hashable, Hashable] = {}
        for par, child in edges:
            if child in parent and parent[child] != par:
                raise ConfigError(f"node {child!r} has two parents")
            parent[child] = par
        return cls(parent=parent, protected=frozenset(protected))

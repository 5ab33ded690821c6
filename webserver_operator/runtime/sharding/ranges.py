"""Which shard a namespace belongs to: the API server's own hash cut into equal ranges, and the selector for one.

Why here, pure: a sharded operator must agree with the kube-apiserver (``ShardedListAndWatch``, KEP-5866, alpha in
Kubernetes 1.36) on every object's shard, or a replica would miss objects the server sent it or keep ones another
replica owns. The server hashes ``object.metadata.namespace`` with 64-bit FNV-1a (``k8s.io/apimachinery/pkg/sharding``
``HashField``: Go's ``hash/fnv`` over the string's UTF-8 bytes) and keeps an object when ``start <= hash < end``
(``shardRange``'s start is inclusive, its end exclusive). The same function decides on the client side where the
server ignores the parameter (gate off, older server), so both paths put every namespace in the same shard. The
namespace is the key because a WebServer's children live in its namespace: a WebServer and its Deployment and
Service always land in the same shard (docs/scaling.md).

FNV-1a is the three-line loop of its specification (offset basis, then xor and multiply per byte); no package was
taken for it: the ones on PyPI are the same loop with less testing, and the vectors in the tests come from Go's
``hash/fnv``, the implementation the server runs.

``shard_ranges(S)`` cuts ``[0, 2**64)`` into S ranges whose sizes differ by at most one (exactly equal when S is a
power of two); ``shard_ranges(1)`` is one range covering everything, whose ``selector`` is ``None``: one shard means
today's unsharded behaviour, with no parameter sent at all. The selector string is written exactly as the server
writes it back in ``metadata.shardInfo.selector`` (lowercase ``0x`` + 16 hex digits, the top end ``0x1`` + 16 zeros),
so a client can compare the echo with what it sent.

A replica holding several shards watches them with one list+watch per resource, not one per shard (with the gate
off every unfiltered watch would bring each event once per held shard): ``ShardUnion`` is the set of shards it holds,
tested on the client side by shard index and sent as the union of their ranges, adjacent ones merged, joined with
`` || `` (the only operator kube-apiserver v1.36.3's selector parser allows next to ``shardRange``; it echoes the
selector in the order given, ``k8s.io/apimachinery/pkg/sharding`` ``shardSelector.String``).

Used by ``runtime.informers.informer`` and ``runtime.sharding.filter`` (selector on list and watch, the client-side
test) and ``runtime.sharding.cache`` (the union of the held shards). Hands on plain ints, strings, ``ShardRange`` and
``ShardUnion`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "HASH_SPACE",
    "SHARD_FIELD",
    "SHARD_SELECTOR_PARAM",
    "ShardRange",
    "ShardUnion",
    "fnv1a_64",
    "namespace_hash",
    "shard_index",
    "shard_of",
    "shard_ranges",
]

#: The size of the hash space: hashes are in ``[0, HASH_SPACE)``.
HASH_SPACE = 1 << 64
#: The field the shards are keyed on, as the server's ``shardRange`` names it (``object.metadata.uid`` is the other
#: one it supports; names are refused).
SHARD_FIELD = "object.metadata.namespace"
#: The list and watch query parameter that carries the selector.
SHARD_SELECTOR_PARAM = "shardSelector"

_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_MASK64 = HASH_SPACE - 1


def fnv1a_64(data: bytes) -> int:
    """64-bit FNV-1a of ``data`` (Go's ``hash/fnv.New64a``)."""
    value = _FNV64_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV64_PRIME) & _MASK64
    return value


@lru_cache(maxsize=65536)
def namespace_hash(namespace: str) -> int:
    """The hash the API server computes for an object in ``namespace`` (``""`` for cluster-scoped objects).

    Cached: an informer asks once per event, and a cluster has far fewer namespaces than events.
    """
    return fnv1a_64(namespace.encode("utf-8"))


def _hex_bound(value: int) -> str:
    """A range bound as the server parses and echoes it: 16 lowercase hex digits, 17 only for ``2**64``."""
    return f"0x{value:016x}"


@dataclass(frozen=True, slots=True)
class ShardRange:
    """Shard ``index`` of ``count``: the hashes ``start <= h < end``."""

    index: int
    count: int
    start: int
    end: int

    @property
    def everything(self) -> bool:
        """True when the range covers the whole hash space (``--shards 1``): nothing to filter, nothing to send."""
        return self.start == 0 and self.end == HASH_SPACE

    def contains_hash(self, value: int) -> bool:
        return self.start <= value < self.end

    def contains(self, namespace: str) -> bool:
        """True when objects of ``namespace`` belong to this shard."""
        return self.everything or self.start <= namespace_hash(namespace) < self.end

    @property
    def selector(self) -> str | None:
        """The ``shardSelector`` value for this range, exactly as the server echoes it; ``None`` for everything."""
        if self.everything:
            return None
        return f"shardRange({SHARD_FIELD}, '{_hex_bound(self.start)}', '{_hex_bound(self.end)}')"

    def __str__(self) -> str:
        return f"shard {self.index}/{self.count} [{_hex_bound(self.start)}, {_hex_bound(self.end)})"


@lru_cache(maxsize=64)
def shard_ranges(count: int) -> tuple[ShardRange, ...]:
    """``count`` contiguous ranges covering ``[0, 2**64)``, in order, sizes differing by at most one.

    Range ``i`` starts at ``ceil(i * 2**64 / count)``, so ``shard_index`` is a single multiply and shift.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"the number of shards must be a whole number of at least 1, not {count!r}")
    if count > HASH_SPACE:
        raise ValueError(f"the number of shards must be at most 2**64, not {count}")
    starts = [-(-i * HASH_SPACE // count) for i in range(count)] + [HASH_SPACE]
    return tuple(ShardRange(index=i, count=count, start=starts[i], end=starts[i + 1]) for i in range(count))


def shard_index(namespace: str, count: int) -> int:
    """The index of the shard (of ``count``) that objects in ``namespace`` belong to.

    With range ``i`` starting at ``ceil(i * 2**64 / count)``, an integer ``h`` is in range ``i`` exactly when
    ``i <= h * count / 2**64 < i + 1``: the index is ``floor(h * count / 2**64)``.
    """
    shard_ranges(count)  # validates count
    return (namespace_hash(namespace) * count) >> 64


def shard_of(namespace: str, count: int) -> ShardRange:
    """The range (of ``count``) that objects in ``namespace`` belong to."""
    return shard_ranges(count)[shard_index(namespace, count)]


@dataclass(frozen=True, slots=True)
class ShardUnion:
    """Some of ``count`` shards (``indexes``, never empty): what one replica's informers keep and ask for."""

    count: int
    indexes: frozenset[int]

    def __post_init__(self) -> None:
        ranges = shard_ranges(self.count)  # validates count
        if not self.indexes:
            raise ValueError("a union of shards needs at least one shard: with none held nothing is watched")
        if not all(0 <= index < len(ranges) for index in self.indexes):
            raise ValueError(f"shard indexes {sorted(self.indexes)} are not all below the shard count {self.count}")

    @classmethod
    def of(cls, shard: ShardRange) -> ShardUnion:
        """The union of one range."""
        return cls(shard.count, frozenset({shard.index}))

    @property
    def everything(self) -> bool:
        """True when every shard is in the union: nothing to filter, nothing to send."""
        return len(self.indexes) == self.count

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """The union as ``[start, end)`` hash spans, in order, adjacent shards merged into one span."""
        ranges = shard_ranges(self.count)
        spans: list[tuple[int, int]] = []
        for index in sorted(self.indexes):
            start, end = ranges[index].start, ranges[index].end
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        return tuple(spans)

    def contains(self, namespace: str) -> bool:
        """True when objects of ``namespace`` belong to one of the shards."""
        return self.everything or shard_index(namespace, self.count) in self.indexes

    def covers(self, other: ShardUnion) -> bool:
        """True when every namespace of ``other`` is in this union (``other`` adds nothing to watch)."""
        return self.count == other.count and other.indexes <= self.indexes

    @property
    def selector(self) -> str | None:
        """The ``shardSelector`` value, exactly as the server echoes it; ``None`` when every shard is in."""
        if self.everything:
            return None
        return " || ".join(
            f"shardRange({SHARD_FIELD}, '{_hex_bound(start)}', '{_hex_bound(end)}')" for start, end in self.spans
        )

    def __str__(self) -> str:
        if len(self.indexes) == 1:
            return str(shard_ranges(self.count)[next(iter(self.indexes))])
        bounds = " ".join(f"[{_hex_bound(start)}, {_hex_bound(end)})" for start, end in self.spans)
        return f"shards {','.join(map(str, sorted(self.indexes)))}/{self.count} {bounds}"

"""The shards as the chaos harness sees them: which shard a namespace is in, namespace names spread over the shards.

Why the harness computes the shard itself instead of importing the operator's ``runtime.sharding.ranges``: the sharded
verdicts (``shardverdicts``) decide from the namespace of every audited write which shard's Lease had to cover it. Were
that decision the operator's own function, an operator that put a namespace in the wrong shard would be judged by its
own mistake and pass. The definition is the API server's (``ShardedListAndWatch``, KEP-5866): the 64-bit FNV-1a hash of
``metadata.namespace`` (Go's ``hash/fnv``), cut into ``count`` equal ranges, range ``i`` starting at ``ceil(i * 2**64 /
count)``, so shard ``i`` holds exactly the hashes with ``floor(h * count / 2**64) == i``.
``tests/unit/chaos/test_shardverdicts.py`` checks that both agree on many names.

Why random namespace names: FNV-1a has no final mixing step, so names that differ only in their last characters
(``team-0`` ... ``team-39``) fall into a few shards (docs/scaling.md measures it). ``spread_namespaces`` draws random
names and keeps each only while its shard has fewer than its even share, so every shard gets WebServers and none gets
more than one namespace above another.

Used by ``harness`` (the run's namespaces) and ``shardfaults`` (the shard of each write); pure.
"""

from __future__ import annotations

import random
import string

HASH_SPACE = 1 << 64
_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3


def fnv1a_64(data: bytes) -> int:
    value = _FNV64_OFFSET
    for byte in data:
        value = ((value ^ byte) * _FNV64_PRIME) % HASH_SPACE
    return value


def shard_of(namespace: str, count: int) -> int:
    """The shard (of ``count``) whose Lease covers the objects of ``namespace``."""
    if count < 1:
        raise ValueError(f"the number of shards must be at least 1, not {count}")
    return (fnv1a_64(namespace.encode("utf-8")) * count) >> 64


def spread_namespaces(prefix: str, count: int, shards: int, rng: random.Random) -> list[str]:
    """``count`` random names ``<prefix>-<8 random letters and digits>``, each shard's share within one of the others.

    Each shard ends with ``count // shards`` names or one more (at most ``count % shards`` shards get the one more):
    a drawn name is kept only while its shard is below that.
    """
    if count < shards:
        raise ValueError(f"{count} namespaces cannot cover {shards} shards: use at least {shards} namespaces")
    base, extra = divmod(count, shards)
    taken = [0] * shards
    names: list[str] = []
    alphabet = string.ascii_lowercase + string.digits
    for _ in range(count * 10_000):
        if len(names) == count:
            break
        name = f"{prefix}-{''.join(rng.choices(alphabet, k=8))}"
        shard = shard_of(name, shards)
        above = sum(1 for n in taken if n > base)  # shards already holding base + 1: at most ``extra`` may
        if name not in names and (taken[shard] < base or (taken[shard] == base and above < extra)):
            taken[shard] += 1
            names.append(name)
    if len(names) < count or min(taken) == 0:
        raise RuntimeError(f"could not spread {count} namespaces over {shards} shards (got {taken})")
    return names

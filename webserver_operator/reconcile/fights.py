"""Two controllers fighting over a child: noticed from the operator's own drift repairs, named from managedFields.

Why: the operator enforces the fields it owns, so something else that keeps writing one of them (a
HorizontalPodAutoscaler aimed at the Deployment, a script that scales it, a mutating webhook) is reverted each round,
forever, and nobody is told: the Deployment's replicas flip, the pods come and go. One repair is normal (someone ran
``kubectl scale deployment``); ``FIGHT_REPAIRS`` repairs of the same child within ``FIGHT_WINDOW`` seconds are a fight.
The WebServer then says so in its Ready condition and a Warning, naming the field and the last writer, read from the
child's ``managedFields`` (the informer cache drops them, so the reconciler reads the child once before the repair
that crosses the line: a fight costs one GET, a quiet cluster nothing).

Pure: ``FightLog`` keeps the repair times per child in its WebServer's ``reconcile.memory`` record (forgotten with
it), ``last_writer`` reads managedFields. Used by ``reconcile.children``; hands on the ``Fight`` to report.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from webserver_operator.reconcile.memory import Memory, RepairHistory

__all__ = ["FIGHT_REPAIRS", "FIGHT_WINDOW", "Fight", "FightLog", "last_writer"]

FIGHT_REPAIRS: Final = 4
"""Drift repairs of one child within ``FIGHT_WINDOW`` that make a fight."""
FIGHT_WINDOW: Final = 600.0
"""Seconds over which repairs are counted; a fight is over once its repairs are older than this."""

_PATH_PART = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


@dataclass(frozen=True)
class Fight:
    """A child repaired ``repairs`` times within the window; ``fields`` last reverted, ``writer`` who set them."""

    kind: str
    name: str
    repairs: int
    fields: tuple[str, ...]
    writer: str | None

    @property
    def message(self) -> str:
        who = f"last written by {self.writer}" if self.writer else "by a writer managedFields does not name"
        return (
            f"another controller is fighting the operator over {self.kind} {self.name}: "
            f"{', '.join(self.fields)} changed back at least {FIGHT_REPAIRS} times in {FIGHT_WINDOW / 60:.0f} minutes, "
            f"{who}. The operator owns these fields and keeps reverting them: stop the other writer, or make the "
            "change through the WebServer (kubectl scale webserver/NAME; point a HorizontalPodAutoscaler at the "
            "WebServer, not at its Deployment)"
        )


class FightLog:
    """Drift repairs per child over the last ``FIGHT_WINDOW`` seconds of ``clock``.

    Kept in the WebServer's record of ``memory`` (the reconciler's, so forgetting a WebServer forgets its children's
    repairs; a private one when not given). A child is (namespace, WebServer name, kind).
    """

    def __init__(self, clock: Callable[[], float], memory: Memory | None = None) -> None:
        self._clock = clock
        self._memory = memory if memory is not None else Memory()

    def next_repair_is_a_fight(self, child: tuple[str, str, str]) -> bool:
        """Whether one more repair of ``child`` (namespace, name, kind) would make a fight."""
        return self._recent(child) + 1 >= FIGHT_REPAIRS

    def repaired(self, child: tuple[str, str, str], fields: Sequence[str], writer: str | None) -> None:
        """Record a drift repair of ``fields``; ``writer`` (when read) is who last wrote them."""
        record = self._memory.of(child[:2])
        repairs = record.repairs if record.repairs is not None else {}
        record.repairs = repairs
        history = repairs.setdefault(child[2], RepairHistory(deque()))
        history.times.append(self._clock())
        history.fields = tuple(fields)
        history.writer = writer or history.writer
        self._recent(child)

    def ongoing(self, child: tuple[str, str, str]) -> Fight | None:
        """The fight over ``child`` while its repairs within the window reach ``FIGHT_REPAIRS``."""
        repairs = self._recent(child)
        history = self._history(child)
        if repairs < FIGHT_REPAIRS or history is None:
            return None
        return Fight(kind=child[2], name=child[1], repairs=repairs, fields=history.fields, writer=history.writer)

    def _history(self, child: tuple[str, str, str]) -> RepairHistory | None:
        record = self._memory.get(child[:2])
        repairs = record.repairs if record is not None else None
        return repairs.get(child[2]) if repairs is not None else None

    def _recent(self, child: tuple[str, str, str]) -> int:
        history = self._history(child)
        if history is None:
            return 0
        horizon = self._clock() - FIGHT_WINDOW
        while history.times and history.times[0] < horizon:
            history.times.popleft()
        if not history.times:
            record = self._memory.get(child[:2])
            if record is not None and record.repairs is not None:
                record.repairs.pop(child[2], None)
                if not record.repairs:
                    record.repairs = None
            return 0
        return len(history.times)


def last_writer(obj: Mapping[str, Any], fields: Sequence[str], *, ignore: str) -> str | None:
    """Who, other than ``ignore``, last wrote one of ``fields`` of ``obj``, from its ``managedFields``.

    ``fields`` are the operator's field paths (``spec.replicas``, ``spec.template.spec.containers[web].image``).
    The owner of the deepest matching path wins; entries are tried newest first. Returns ``"kubectl" (Update,
    subresource scale)``-style text, or None when no other manager owns any of the fields.
    """
    entries = [
        entry
        for entry in (obj.get("metadata") or {}).get("managedFields") or ()
        if isinstance(entry, Mapping) and entry.get("manager") != ignore
    ]
    entries.sort(key=lambda entry: str(entry.get("time") or ""), reverse=True)
    for path in fields:
        parts = [m.group(1) if m.group(1) is not None else m.group(2) for m in _PATH_PART.finditer(path)]
        for entry in entries:
            if _owns(entry.get("fieldsV1") or {}, parts):
                return _describe(entry)
    return None


def _owns(fields: Mapping[str, Any], parts: Sequence[str]) -> bool:
    """Whether the fieldsV1 set ``fields`` holds the path ``parts`` (a field key, or a list entry by its name)."""
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    return any(_owns(child, rest) for child in _children(fields, head))


def _children(fields: Mapping[str, Any], part: str) -> Iterator[Mapping[str, Any]]:
    child = fields.get(f"f:{part}")
    if isinstance(child, Mapping):
        yield child
    for key, value in fields.items():
        if key.startswith("k:") and isinstance(value, Mapping):
            try:
                entry = json.loads(key[2:])
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("name") == part:
                yield value


def _describe(entry: Mapping[str, Any]) -> str:
    details = [str(entry.get("operation") or "Update")]
    if entry.get("subresource"):
        details.append(f"subresource {entry['subresource']}")
    if entry.get("time"):
        details.append(f"at {entry['time']}")
    return f'"{entry.get("manager")}" ({", ".join(details)})'

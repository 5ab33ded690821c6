"""The README's sections and shell blocks, as tests read them: the commands a user would copy, joined and stripped.

Why one parser: several suites run README commands (the Helm install on the local control plane, the quickstart on
kind) or check them (no public image, timeouts on every wait); they must agree on what a "command in the README" is.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def section(title: str, text: str | None = None) -> str:
    """The body of the README section headed ``title`` (any level), up to the next heading of the same level."""
    text = README.read_text() if text is None else text
    match = re.search(rf"^(#+) {re.escape(title)}\n", text, flags=re.MULTILINE)
    assert match, f"README has no section {title!r}"
    level = match[1]
    rest = text[match.end() :]
    end = re.search(rf"^{level} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def sh_blocks(text: str) -> list[list[str]]:
    """The ```sh blocks of ``text``, each as its commands: continuation lines joined, comments and blanks dropped."""
    blocks = []
    for body in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        joined = body.replace("\\\n", " ")
        commands = []
        for line in joined.splitlines():
            command = line.split(" # ", 1)[0].strip()
            if command and not command.startswith("#"):
                commands.append(re.sub(r"\s+", " ", command))
        blocks.append(commands)
    return blocks


def first_screen_blocks(text: str | None = None) -> tuple[list[str], list[str]]:
    """The two blocks before the first section, returned as (install, contributor): the README starts with the
    contributor's `make demo` and `make test`, then installs a release and reaches the sample's page."""
    text = README.read_text() if text is None else text
    blocks = sh_blocks(text[: text.index("\n## ")])
    assert len(blocks) == 2, (
        f"the first screen should have a contributor block and an install block, found {len(blocks)}"
    )
    return blocks[1], blocks[0]


def quickstart_blocks() -> tuple[list[str], list[str]]:
    """The quickstart's two blocks: on kind (image loaded into the nodes), and through a registry."""
    blocks = sh_blocks(section("Quickstart: on your cluster"))
    assert len(blocks) == 2, f"the quickstart should have a kind block and a registry block, found {len(blocks)}"
    return blocks[0], blocks[1]

"""The README's command-line examples, as pasted, on the embedded model.

Every ``react-engine`` line of the README's ``bash`` blocks runs, and so does every line of
a docs block marked ``<!-- test: run on the embedded model -->`` (docs/cli.md's first). Each
runs in a shell (pipes and redirections as written), ``react-engine`` being this Python's
``-m react_engine``, with no endpoint in the environment, so ``--local`` and ``demo`` start
the real llama.cpp server.

An example must exit 0. One that makes the first step call a tool (``demo``, or
``--tool-choice required``) must also answer with what the tool returned: the temperature
or the condition ``get_weather`` gives for the city it asks about, which the model cannot
know otherwise. The other examples are not judged on
their answer: the docs say plainly that a 135M model free to answer from memory may be
wrong.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from react_engine.cli.run import DEMO_QUESTION
from react_engine.testing.tools import WEATHER

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- test: run on the embedded model -->"


def bash_blocks(page: Path) -> list[tuple[str, str]]:
    """Each ``bash`` block of a page with the line above its fence."""
    text = page.read_text(encoding="utf-8")
    return [
        (m["above"].strip(), m["body"])
        for m in re.finditer(r"(?P<above>[^\n]*)\n```bash\n(?P<body>.*?)^```", text, re.M | re.S)
    ]


def commands(body: str) -> list[str]:
    """The block's command lines, continuation lines joined; those that run react-engine."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [
        line.strip() for line in joined.splitlines() if re.search(r"(^|\| )react-engine ", line)
    ]


def examples() -> list[str]:
    found = [c for _, body in bash_blocks(ROOT / "README.md") for c in commands(body)]
    for page in sorted((ROOT / "docs").rglob("*.md")):
        found += [c for above, body in bash_blocks(page) if above == MARK for c in commands(body)]
    return found


EXAMPLES = examples()


def forced(command: str) -> bool:
    """Whether the example makes the first step call a tool."""
    return command.startswith("react-engine demo") or "--tool-choice required" in command


def tool_said(command: str) -> tuple[str, str]:
    """What get_weather returns for the city the example asks about: its temperature and
    its condition."""
    asked = DEMO_QUESTION if command.startswith("react-engine demo") else command
    (city,) = [w for w in WEATHER.values() if re.search(rf"\b{w['city']}\b", asked)]
    return str(city["temperature_c"]), str(city["condition"])


def test_the_examples_are_found() -> None:
    assert any(c.startswith("react-engine demo") for c in EXAMPLES)
    assert sum(1 for c in EXAMPLES if forced(c) and "run" in c.split()[:2]) >= 2
    assert all("--local" in c or c.startswith("react-engine demo") for c in EXAMPLES), EXAMPLES


@pytest.mark.parametrize("command", EXAMPLES)
def test_a_command_line_example_answers_on_the_embedded_model(
    command: str,
    local_model_path: Path,  # skips (or fails under make test) without the local extra
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REACT_ENGINE_"))}
    env["REACT_ENGINE_STORE"] = str(tmp_path / "store.db")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    if "REACT_ENGINE_REQUIRE_ALL" in os.environ:
        env["REACT_ENGINE_REQUIRE_ALL"] = os.environ["REACT_ENGINE_REQUIRE_ALL"]
    me = f"{shlex.quote(sys.executable)} -m react_engine "
    script = re.sub(r"(^|\| )react-engine ", lambda m: m[1] + me, command)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    if not forced(command):
        return
    redirected = re.search(r"> (\S+)\s*$", command)
    answer = (tmp_path / redirected[1]).read_text() if redirected else done.stdout
    assert answer.strip(), f"{command}: no answer\n{done.stderr[-3000:]}"
    said = tool_said(command)
    assert any(re.search(rf"\b{re.escape(value)}\b", answer, re.I) for value in said), (
        f"{command}: the answer carries none of get_weather's {said}: {answer!r}"
    )

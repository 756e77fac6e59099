"""Every ```python block of README.md and of the pages under docs/ runs, as a reader would
paste it.

The blocks are found and run with ``pytest-examples`` (the tool pydantic runs its docs
with): each one alone, as the ``__main__`` module of a file of its own, so a block that
leans on a name from an earlier one fails here. The model is the shipped loopback server
(:class:`~react_engine.testing.ScriptedServer`), reached through ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY`` as the docs say, with replies scripted for each block in
:data:`SCRIPTS`, keyed by the page and the heading above the block
(``"docs/streaming.md:streaming"``); the conftest's socket guard fails a block that reaches
past loopback. Every scripted reply must be asked for, so a block that stops calling the
model fails too.

Three kinds of block get a little more:

* A block whose fence names a file (```` ```python title="files_server.py" ````) is that
  file, as the reader saves it: it is written to the working directory of the next block,
  which runs it (the MCP server that block's agent starts).
* Lines ``#> ...`` under a ``print`` are its output: such a block is run with
  ``run_print_check``, which fails when a print says anything else.
* The embedded model blocks get, for ``local_server()``, a stand-in that yields the
  scripted server's address; tests/e2e/test_readme_local.py runs the README's against the
  real model.

A block that cannot run on its own (a sketch with its bodies left out) says so on the line
above its fence, ``<!-- test: skip, WHY -->``, which the rendered page does not show; such
blocks are few, and each says why.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_examples.run_code
from pytest_examples import CodeExample, EvalExample, find_examples

import react_engine.local
from react_engine.local import LocalEndpoint
from react_engine.parsing import repairs
from react_engine.parsing.salvage import FORMATS
from react_engine.protocols import registry
from react_engine.store import backends
from react_engine.testing import ScriptedServer, completion, tool_calls_completion

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLES = [example for page in PAGES for example in find_examples(page)]
SKIP = re.compile(r"^<!-- test: skip, (?P<why>\S.*\S) -->$")
MAX_SKIPPED = 5
"""Blocks that cannot run are the exception: more than this many is a docs problem."""


def page_of(example: CodeExample) -> str:
    """``"README.md"``, ``"docs/streaming.md"``: where the block is, from the repository."""
    return example.path.relative_to(ROOT).as_posix()


def heading_of(example: CodeExample) -> str:
    """The slug of the last heading above a block: ``"quickstart"``, ``"streaming"``..."""
    above = example.path.read_text(encoding="utf-8").splitlines()[: example.start_line]
    in_fence = False
    title = "top"
    for line in above:
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            title = line.lstrip("#").strip()
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def skipped_because(example: CodeExample) -> str | None:
    """Why a block is not run: the ``<!-- test: skip, WHY -->`` line above its fence."""
    lines = example.path.read_text(encoding="utf-8").splitlines()
    fence = example.start_line - 1  # the 0-based index of the opening fence's line
    if fence >= 1 and (marked := SKIP.match(lines[fence - 1].strip())):
        return marked["why"]
    return None


def block_ids() -> list[str]:
    """``page:heading`` for a section's first block, ``page:heading-#2`` for its second..."""
    ids: list[str] = []
    for example in EXAMPLES:
        base = f"{page_of(example)}:{heading_of(example)}"
        n = sum(1 for i in ids if i == base or i.startswith(f"{base}-#"))
        ids.append(base if n == 0 else f"{base}-#{n + 1}")
    return ids


IDS = block_ids()


@dataclass
class Scenario:
    """What the model answers one block, and what the block must show for it."""

    replies: list[Any] = field(default_factory=list)
    printed: tuple[str, ...] = ()
    """Text the block's output must hold (the scripted answer, typically)."""
    files: dict[str, str] = field(default_factory=dict)
    """Files the block expects in its working directory (a reader's own data)."""
    check: Callable[[ScriptedServer], None] | None = None
    """More to assert on what the server was asked."""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return tool_calls_completion((name, arguments))


def answer(text: str) -> dict[str, Any]:
    return completion(text)


def _saw_file_contents(server: ScriptedServer) -> None:
    """The MCP server really ran: the file it read reached the model as an observation."""
    sent = repr(server.requests[-1]["messages"])
    assert "Beijing in May: pack an umbrella" in sent
    assert "notes/trip.md" in sent  # list_files' result


def _first_step_forced_then_answer_without_tools(server: ScriptedServer) -> None:
    """What the quick start's comment promises: a call first, then an answer, no tools."""
    first, last = server.requests
    assert first["tool_choice"] == "required" and first["temperature"] == 0
    assert "tools" not in last or last.get("tool_choice") == "none"


SCRIPTS: dict[str, Scenario] = {
    # In-process models and settings: no request to the server.
    "docs/reports.md:html-reports-a-run-a-comparison-an-evaluation-on-one-page": Scenario(),
    "docs/capability-cache.md:turning-it-off-or-keeping-it-elsewhere": Scenario(),
    "docs/extending.md:a-run-store-backend": Scenario(),
    "docs/extending.md:a-native-tool-call-format": Scenario(),
    "docs/extending-protocols.md:the-worked-example-slash": Scenario(),
    # The README's quick start: the first step must call the tool, then the answer.
    "README.md:quick-start": Scenario(
        [call("get_weather", city="Paris"), answer("Overcast in Paris, 14°C.")],
        printed=(
            "Overcast in Paris, 14°C.",
            'get_weather {\'city\': \'Paris\'} {"city":"Paris","condition":"overcast"',
        ),
        check=_first_step_forced_then_answer_without_tools,
    ),
    "docs/local-model.md:the-embedded-local-model": Scenario(
        [answer("Hello!")], printed=("Hello!",)
    ),
    # Building agents makes no request.
    "docs/endpoints.md:connecting-to-an-endpoint": Scenario(),
    "docs/quickstart.md:quickstart": Scenario(
        [
            tool_calls_completion(
                ("get_weather", {"location": "Beijing"}), ("get_weather", {"location": "Guangzhou"})
            ),
            answer("Beijing: sunny, 24°C. Guangzhou: sunny, 24°C."),
            answer("Paris: sunny, 24°C."),
            call("get_weather", location="Beijing"),
            answer("Sunny in Beijing."),
            answer("No umbrella needed: it is sunny."),
        ],
        printed=("RunResult(answer='Beijing: sunny, 24°C.", "No umbrella needed"),
    ),
    "docs/quickstart.md:quickstart-#2": Scenario(
        [call("get_weather", location="Paris"), answer("It is overcast in Paris, 14°C.")],
        printed=("It is overcast in Paris, 14°C.",),
    ),
    "docs/streaming.md:streaming": Scenario(
        [
            call("get_weather", location="Paris"),
            answer("Overcast, 14°C."),
            call("get_weather", location="Paris"),
            answer("Still overcast, 14°C."),
        ],
        printed=("→ ['get_weather']", "Overcast, 14°C.", "\nStill overcast, 14°C."),
    ),
    "docs/tracing.md:tracing-opentelemetry": Scenario(
        [call("get_weather", location="Paris"), answer("Overcast, 14°C.")],
        printed=(
            "['chat gpt-4o-mini', 'execute_tool get_weather', 'chat gpt-4o-mini', 'invoke_agent']",
        ),
    ),
    "docs/typed-answers.md:typed-final-answers": Scenario(
        [
            call("get_weather", location="Beijing"),
            call("final_result", city="Beijing", temperature_c=24),
            call("final_result", response=[24, 14]),
        ],
        printed=("city='Beijing' temperature_c=24",),
    ),
    "docs/mcp.md:tools-from-mcp-servers-#2": Scenario(
        [
            call("fs_list_files", folder="notes"),
            call("fs_read_file", path="notes/trip.md"),
            call("get_weather", location="Beijing"),
            answer("notes/trip.md mentions Beijing, where it is sunny and 24°C."),
        ],
        printed=("notes/trip.md mentions Beijing",),
        files={"notes/trip.md": "Beijing in May: pack an umbrella.\n"},
        check=_saw_file_contents,
    ),
    "docs/sessions.md:sessions-and-durable-runs": Scenario(
        [
            call("get_weather", location="Paris"),
            answer("Overcast, 14°C."),
            call("get_weather", location="Beijing"),
            answer("Sunny, 24°C."),
            # resume() of the finished run asks for nothing.
            call("send_email", to="bob@example.com", body="The report is ready."),
            answer("Sent."),
        ],  # the block's #> lines are its printed output
    ),
    # In process, without a server.
    "docs/parser.md:the-parser-on-its-own": Scenario(),
    "docs/testing.md:testing-an-agent-without-a-model": Scenario(),
}


def is_file(example: CodeExample) -> str | None:
    """The file name a block's fence gives it (``title="files_server.py"``), if any."""
    return example.prefix_settings().get("title")


def runs(example: CodeExample) -> bool:
    """Whether the block is run on its own: not a file for the next block, not skipped."""
    return not is_file(example) and skipped_because(example) is None


def test_every_python_block_is_found_and_has_a_scenario() -> None:
    for page in PAGES:
        fences = re.findall(r"^```(\S*)", page.read_text(encoding="utf-8"), flags=re.M)
        opening = fences[0::2]  # every other fence closes a block
        found = [e for e in EXAMPLES if e.path == page]
        assert sum(1 for lang in opening if lang == "python") == len(found), page
    assert len(EXAMPLES) >= 12
    runnable = {i for i, e in zip(IDS, EXAMPLES, strict=True) if runs(e)}
    assert runnable == set(SCRIPTS), "a docs block was added, renamed or removed: script it"
    for i, example in enumerate(EXAMPLES):
        if is_file(example):  # written for the next block, which must be run
            assert i + 1 < len(EXAMPLES) and runs(EXAMPLES[i + 1])
            assert EXAMPLES[i + 1].path == example.path


def test_blocks_not_run_are_rare_and_say_why() -> None:
    skipped = {i: skipped_because(e) for i, e in zip(IDS, EXAMPLES, strict=True)}
    skipped = {i: why for i, why in skipped.items() if why is not None}
    assert 0 < len(skipped) <= MAX_SKIPPED, skipped
    assert all(len(why.split()) >= 3 for why in skipped.values()), skipped
    assert not any(i.startswith("README.md:") for i in skipped), "every README block runs"


def test_the_readme_is_one_screen_that_starts_with_a_virtual_environment() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    first = re.search(r"^```(\S*)\n(.*?)^```", text, flags=re.M | re.S)
    assert first is not None and first[1] == "bash"
    assert first[2].startswith("python3 -m venv .venv && . .venv/bin/activate\n")
    for command in ("make demo", "make test"):
        assert re.search(rf"^{command}\b", text, flags=re.M), command


@pytest.fixture
def reader_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A reader's shell: a fresh working directory and no model configured."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "REACT_ENGINE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("REACT_ENGINE_CAPABILITY_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    # pytest-examples runs a block as __main__ and leaves it in sys.modules: put ours back.
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    # On a failure it rebuilds the traceback with frames made through ctypes, whose line
    # table is wrong on Python 3.11 (it passes co_lnotab for co_linetable): formatting them
    # raises StopIteration inside pytest's reporting, an INTERNALERROR that hides the
    # block's error. The traceback it had is kept instead; its file is README_<lines>.py.
    monkeypatch.setattr(pytest_examples.run_code, "create_example_traceback", lambda *a: None)
    # A block that registers a protocol, a store backend or a tool-call format
    # (docs/extending*.md) registers it in this process: the registries are put back as
    # they were after it (the formats' in place: other modules hold that dict).
    monkeypatch.setattr(registry, "PROTOCOLS", dict(registry.PROTOCOLS))
    monkeypatch.setattr(backends, "_OPENERS", dict(backends._OPENERS))
    monkeypatch.setattr(repairs, "REPAIRS", dict(repairs.REPAIRS))
    formats = dict(FORMATS)
    yield tmp_path
    FORMATS.clear()
    FORMATS.update(formats)


def stand_in_for_local_server(server: ScriptedServer) -> Callable[..., Any]:
    @contextmanager
    def local_server(**_: Any) -> Iterator[LocalEndpoint]:
        yield LocalEndpoint(
            base_url=server.base_url,
            api_key="sk-local",
            model="smollm2-135m",
            log_path=Path("server.log"),
            pid=0,
            port=server.port,
        )

    return local_server


@pytest.mark.parametrize(
    "index", [i for i, e in enumerate(EXAMPLES) if runs(e)], ids=lambda i: IDS[i]
)
def test_readme_block_runs(
    index: int,
    eval_example: EvalExample,
    reader_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    example, scenario = EXAMPLES[index], SCRIPTS.get(IDS[index])
    if scenario is None:
        pytest.fail(f"docs block {IDS[index]} ({example}) has no scenario in SCRIPTS")
    if index and (name := is_file(EXAMPLES[index - 1])):
        (reader_env / name).write_text(EXAMPLES[index - 1].source, encoding="utf-8")
    for path, text in scenario.files.items():
        (reader_env / path).parent.mkdir(parents=True, exist_ok=True)
        (reader_env / path).write_text(text, encoding="utf-8")
    with ScriptedServer(*scenario.replies) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-test")
        monkeypatch.setattr(react_engine.local, "local_server", stand_in_for_local_server(server))
        if "#>" in example.source:
            eval_example.run_print_check(example, rewrite_assertions=False)
        else:
            eval_example.run(example, rewrite_assertions=False)
        asked = len(server.requests)
    assert asked == len(scenario.replies), f"the block asked the model {asked} times"
    printed = capfd.readouterr().out
    for text in scenario.printed:
        assert text in printed
    if scenario.check is not None:
        scenario.check(server)

"""The ``react-engine`` command line.

* :mod:`.commands`: :func:`main`, the entry point (``main(argv) -> int``), and how the
  process ends (exit codes in :mod:`.exits`);
* :mod:`.parser`: the argument parser (:func:`build_parser`); :mod:`.options`: the options
  commands share (:func:`~.options.add_endpoint_options` for every command that talks to a
  model); :mod:`.endpoint`: where the model is;
* one module per command: :mod:`.run` (run and demo), :mod:`.chat` (the REPL),
  :mod:`.compare`, :mod:`.eval` (``eval bfcl``), :mod:`.probe`, :mod:`.runs`; what the
  commands of one agent share is in :mod:`.agents`;
* :mod:`.progress`: what a run shows on stderr while it goes; :mod:`.render`: how steps
  and results are printed on a terminal; :mod:`.scripted`: the scripted model of
  ``--dry-run`` and ``--scripted FILE``;
* :mod:`.demo`: the demo's question, tools, dry-run transcript and answer check.
"""

from .commands import ChatSession, Endpoint, build_parser, main
from .demo import DEMO_QUESTION, demo_check
from .exits import EXIT_API, EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_NO_ANSWER

__all__ = [
    "DEMO_QUESTION",
    "EXIT_API",
    "EXIT_BROKEN_PIPE",
    "EXIT_CONFIG",
    "EXIT_INTERRUPTED",
    "EXIT_NO_ANSWER",
    "ChatSession",
    "Endpoint",
    "build_parser",
    "demo_check",
    "main",
]

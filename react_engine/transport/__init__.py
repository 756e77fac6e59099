"""The transport: what goes over the wire to a model, and what its server accepts.

``model.py`` (the :class:`ChatModel` seam, the ``openai`` adapter and retries),
``streaming.py`` (a streamed reply assembled, stopped early, retried),
``capabilities.py`` (+ ``capabilities.json``: what a model and its server accept),
``grammar.py`` (JSON Schema to GBNF) and ``probe.py`` (asking a server what it accepts).

Nothing is imported here, so that importing one module does not load the others.
"""

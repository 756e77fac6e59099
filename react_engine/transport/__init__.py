"""The transport: what goes over the wire to a model, and what its server accepts.

``base.py`` (the :class:`ChatModel` seam), ``wire.py`` (requests to the SDK's keyword
arguments, its replies and errors back), ``openai_model.py`` (the ``openai`` adapter) and
``clients.py`` (its clients per event loop), ``endpoint.py`` (the one rule from a base
URL and a key to a model: :func:`~react_engine.transport.endpoint.connect`), ``retries.py``
(what is transient, tried again), ``streaming.py`` (a streamed reply assembled and stopped
early),
``capabilities.py`` (+ ``capabilities.json``: what a model and its server accept),
``learned.py`` (what servers rejected at run time), ``rejections.py`` (a rejection read,
and what a run does about it), ``grammar.py`` (JSON Schema to GBNF) and ``probe.py``
(asking a server what it accepts).

Nothing is imported here, so that importing one module does not load the others.
"""

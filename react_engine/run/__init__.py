"""The run: the agent, its loop and everything a run carries.

``agent.py`` (:class:`Agent`, the entry point), ``conversation.py``, ``durable.py`` (runs in
a store or a session), ``config.py`` and ``observations.py`` load with the library; the rest
loads when a run starts, through ``running.py``: ``loop.py`` (the turns), ``state.py``
(budgets and a turn's outcomes), ``execution.py`` (the tool runner), ``events.py``,
``tracing.py`` and ``tracefile.py`` (traces). The worker threads and a blocking run's event
loop are :mod:`react_engine.runtime`'s, below every layer.

Nothing is imported here, so that importing one module does not load the others.
"""

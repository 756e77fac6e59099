"""The run: the agent, its loop and everything a run carries.

``agent.py``, ``conversation.py``, ``durable.py``, ``config.py`` and ``observations.py`` load
with the library; the rest (``loop.py``, ``state.py``, ``execution.py``, ``events.py``,
``tracing.py``, ``tracefile.py``) when a run starts. Nothing is
imported here, so that importing one module does not load the others."""

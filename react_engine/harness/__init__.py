"""The harness ``react-engine compare`` and ``react-engine eval bfcl`` both run on:
:mod:`.runner` (jobs run in order, concurrently or on Ray, resumable), :mod:`.metrics`
(figures that add up), :mod:`.report` (grid, JSON) and :mod:`.settings` (the agent
options every case runs with)."""

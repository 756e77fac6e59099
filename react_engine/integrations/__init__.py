"""Runs on engines other projects maintain: :mod:`react_engine.integrations.dbos` (the
``dbos`` extra) makes each run a DBOS workflow. Each integration is imported on its own,
with its extra: ``import react_engine`` loads none of them."""

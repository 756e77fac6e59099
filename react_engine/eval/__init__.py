"""Benchmarks run through the engine: ``react-engine eval bfcl`` (:mod:`.bfcl`)."""

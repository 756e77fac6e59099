"""Benchmarks for react-engine: ``python -m bench`` (``make bench``) writes bench/results.md.

Every figure is a ratio against a baseline run in the same process and the same run:

* :mod:`bench.overhead`: client CPU per LLM call and wall time per run, engine against a
  bare ``openai`` SDK loop (seeds 000 and 002), on a scripted mock server in a separate
  process; sequential, 50 concurrent, and 1,000 concurrent runs (scale and memory).
* :mod:`bench.parsing`: ``parse_react`` and ``repair_json`` against ``json.loads``.
* :mod:`bench.tokens`: prompt tokens per step and prefix stability with the local
  model's tokenizer.

Nothing here asserts a timing; ``tests/eval/test_bench_smoke.py`` only checks that a quick run
produces every section.
"""

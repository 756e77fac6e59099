"""Helpers shared by the tests: fake sleeps and reply builders for both protocols
(``replies``), golden files, a GBNF matcher and the hypothesis profiles. The scripted
fault-injecting server itself ships with the library: react_engine.testing.ScriptedServer."""

"""Does a GBNF grammar accept a string? Asked of llama.cpp's own grammar engine, no model.

``llama_cpp.LlamaGrammar.from_string`` only stores the text (the grammar is parsed when a
sampler is built, which needs a model's vocabulary), so it proves nothing. llama.cpp's
shared library, which llama-cpp-python ships, also exports the functions its own grammar
tests use (``tests/test-grammar-integration.cpp``), with C-compatible arguments:

* ``llama_grammar_init_impl(vocab, grammar_str, root, lazy, ...)`` parses a grammar with
  the real parser (``vocab`` may be null) and returns null when it does not parse;
* ``llama_grammar_accept(grammar, code_point)`` advances the grammar by one character;
* ``llama_grammar_get_stacks(grammar)`` returns its parse stacks (a
  ``std::vector<std::vector<const llama_grammar_element *>>``): none left means the input
  was rejected, an empty one means the grammar can end here.

They are C++ symbols, so they are looked up by their (Itanium ABI) mangled names, and the
stacks are read as libstdc++ lays out a vector (begin, end, capacity pointers). Where any
of that is missing (another platform, another llama.cpp build), :func:`matcher` skips the
test that asked for it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from support.parts import LOCAL, LOCAL_HINT, require_module

_INIT = "_Z23llama_grammar_init_implPK11llama_vocabPKcS3_bPS3_mPKim"
_ACCEPT = "_Z20llama_grammar_acceptP13llama_grammarj"
_STACKS = "_Z24llama_grammar_get_stacksP13llama_grammar"
_FREE = "_Z23llama_grammar_free_implP13llama_grammar"


class _Vector(ctypes.Structure):
    """libstdc++'s ``std::vector``: three pointers."""

    _fields_ = [("begin", ctypes.c_void_p), ("end", ctypes.c_void_p), ("cap", ctypes.c_void_p)]


class GrammarMatcher:
    """llama.cpp's grammar engine, character by character."""

    def __init__(self, lib: Any) -> None:
        self._init = getattr(lib, _INIT)
        self._init.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_bool,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        self._init.restype = ctypes.c_void_p
        self._accept = getattr(lib, _ACCEPT)
        self._accept.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        self._accept.restype = None
        self._stacks = getattr(lib, _STACKS)
        self._stacks.argtypes = [ctypes.c_void_p]
        self._stacks.restype = ctypes.c_void_p
        self._free = getattr(lib, _FREE)
        self._free.argtypes = [ctypes.c_void_p]
        self._free.restype = None

    def parses(self, grammar: str) -> bool:
        """Whether llama.cpp's parser takes the grammar (it prints why not on stderr)."""
        handle = self._init(None, grammar.encode(), b"root", False, None, 0, None, 0)
        if not handle:
            return False
        self._free(handle)
        return True

    def accepts(self, grammar: str, text: str) -> bool:
        """Whether the whole of ``text`` is a sentence of ``grammar``."""
        handle = self._init(None, grammar.encode(), b"root", False, None, 0, None, 0)
        assert handle, f"the grammar does not parse:\n{grammar}"
        try:
            for ch in text:
                self._accept(handle, ord(ch))
                if not self._stack_state(handle)[0]:
                    return False
            return self._stack_state(handle)[1]
        finally:
            self._free(handle)

    def _stack_state(self, handle: int) -> tuple[int, bool]:
        """(how many parse stacks are left, whether one of them is complete)."""
        size = ctypes.sizeof(_Vector)
        stacks = _Vector.from_address(self._stacks(handle))
        count = ((stacks.end or 0) - (stacks.begin or 0)) // size
        done = False
        for i in range(count):
            stack = _Vector.from_address((stacks.begin or 0) + i * size)
            done = done or (stack.begin or 0) == (stack.end or 0)
        return count, done


_matcher: GrammarMatcher | None = None


def matcher() -> GrammarMatcher:
    """llama.cpp's grammar engine, or a skip when llama-cpp-python or its symbols are
    missing."""
    global _matcher
    if _matcher is None:
        llama_cpp = require_module("llama_cpp", LOCAL, LOCAL_HINT, module_level=False)
        lib = llama_cpp.llama_cpp._lib
        missing = [n for n in (_INIT, _ACCEPT, _STACKS, _FREE) if not hasattr(lib, n)]
        if missing or ctypes.sizeof(ctypes.c_void_p) != 8:
            pytest.skip(f"this llama.cpp build does not export {missing or 'a 64-bit ABI'}")
        found = GrammarMatcher(lib)
        # Self-check the ABI reading on a grammar whose answers are known.
        probe = 'root ::= "a" [0-9]{1,2}\n'
        if not (
            found.accepts(probe, "a1")
            and found.accepts(probe, "a12")
            and not found.accepts(probe, "a")
            and not found.accepts(probe, "a123")
            and not found.parses("root ::= (")
        ):
            pytest.skip("llama.cpp's grammar functions do not behave as expected here")
        _matcher = found
    return _matcher

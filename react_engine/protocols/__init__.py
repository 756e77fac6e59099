"""The shipped protocols: native function calling and text ReAct."""

from .function_calling import FunctionCallingProtocol
from .text import TextReActProtocol

__all__ = ["FunctionCallingProtocol", "TextReActProtocol"]

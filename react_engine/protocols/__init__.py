"""The shipped protocols: native function calling, text ReAct and structured output."""

from .function_calling import FunctionCallingProtocol
from .structured import StructuredOutputProtocol
from .text import TextReActProtocol

__all__ = ["FunctionCallingProtocol", "StructuredOutputProtocol", "TextReActProtocol"]

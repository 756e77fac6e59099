"""The embedded default model: SmolLM2-135M-Instruct served by llama.cpp on loopback.

* :mod:`.launcher`: :func:`local_server` / :class:`LocalServer`, which start, watch and
  stop the server process;
* :mod:`.server`: the program that process runs (llama-cpp-python's server with
  react-engine's fixes); it imports llama_cpp, so nothing here imports it.
"""

from .launcher import (
    CHAT_FORMAT,
    MODEL_ALIAS,
    MODEL_ENV_VAR,
    PORTABLE_CMAKE_ARGS,
    LocalEndpoint,
    LocalServer,
    LocalServerError,
    check_local_install,
    find_model_path,
    local_server,
)

__all__ = [
    "CHAT_FORMAT",
    "MODEL_ALIAS",
    "MODEL_ENV_VAR",
    "PORTABLE_CMAKE_ARGS",
    "LocalEndpoint",
    "LocalServer",
    "LocalServerError",
    "check_local_install",
    "find_model_path",
    "local_server",
]

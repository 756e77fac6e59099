"""What machine the figures come from."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from importlib import metadata
from typing import Any

__all__ = ["machine_info"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "os": f"{platform.system()} {platform.release()}",
        "openai": _version("openai"),
        "pydantic": _version("pydantic"),
        "llama_cpp_python": _version("llama_cpp_python"),
        "loadavg_start": os.getloadavg(),
    }

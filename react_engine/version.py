"""The package version, written once (hatch reads it here for the wheel)."""

__version__ = "0.1.0"

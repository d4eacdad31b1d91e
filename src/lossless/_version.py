"""The package version, in a module that imports nothing (``lcm --version`` reads it)."""

VERSION = "0.1.0"

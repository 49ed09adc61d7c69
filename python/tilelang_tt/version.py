"""The package version, in a module of its own: the compile cache and the package format record it, and they
must not import the package's ``__init__`` (which imports them)."""

__version__ = "0.1.0"

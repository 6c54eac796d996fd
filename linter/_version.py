"""The version, in a module of its own so that every other module can import it without cycles."""

__version__ = "0.1.0"

"""gpubench-nb: accept a corpus first, then time, then price GPU rental packages."""

__version__ = "0.1.0"

"""gpubench-nb: accept a corpus first, then time, then price GPU rental packages."""

try:  # written by setuptools-scm when the package is built: names the commit (R1.1)
    from gpubench_nb._version import __version__
except ImportError:  # a checkout never installed: code_revision asks git instead
    __version__ = "0.1.0"

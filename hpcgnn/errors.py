"""Exception types that the command line turns into one clear line and a non-zero exit.

``collective`` tells the command line whether every rank raises the error together (then
rank 0 prints it once and every rank exits) or possibly only some ranks (then the job is
aborted so no rank waits forever). Errors from :func:`hpcgnn.comm.collective.agree` are collective;
:class:`GridError` and :class:`ConfigError` come from checks of the command-line
arguments that every rank evaluates identically, so they are collective by default.
"""


class HpcgnnError(Exception):
    """Base class of every expected, user-facing error (bad input, bad grid, bad flags)."""

    collective: bool = False
    #: How many ranks raised it before they agreed (:func:`hpcgnn.comm.collective.agree`);
    #: ``None``: every rank found it alike (a check of the arguments).
    failing: int | None = None

    def __init__(self, message: str, *, collective: bool | None = None) -> None:
        super().__init__(message)
        if collective is not None:
            self.collective = collective


class InputError(HpcgnnError):
    """An input file or its contents is missing, corrupt or inconsistent."""


class GridError(HpcgnnError):
    """A process grid shape does not fit the number of processes or the algorithm."""

    collective = True


class ConfigError(HpcgnnError):
    """Command-line or configuration parameters are invalid."""

    collective = True


class OutputError(HpcgnnError):
    """An output could not be written (disk full, file too large, quota, I/O error)."""

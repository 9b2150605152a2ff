"""Exception types that the command line turns into one clear line and a non-zero exit."""


class HpcgnnError(Exception):
    """Base class of every expected, user-facing error (bad input, bad grid, bad flags)."""


class InputError(HpcgnnError):
    """An input file or its contents is missing, corrupt or inconsistent."""


class GridError(HpcgnnError):
    """A process grid shape does not fit the number of processes or the algorithm."""


class ConfigError(HpcgnnError):
    """Command-line or configuration parameters are invalid."""

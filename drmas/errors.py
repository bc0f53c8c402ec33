"""User-facing errors.

Anything a user can cause (a bad config value, an unknown name, a malformed data file) is
raised as a `DrmasError`; the CLI prints its message on one line and exits with status 2,
never with a traceback. Internal bugs stay ordinary exceptions.
"""


class DrmasError(Exception):
    """An error the user can fix; its message is shown as is, on one line."""


class ConfigError(DrmasError):
    """The configuration is invalid (wrong type, out of range, unknown name)."""


class DataError(DrmasError):
    """An input data file is missing or malformed."""

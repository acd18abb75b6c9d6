"""The one exception type the CLI turns into a one-line message and a non-zero exit."""
from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix: the message names the file/entry and the fix, in one line."""

    exit_code = 2

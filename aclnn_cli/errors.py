"""User-facing errors: one clear line, exit code 2, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (case file, output directory, dump). Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, where: str = "", key: str = "") -> None:
        """key: the case-file key the problem is about, for whoever names the case (gen: an op's refusal of a
        case's values)."""
        if not where.isprintable():  # a newline in a path must not break the one-line promise
            where = where.encode("unicode_escape").decode("ascii")
        self.where, self.key = where, key
        super().__init__(f"{where}: {message}" if where else message)


class CaseError(UserError):
    """A case file that is malformed or contradictory.

    Always names the file, the case (when known) and the key, so the user can
    go straight to the line that needs changing.
    """

    def __init__(self, file: str, message: str, *, case: str | None = None, key: str | None = None) -> None:
        parts = [str(file)]
        if case:
            parts.append(f"case '{case}'")
        if key:
            parts.append(f"key '{key}'")
        super().__init__(message, where=": ".join(parts))

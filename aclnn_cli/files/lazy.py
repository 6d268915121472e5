"""cached_attribute: functools.cached_property without its lock.

Python 3.11's cached_property takes a lock on every first read (removed in 3.12). Thousands of small
cases each read a few such attributes of their manifest once, so the lock was a measurable part of
verify; none of these objects is shared between threads while its attributes are first made.
"""

from __future__ import annotations

from typing import Any, Callable


class cached_attribute:  # noqa: N801  (read as a decorator, like cached_property)
    """A method made an attribute: computed on first read, then kept in the instance's __dict__ (where a read
    finds it before this non-data descriptor). Works on frozen dataclasses, as cached_property does."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.__doc__ = func.__doc__
        self.name = func.__name__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)
        return value

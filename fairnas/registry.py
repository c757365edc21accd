"""What a package's modules add themselves to when imported (the audits, the data formats): entries by name."""

from __future__ import annotations

from typing import Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(dict[str, T]):
    """Entries by name, in the order they were added, each name once; ``kind`` says what one is in errors."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def add(self, entry: T) -> T:
        """Add ``entry`` under its name (a module adds its own when it is imported); a name added twice is an error."""
        if entry.name in self:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self[entry.name] = entry
        return entry

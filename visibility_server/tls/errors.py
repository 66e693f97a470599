"""The two ways a certificate operation can go wrong, kept apart because the command line
maps them to different exit codes (2 for input, 1 for failure)."""

from __future__ import annotations


class CertsError(Exception):
    """The operation ran and failed: unreadable or inconsistent material, a conflicting
    rotation state, a verification finding."""


class CertsInputError(CertsError):
    """The caller named something unusable: a bad name, a folder that is not a
    certificate folder, a file that would be overwritten without being asked to."""

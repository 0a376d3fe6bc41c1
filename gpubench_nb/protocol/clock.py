"""UTC time as the bundle writes it: ``2026-12-04T19:00:00Z`` (and a compact form for names)."""

from __future__ import annotations

from datetime import datetime, timezone

UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # every *_utc field of a bundle
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"  # in file and folder names


def utc_moment() -> datetime:
    """Now, an aware UTC datetime: the one clock read behind every form below."""
    return datetime.now(timezone.utc)


def parse_utc(text: str) -> datetime:
    """``2026-12-01`` or ``2026-12-01T09:00:00Z`` as an aware UTC datetime (naive = UTC);
    ``ValueError`` when the text is no date."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment.replace(tzinfo=moment.tzinfo or timezone.utc).astimezone(timezone.utc)


def utc_text(moment: datetime) -> str:
    """An aware (or naive = UTC) datetime as ``UTC_FORMAT``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime(UTC_FORMAT)


def utc_now() -> str:
    """Now, in UTC, to the second: the form of every ``*_utc`` field (run.json, lock, ...)."""
    return utc_text(utc_moment())


def utc_stamp() -> str:
    """Now as ``20261204T190000Z``: for names of backups and bundles."""
    return utc_moment().strftime(STAMP_FORMAT)

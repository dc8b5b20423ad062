"""Who is logged in to the workbench: users, password hashes, sessions, CSRF tokens, and the
login throttle.

Passwords are kept as scrypt hashes (stdlib ``hashlib.scrypt``, a memory-hard function) in
the report database's ``workbench_users`` table; ``reckon users add`` writes them. A session
is a cookie holding the user's name, when it was issued and a random nonce, signed with
HMAC-SHA256 under the workbench's secret, and a row of ``workbench_sessions`` keyed by the
nonce's SHA-256: a request is served only while that row is open, so logging out, ``reckon
users disable`` and ``reckon users revoke`` end a session on the server (a copied cookie stops
working at once), and the user's role is read from the database on every request. The CSRF
token of a session is an HMAC of its nonce: every form carries it and every POST must send it
back. Failed logins are counted per (name, client address) and per address
(:class:`LoginThrottle`); past the limit a login is refused, even with the right password,
until the oldest failure in the window has aged out.

Example:
    >>> keys = SessionKeys(b"k" * 32)
    >>> cookie = keys.issue("bob", now=1000.0)
    >>> keys.read(cookie, now=1001.0).name
    'bob'
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from reckon.errors import UsageError, invalid
from reckon.identity import same_person
from reports.db.engine import write_tx
from reports.db.models import WORKBENCH_LOGIN_FAILURES, WORKBENCH_SESSIONS, WORKBENCH_USERS
from reports.db.repository import ReportDB

__all__ = ["ROLES", "LoginThrottle", "Session", "SessionKeys", "User", "add_user",
           "check_password", "end_session", "end_sessions", "find_user", "hash_password",
           "list_users", "load_secret", "put_user", "session_is_open", "start_session"]

ROLES = ("reconciler", "reviewer", "auditor")
SESSION_SECONDS = 8 * 3600  # a working day; then log in again
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


@dataclass(frozen=True)
class User:
    """A workbench user as stored (without the hash)."""

    name: str
    role: str
    enabled: bool

    @property
    def may_act(self) -> bool:
        """Reviewers and reconcilers act on breaks; auditors only read."""
        return self.enabled and self.role in ("reviewer", "reconciler")

    @property
    def may_sign(self) -> bool:
        """Only reviewers sign runs off (and never their own: the four-eyes rule)."""
        return self.enabled and self.role == "reviewer"


@dataclass(frozen=True)
class Session:
    name: str
    issued: float
    nonce: str


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$salt$hash`` (hex) of ``password``."""
    salt = salt or os.urandom(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, dklen=32, **_SCRYPT)
    return "scrypt${n}${r}${p}$".format(**_SCRYPT) + f"{salt.hex()}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant-time comparison)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        got = hashlib.scrypt(password.encode("utf-8"), salt=bytes.fromhex(salt), dklen=32,
                             n=int(n), r=int(r), p=int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got.hex(), digest)


def add_user(db: ReportDB, name: str, role: str, password: str) -> User:
    """Create a user, or replace an existing one's password and role (re-enabling it; their
    open sessions end: they were opened under the old password or role)."""
    return put_user(db, name, role, password)[0]


def put_user(db: ReportDB, name: str, role: str, password: str) -> tuple[User, User | None]:
    """``add_user``, and the user as it was before (None: a new user), so that ``reckon users
    add`` can say it updated someone rather than created them.

    Example: ``put_user(db, "bob", "reviewer", pw)[1]`` is ``User("bob", "auditor", False)``
    when bob was a disabled auditor."""
    who = (name or "").strip()
    if not who or len(who) > 200:
        raise invalid("name", name, "a user name of 1 to 200 characters")
    if role not in ROLES:
        raise invalid("role", role, "one of " + ", ".join(ROLES))
    if len(password) < 12:
        raise UsageError("the password is too short: give at least 12 characters")
    t = WORKBENCH_USERS
    values = {"password_hash": hash_password(password), "role": role, "enabled": True}
    with write_tx(db.ready()) as conn:  # the name is the key: a racing twin fails
        _refuse_a_look_alike(who, [n for (n,) in conn.execute(sa.select(t.c.name))])
        row = conn.execute(sa.select(t.c.role, t.c.enabled).where(t.c.name == who)).first()
        if row is not None:
            conn.execute(sa.update(t).where(t.c.name == who).values(**values))
        else:
            conn.execute(sa.insert(t).values(name=who, created_at=datetime.now(UTC), **values))
    end_sessions(db, who)
    return User(who, role, True), None if row is None else User(who, row.role, bool(row.enabled))


def _refuse_a_look_alike(name: str, existing: list[str]) -> None:
    """Refuse a new name that reckon.identity takes for an existing user's (the four-eyes rule
    would see one person under two logins, and a reader of the log two people).

    Example: with ``root`` a user, ``r\\u043e\\u043et`` (Cyrillic o) is refused: ``user name
    'r\\u043e\\u043et' looks like the existing user 'root' ...``."""
    for other in sorted(existing):
        if other != name and same_person(other, name):
            raise UsageError(f"user name {name!a} looks like the existing user "
                             f"{other!a} (the four-eyes rule takes them for one person): "
                             f"choose another name, or `reckon users add {other}` to update "
                             "that user")


def list_users(db: ReportDB) -> list[User]:
    """Every user, by name (no hash)."""
    t = WORKBENCH_USERS
    with db.ready().connect() as conn:
        rows = conn.execute(sa.select(t.c.name, t.c.role, t.c.enabled).order_by(t.c.name))
        return [User(r.name, r.role, bool(r.enabled)) for r in rows]


def find_user(db: ReportDB, name: str, password: str | None = None) -> User | None:
    """The enabled user ``name`` (checking ``password`` when given), else None."""
    t = WORKBENCH_USERS
    with db.ready().connect() as conn:
        row = conn.execute(sa.select(t).where(t.c.name == name)).first()
    if row is None or not row.enabled:
        if password is not None:
            hash_password(password)  # the same time whether or not the name exists
        return None
    if password is not None and not check_password(password, row.password_hash):
        return None
    return User(row.name, row.role, bool(row.enabled))


def load_secret(path: Path | None) -> bytes:
    """The signing key: ``WORKBENCH_SECRET_KEY`` when set (production: one key for every
    replica), else a random key kept in ``path`` (created 0600 on first use)."""
    env = os.environ.get("WORKBENCH_SECRET_KEY")
    if env:
        if len(env) < 32:
            raise UsageError("WORKBENCH_SECRET_KEY is too short: give 32 characters or more")
        return env.encode("utf-8")
    if path is None:
        return secrets.token_bytes(32)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
    return path.read_text().strip().encode("utf-8")


class SessionKeys:
    """Signs and reads session cookies and derives their CSRF tokens."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, purpose: str, data: str) -> str:
        return hmac.new(self._secret, f"{purpose}|{data}".encode(), hashlib.sha256).hexdigest()

    def issue(self, name: str, *, now: float | None = None) -> str:
        payload = json.dumps({"u": name, "t": now or time.time(), "n": secrets.token_hex(16)},
                             separators=(",", ":"))
        body = base64.urlsafe_b64encode(payload.encode()).decode()
        return f"{body}.{self._mac('session', body)}"

    def read(self, cookie: str | None, *, now: float | None = None) -> Session | None:
        """The session the cookie holds, or None (absent, forged or expired)."""
        if not cookie or "." not in cookie:
            return None
        body, mac = cookie.rsplit(".", 1)
        if not hmac.compare_digest(mac, self._mac("session", body)):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(body.encode()))
            session = Session(str(data["u"]), float(data["t"]), str(data["n"]))
        except (ValueError, KeyError, TypeError):
            return None
        if (now or time.time()) - session.issued > SESSION_SECONDS:
            return None
        return session

    def csrf(self, nonce: str) -> str:
        """The CSRF token of a session (or of a login form's nonce)."""
        return self._mac("csrf", nonce)

    def csrf_ok(self, nonce: str, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf(nonce), str(token))


# ----------------------------------------------------------------------------- sessions


def _session_key(nonce: str) -> str:
    """The row key of a session: the SHA-256 of its nonce (the database never holds a value
    that would let someone forge the cookie, which needs the secret anyway)."""
    return hashlib.sha256(nonce.encode()).hexdigest()


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def start_session(db: ReportDB, keys: SessionKeys, name: str, *,
                  now: float | None = None) -> str:
    """A new session of ``name``: its row is written, its cookie returned."""
    moment = now or time.time()
    cookie = keys.issue(name, now=moment)
    session = keys.read(cookie, now=moment)
    assert session is not None, "a cookie just issued reads back"
    with write_tx(db.ready()) as conn:
        conn.execute(sa.insert(WORKBENCH_SESSIONS).values(
            token_hash=_session_key(session.nonce), name=name, created_at=_utc(moment),
            expires_at=_utc(moment + SESSION_SECONDS), revoked_at=None))
    return cookie


def session_is_open(db: ReportDB, session: Session, *, now: float | None = None) -> bool:
    """Whether the session's row exists for its user, is not revoked and has not expired."""
    t = WORKBENCH_SESSIONS
    with db.ready().connect() as conn:
        row = conn.execute(sa.select(t.c.name, t.c.expires_at, t.c.revoked_at).where(
            t.c.token_hash == _session_key(session.nonce))).first()
    return (row is not None and row.name == session.name and row.revoked_at is None
            and row.expires_at > _utc(now or time.time()))


def end_session(db: ReportDB, nonce: str) -> None:
    """Revoke one session (logging out)."""
    t = WORKBENCH_SESSIONS
    with write_tx(db.ready()) as conn:
        conn.execute(sa.update(t).where(t.c.token_hash == _session_key(nonce),
                                        t.c.revoked_at.is_(None))
                     .values(revoked_at=datetime.now(UTC)))


def end_sessions(db: ReportDB, name: str) -> int:
    """Revoke every open session of ``name``; returns how many were open."""
    t = WORKBENCH_SESSIONS
    now = datetime.now(UTC)
    with write_tx(db.ready()) as conn:
        return int(conn.execute(sa.update(t).where(
            t.c.name == name, t.c.revoked_at.is_(None), t.c.expires_at > now)
            .values(revoked_at=now)).rowcount or 0)


# ----------------------------------------------------------------------------- login throttle


@dataclass(frozen=True)
class LoginThrottle:
    """How many failed logins are let through: ``per_name`` for one name from one address,
    ``per_address`` from one address whatever the names (someone trying many users), within
    ``window_seconds``. Past either limit every login of that kind is refused, the right
    password included, until the oldest counted failure is ``window_seconds`` old; a
    successful login forgets the failures of its (name, address). Kept in the report
    database, so every replica of the workbench counts the same failures.

    Example:
        >>> LoginThrottle().describe_wait(61)
        '2 minutes'
    """

    per_name: int = 5
    per_address: int = 20
    window_seconds: int = 15 * 60

    def refusal(self, db: ReportDB, name: str, address: str, *,
                now: float | None = None) -> str | None:
        """Why a login of ``name`` from ``address`` is refused now, or None."""
        t = WORKBENCH_LOGIN_FAILURES
        moment = now or time.time()
        since = _utc(moment - self.window_seconds)
        checks = ((t.c.name == name, self.per_name,
                   f"too many failed logins for {name} from {address}"),
                  (sa.true(), self.per_address, f"too many failed logins from {address}"))
        with db.ready().connect() as conn:
            for narrow, limit, what in checks:
                recent = [r.at for r in conn.execute(
                    sa.select(t.c.at).where(t.c.address == address, narrow, t.c.at > since)
                    .order_by(t.c.at.desc()).limit(limit))]
                if len(recent) >= limit:
                    wait = recent[-1].timestamp() + self.window_seconds - moment
                    return (f"{what}: logins are refused for {self.describe_wait(wait)} (the "
                            "right password too); ask an administrator if you forgot it")
        return None

    @staticmethod
    def describe_wait(seconds: float) -> str:
        minutes = max(1, -(-int(seconds) // 60))
        return "1 minute" if minutes == 1 else f"{minutes} minutes"

    def failed(self, db: ReportDB, name: str, address: str, *,
               now: float | None = None) -> None:
        """Count a failed login (and forget failures older than a day)."""
        t = WORKBENCH_LOGIN_FAILURES
        moment = now or time.time()
        with write_tx(db.ready()) as conn:
            conn.execute(sa.insert(t).values(at=_utc(moment), name=name[:200],
                                             address=address[:100]))
            conn.execute(sa.delete(t).where(t.c.at < _utc(moment - max(
                86_400, self.window_seconds))))

    def succeeded(self, db: ReportDB, name: str, address: str) -> None:
        t = WORKBENCH_LOGIN_FAILURES
        with write_tx(db.ready()) as conn:
            conn.execute(sa.delete(t).where(t.c.name == name, t.c.address == address))

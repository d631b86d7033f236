"""Storage of a :class:`~sklearn_dpu.privacy.budget.PrivacyBudget`: the
hash-chained SQLite ledger and the upgrade of format-1 ledgers.

Each charge stores a digest chaining it to the previous one (SHA-256, or
HMAC-SHA256 under a key), starting from a digest of the ledger's parameters,
and the ledger stores the number of charges and the last digest.
:meth:`LedgerStore._verified_rows` checks the whole chain; what it does and
does not protect against is in ``doc/budget.rst``. Private: the public names
are in :mod:`sklearn_dpu.privacy.budget`.
"""

import dataclasses
import hashlib
import hmac
import json
import math
import os
import secrets
import sqlite3
import urllib.parse
from contextlib import closing, contextmanager
from dataclasses import dataclass

from dp_accounting import dp_event

from ..exceptions import LedgerTamperedError, LedgerUnavailableError, PersistenceError
from .accounting import NEIGHBORING_RELATION, epsilon_upper_bound, gaussian_precision
from .events import event_from_dict

_FORMAT_VERSION = 2
#: Seconds a charge waits for another process's lock before giving up.
LOCK_TIMEOUT = 120.0
# Keys passed as bytes, by key id, for this process only (never pickled).
_KEYS: dict[str, bytes] = {}


def _cleanup(path: str, owner: int) -> None:
    """Remove a temporary ledger at exit of the process that created it."""
    if os.getpid() != owner:
        return
    for suffix in ("", "-journal", "-wal", "-shm"):
        try:
            os.remove(path + suffix)
        except OSError:
            pass


def _key_id(key: bytes) -> str:
    return hmac.new(key, b"sklearn_dpu ledger key id", hashlib.sha256).hexdigest()[:32]


class LedgerStore:
    """The SQLite file of a budget: connection, creation, hash chain, reading.

    Holds ``epsilon``, ``delta``, ``path``, ``key_env`` and ``key_id``, set by
    :class:`~sklearn_dpu.privacy.budget.PrivacyBudget`, which adds the
    checks, the charges and the public API.
    """

    def _key(self) -> bytes | None:
        if self.key_env is not None:
            value = os.environ.get(self.key_env)
            if not value:
                raise LedgerUnavailableError(
                    f"the key of the budget ledger {self.path} is read from the environment "
                    f"variable {self.key_env}, which is not set in this process"
                )
            return value.encode()
        if self.key_id is not None:
            if self.key_id not in _KEYS:
                raise LedgerUnavailableError(
                    f"the key of the budget ledger {self.path} was passed as bytes in another "
                    "process and is not known here; pass key='ENV_VAR_NAME' so that worker "
                    "processes can read it"
                )
            return _KEYS[self.key_id]
        return None

    def _digest(self, key: bytes | None, previous: str, content: str) -> str:
        message = f"{previous}\n{content}".encode()
        if key is None:
            return hashlib.sha256(message).hexdigest()
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    def _connect(self, timeout: float = LOCK_TIMEOUT, create: bool = False) -> sqlite3.Connection:
        # mode=rw: an existing ledger is never re-created empty when it is missing.
        mode = "rwc" if create else "rw"
        uri = f"file:{urllib.parse.quote(self.path)}?mode={mode}"
        return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)

    @contextmanager
    def _closing(self, timeout: float = LOCK_TIMEOUT, create: bool = False):
        """An open connection; a damaged, missing, locked or read-only file
        surfaces as PersistenceError (LedgerUnavailableError for the last three)."""
        if not create and not os.path.exists(self.path):
            raise LedgerUnavailableError(
                f"the budget ledger {self.path} does not exist (moved or deleted?)"
            )
        try:
            with closing(self._connect(timeout=timeout, create=create)) as db:
                yield db
        except sqlite3.OperationalError as err:
            text = str(err)
            if "locked" in text or "busy" in text:
                raise LedgerUnavailableError(
                    f"the budget ledger {self.path} stayed locked by another process for "
                    f"{timeout:g} s"
                ) from err
            if "readonly" in text or "unable to open" in text or "disk I/O" in text:
                raise LedgerUnavailableError(
                    f"the budget ledger {self.path} cannot be written: {err}"
                ) from err
            raise PersistenceError(f"{self.path} is not a readable budget ledger: {err}") from err
        except sqlite3.DatabaseError as err:
            raise PersistenceError(f"{self.path} is not a readable budget ledger: {err}") from err

    @contextmanager
    def _reading(self, timeout: float = LOCK_TIMEOUT):
        """A connection inside a read transaction: the meta row and the charges
        are read from one snapshot, never across another process's commit."""
        with self._closing(timeout=timeout) as db:
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("ROLLBACK")

    def _expected_meta(self) -> dict:
        return {
            "format_version": str(_FORMAT_VERSION),
            "epsilon": repr(self.epsilon),
            "delta": repr(self.delta),
            "neighboring_relation": NEIGHBORING_RELATION.name,
            "chain": "sha256" if self.key_env is None and self.key_id is None else "hmac-sha256",
        }

    def _create_or_verify(self) -> None:
        if os.path.exists(self.path) and os.path.getsize(self.path) > 0:
            # an existing ledger is only read: a read-only file can be inspected
            with self._reading() as db:
                self._verified_rows(db)
            return
        with self._closing(create=True) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                # another process may have created it since the size was read
                tables = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
                if not tables:
                    self._initialize(db)
                self._verified_rows(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _initialize(self, db) -> None:
        key = self._key()
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute(
            "CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " created REAL, description TEXT, events TEXT, digest TEXT)"
        )
        meta = {**self._expected_meta(), "ledger_id": secrets.token_hex(16)}
        if key is not None:
            meta["key_check"] = hmac.new(key, b"sklearn_dpu key check", hashlib.sha256).hexdigest()
        db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        genesis = self._digest(key, "", json.dumps(sorted(meta.items())))
        db.execute("INSERT INTO meta VALUES ('head', ?)", (json.dumps([0, genesis]),))

    def _read_meta(self, db) -> dict:
        try:
            stored = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except (sqlite3.DatabaseError, ValueError) as err:
            raise PersistenceError(f"{self.path} is not a privacy budget ledger: {err}") from err
        version = stored.get("format_version")
        if version != str(_FORMAT_VERSION):
            if version is not None and version.isdigit() and int(version) < _FORMAT_VERSION:
                raise PersistenceError(
                    f"{self.path} is a budget ledger of format {version}, without tamper "
                    f"evidence; this sklearn_dpu reads format {_FORMAT_VERSION}. Upgrade it "
                    "once with sklearn_dpu.privacy.budget.upgrade_ledger(path) (it trusts "
                    "the charges the file holds now), or start a new ledger"
                )
            raise PersistenceError(
                f"{self.path} is not a privacy budget ledger this sklearn_dpu can read "
                f"(format {version!r})"
            )
        expected = self._expected_meta()
        found = {k: stored.get(k) for k in expected}
        if found["chain"] != expected["chain"]:
            raise PersistenceError(
                f"{self.path} is a ledger with a {found['chain']} chain; this handle uses "
                f"{expected['chain']} (pass the same key= as when it was created)"
            )
        if found != expected:
            raise PersistenceError(
                f"{self.path} holds a budget created with {found}; this handle asks for {expected}"
            )
        return stored

    def _verified_rows(self, db) -> tuple[list[tuple], str]:
        """All charges ``(id, created, description, events)``, after checking
        the hash chain from the ledger parameters to the stored head; and the
        last digest. Raises LedgerTamperedError if any link is broken."""
        rows, digest, _ = self._verify(db)
        return [row[:4] for row in rows], digest

    def _verify(self, db) -> tuple[list[tuple], str, "_VerifiedCharges"]:
        """:meth:`_verified_rows` with the rows as read (their stored digest
        last), and the record of this verification (the handle's cache,
        which another thread may replace meanwhile)."""
        stored = self._read_meta(db)
        key = self._key()
        if key is not None:
            check = hmac.new(key, b"sklearn_dpu key check", hashlib.sha256).hexdigest()
            if not hmac.compare_digest(check, stored.get("key_check", "")):
                raise LedgerTamperedError(
                    f"the key given for the budget ledger {self.path} is not the key it was "
                    "created with"
                )
        meta = {k: stored[k] for k in stored if k != "head"}
        genesis = digest = self._digest(key, "", json.dumps(sorted(meta.items())))
        try:
            rows = db.execute(
                "SELECT id, created, description, events, digest FROM charges ORDER BY id"
            ).fetchall()
            head = json.loads(stored["head"])
        except (sqlite3.DatabaseError, ValueError, KeyError) as err:
            raise PersistenceError(f"{self.path} is not a privacy budget ledger: {err}") from err
        # Rows equal to rows this handle verified under the same genesis (same
        # parameters, same key) recompute the same digests: only the rest is hashed.
        verified = self.__dict__.get("_verified")
        start = 0
        if verified is not None and verified.genesis == genesis:
            start = verified.prefix_of(rows)
            if start:
                digest = verified.digest
        for position in range(start, len(rows)):
            row_id, created, description, events, stored_digest = rows[position]
            content = json.dumps([row_id, created, description, events])
            digest = self._digest(key, digest, content)
            if not (isinstance(stored_digest, str) and hmac.compare_digest(digest, stored_digest)):
                raise LedgerTamperedError(
                    f"the budget ledger {self.path} was modified outside sklearn_dpu: charge "
                    f"{position} (row id {row_id}) does not follow from the charges before it "
                    "(a charge was deleted, edited or inserted). Its total cannot be trusted; "
                    "restore the file from a backup"
                )
        if head != [len(rows), digest]:
            raise LedgerTamperedError(
                f"the budget ledger {self.path} was modified outside sklearn_dpu: it records "
                f"{head[0] if isinstance(head, list) and head else '?'} charges ending in a "
                f"digest its {len(rows)} charges do not produce (charges were deleted from "
                "its end, or added). Restore the file from a backup"
            )
        if (
            verified is None
            or verified.genesis != genesis
            or not start == len(verified.rows) == len(rows)
        ):
            kept = {}
            if verified is not None and verified.genesis == genesis:
                if verified.decoded_rows <= start:  # decoded rows of the equal prefix
                    kept = {"stored": verified.stored, "decoded_rows": verified.decoded_rows}
            verified = _VerifiedCharges(genesis, rows, digest, **kept)
            self._verified = verified
        return rows, digest, verified

    def _events(self, rows) -> list[dp_event.DpEvent]:
        return [event for row in rows for event in self._row_events(row)]

    def _row_events(self, row) -> tuple[dp_event.DpEvent, ...]:
        try:
            return tuple(event_from_dict(item) for item in json.loads(row[3]))
        except (ValueError, TypeError, KeyError) as err:  # JSONDecodeError is a ValueError
            raise PersistenceError(
                f"{self.path} holds a charge that is not a valid privacy event: {err}"
            ) from err

    def _load_events(self, db) -> "StoredEvents":
        """Every charge's events, in order (chain verified)."""
        rows, _, verified = self._verify(db)
        return self._decoded_events(rows, verified)

    def _decoded_events(self, rows: list, verified: "_VerifiedCharges") -> "StoredEvents":
        """The events of ``rows``, which ``verified`` (from :meth:`_verify`)
        holds; the rows it has decoded are not decoded again. The decoding is
        kept only if ``verified`` is still the handle's cache: a record always
        holds the events of its own rows, whatever another thread did since."""
        stored = verified.stored
        if verified.decoded_rows < len(rows):
            new = [e for row in rows[verified.decoded_rows :] for e in self._row_events(row)]
            stored = stored.extended(new)
            decoded = dataclasses.replace(verified, stored=stored, decoded_rows=len(rows))
            if self.__dict__.get("_verified") is verified:
                self._verified = decoded
        return stored


@dataclass(frozen=True)
class StoredEvents:
    """The events a budget's ledger holds, in order, and their Gaussian precision.

    ``precision`` is :func:`~sklearn_dpu.privacy.accounting.gaussian_precision`
    of ``events``, kept so that composing them with more events costs only
    the new ones (it is summed in the same order either way, so the total is
    the same bits); ``None`` when the events are not all Gaussian, ``inf``
    with a noiseless one (then the events themselves are composed).
    """

    events: tuple = ()
    precision: float | None = 0.0

    def extended(self, events: list) -> "StoredEvents":
        """These events followed by ``events``."""
        return StoredEvents(self.events + tuple(events), self._precision_with(events))

    def _precision_with(self, events: list) -> float | None:
        if self.precision is None or math.isinf(self.precision):
            return gaussian_precision([*self.events, *events])
        return gaussian_precision(events, start=self.precision)

    def epsilon(self, new: list, bounds: list, delta: float) -> float:
        """``epsilon_upper_bound([*events, *new], bounds, delta)``."""
        return epsilon_upper_bound(
            [*self.events, *new], bounds, delta, precision=self._precision_with(new)
        )


@dataclass(frozen=True)
class _VerifiedCharges:
    """The charges a handle last verified, so that the next verification hashes
    (and decodes) only the charges added since.

    ``genesis``: the chain's first digest (a digest of the ledger's
    parameters, under its key); ``rows``: the charges as read, a list of
    ``(id, created, description, events, digest)`` never modified;
    ``digest``: the chain's digest after the last; ``stored``: the events of
    the first ``decoded_rows`` rows. A row read again equal to its verified
    copy (every column, the stored digest included) under the same genesis
    recomputes the same digest, so verifying only what follows the equal
    prefix detects exactly what verifying everything does. Process-local:
    handles pickle without it.
    """

    genesis: str
    rows: list
    digest: str
    stored: StoredEvents = StoredEvents()
    decoded_rows: int = 0

    def prefix_of(self, rows: list) -> int:
        """How many of ``rows``, from the first, equal the verified rows (all
        of these or none: a ledger only grows, and any other difference is
        verified from the start)."""
        count = len(self.rows)
        if count and len(rows) >= count and rows[:count] == self.rows:
            return count
        return 0


def upgrade_format_1(path: str, key: str | bytes | None = None) -> None:
    """Add the hash chain to the format-1 ledger at ``path`` (absolute), in
    place, in one transaction (see :func:`sklearn_dpu.privacy.budget.upgrade_ledger`)."""
    if not os.path.exists(path):
        raise LedgerUnavailableError(f"the budget ledger {path} does not exist")
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format_version") != "1":
                raise PersistenceError(
                    f"{path} is not a format-1 ledger (format {meta.get('format_version')!r})"
                )
            store = LedgerStore.__new__(LedgerStore)
            store.epsilon, store.delta = float(meta["epsilon"]), float(meta["delta"])
            store.path, store.key_env, store.key_id = path, None, None
            if isinstance(key, str):
                store.key_env = key
            elif isinstance(key, bytes):
                store.key_id = _key_id(key)
                _KEYS[store.key_id] = key
            rows = db.execute(
                "SELECT id, created, description, events FROM charges ORDER BY id"
            ).fetchall()
            db.execute("DROP TABLE meta")
            db.execute("ALTER TABLE charges ADD COLUMN digest TEXT")
            db.execute("ALTER TABLE charges RENAME TO charges_v1")
            store._initialize(db)
            db.execute(
                "INSERT INTO charges (id, created, description, events) "
                "SELECT id, created, description, events FROM charges_v1"
            )
            db.execute("DROP TABLE charges_v1")
            head_key = store._key()
            stored = dict(db.execute("SELECT key, value FROM meta WHERE key != 'head'").fetchall())
            digest = store._digest(head_key, "", json.dumps(sorted(stored.items())))
            for row in rows:
                digest = store._digest(head_key, digest, json.dumps(list(row)))
                db.execute("UPDATE charges SET digest = ? WHERE id = ?", (digest, row[0]))
            db.execute(
                "UPDATE meta SET value = ? WHERE key = 'head'", (json.dumps([len(rows), digest]),)
            )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

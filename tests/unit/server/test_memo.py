"""The store's memo of immutable workflow versions: bounded, and a transaction's entries only
after its commit."""

from __future__ import annotations

from datetime import UTC, datetime

from dsched_server.store.memo import Memo, Staged, Version, VersionKey

T = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _version(description: str = "") -> Version:
    return Version(description=description, params={}, create_time=T, tasks=())


def test_the_least_recently_used_goes_first() -> None:
    memo = Memo(size=2)
    a, b, c = (VersionKey(code, T, 1) for code in (1, 2, 3))
    memo.put(a, _version("a"))
    memo.put(b, _version("b"))
    assert memo.get(a) == _version("a")  # a is now the most recent
    memo.put(c, _version("c"))
    assert (memo.get(a), memo.get(b), memo.get(c)) == (_version("a"), None, _version("c"))
    assert len(memo) == 2


def test_the_key_is_the_workflow_incarnation_and_version() -> None:
    memo = Memo()
    memo.put(VersionKey(1, T, 1), _version())
    assert memo.get(VersionKey(1, T, 2)) is None
    assert memo.get(VersionKey(1, T.replace(microsecond=0), 1)) is None  # an id given again


def test_a_transactions_entries_are_seen_by_it_and_published_on_commit_only() -> None:
    memo = Memo()
    key = VersionKey(1, T, 1)
    staged = Staged(memo)
    staged.put(key, _version("mine"))
    assert staged.get(key) == _version("mine")
    assert memo.get(key) is None
    Staged(memo).put(key, _version("rolled back"))  # never published
    assert memo.get(key) is None
    staged.publish()
    assert memo.get(key) == _version("mine")
    assert Staged(memo).get(key) == _version("mine")

"""The repeat-and-median ``main`` the task overhead benches share (tests/bench/common.py), on
figures given by the test instead of measured: the PYTHON bench runs it for real in a few
seconds, the SPARK bench's run takes minutes, so this is what checks the path they share."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.bench import common
from tests.bench.common import Row, median_of_repeats


@dataclass(frozen=True, slots=True)
class Figures:
    first_ms: float
    second_ms: float


def _rows(figures: Figures) -> list[Row]:
    return [
        ("first (ms)", f"{figures.first_ms:.1f}", "-", True),
        ("second (ms)", f"{figures.second_ms:.1f}", "<= 5", figures.second_ms <= 5),
    ]


def test_each_figure_is_the_median_of_the_repetitions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    given = iter([Figures(3.0, 9.0), Figures(1.0, 4.0), Figures(2.0, 1.0)])
    calls: list[tuple[int, int]] = []

    def measure(runs: int, slots: int) -> Figures:
        calls.append((runs, slots))
        return next(given)

    argv = ["bench", "--runs", "7", "--repeat", "3", "--slots", "2", "--no-settle"]
    monkeypatch.setattr("sys.argv", argv)
    status = median_of_repeats("X overhead", "a bench", 30, measure, _rows)

    assert calls == [(7, 2)] * 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "run 1: Figures(first_ms=3.0, second_ms=9.0)",
        "run 2: Figures(first_ms=1.0, second_ms=4.0)",
        "run 3: Figures(first_ms=2.0, second_ms=1.0)",
    ]
    assert lines[4].startswith("X overhead: median of 7 one-task runs, median of 3 repetition(s); ")
    assert lines[6].split() == ["first", "(ms)", "2.0", "-", "yes"]
    assert lines[7].split() == ["second", "(ms)", "4.0", "<=", "5", "yes"]
    assert status == 0


def test_it_settles_before_each_repetition_and_reports_a_missed_target(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settled: list[str] = []
    # The real wait is up to 36 s after another bench removed its data directory.
    monkeypatch.setattr(common, "settle", settled.append)
    monkeypatch.setattr("sys.argv", ["bench", "--repeat", "2"])
    runs: list[int] = []

    def measure(count: int, _slots: int) -> Figures:
        runs.append(count)
        return Figures(1.0, 6.0)

    status = median_of_repeats("Y overhead", "a bench", 30, measure, _rows)

    assert settled == ["Y overhead", "Y overhead"]
    assert runs == [30, 30]  # --runs defaults to the bench's own
    assert capsys.readouterr().out.splitlines()[-1].split() == [
        "second",
        "(ms)",
        "6.0",
        "<=",
        "5",
        "NO",
    ]
    assert status == 1

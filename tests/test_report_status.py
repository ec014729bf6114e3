"""A report row's status is one closed set: what is tuned or failed is decided once, a
misspelt status is refused where it is made, and reports written before keep reading."""

from __future__ import annotations

import pytest

from pytest_r3.reports import KernelReport, Status
from pytest_r3.reports.status import OUTCOMES


def test_a_status_shows_with_its_detail_and_says_whether_it_is_tuned_or_failed():
    assert str(Status("FAIL", "slower")) == "FAIL: slower"
    assert str(Status("FAILED", "tuning error")) == "FAILED: tuning error"
    assert str(Status("tuned buckets", "2 of 3 bucket(s)")) == "tuned 2 of 3 bucket(s)"
    assert str(Status("baseline kept")) == "baseline kept"
    assert [o for o in OUTCOMES if Status(o).tuned] == [
        "tuned", "tuned (source rewrite)", "tuned buckets"]
    assert [o for o in OUTCOMES if Status(o).failed] == ["FAILED", "FAIL"]


def test_a_misspelt_status_or_free_text_is_refused_where_it_is_made():
    with pytest.raises(ValueError, match="unknown report status 'tunned': use one of tuned"):
        Status("tunned")
    with pytest.raises(TypeError, match="status is a Status"):
        KernelReport("k", "cpu", "FAIL: slower")


@pytest.mark.parametrize("status", [Status("FAIL", "oracle tests"), Status("ok"),
                                    Status("tuned buckets", "1 of 2 bucket(s)")])
def test_a_row_round_trips_through_its_dict(status):
    row = KernelReport("k", "cpu", status, speedup=1.5)
    data = row.as_dict()
    assert data["status"] == status.as_dict()
    assert KernelReport.from_dict(data).status == status


@pytest.mark.parametrize(("text", "expected"), [
    ("FAIL: slower", Status("FAIL", "slower")),
    ("FAILED: 1 of 2 bucket(s)", Status("FAILED", "1 of 2 bucket(s)")),
    ("tuned 2 of 2 bucket(s)", Status("tuned buckets", "2 of 2 bucket(s)")),
    ("tuned (source rewrite)", Status("tuned (source rewrite)")),
    ("something else", Status("FAILED", "unknown status 'something else' in an earlier report")),
])
def test_a_report_written_before_keeps_its_statuses(text, expected):
    """report.json of an earlier version held the shown text; --r3-kernels merges its rows."""
    assert KernelReport.from_dict({"kernel": "k", "target": "cpu", "status": text}).status \
        == expected

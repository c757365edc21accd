"""Which golden file a test compares with (``tests.helpers.golden_path``, ``assert_matches_golden``): this CPU
vendor's variant where it is recorded, else the plain file; a set recorded per vendor, on other vendors only, skips
with one line naming them and how to record this one; a set not recorded at all fails."""

from __future__ import annotations

import pandas as pd
import pytest

from tests import helpers

FRAME = pd.DataFrame({"claim": ["a", "b"], "p": [0.25, 0.0078125]})


@pytest.fixture
def golden(tmp_path, monkeypatch):
    """An empty golden folder on an AMD machine."""
    monkeypatch.setattr(helpers, "GOLDEN", tmp_path)
    monkeypatch.setattr(helpers, "cpu_vendor", lambda: "AuthenticAMD")
    monkeypatch.delenv("FAIRNAS_RECORD_GOLDEN", raising=False)
    return tmp_path


def record(path):
    path.write_text(FRAME.to_csv(index=False, lineterminator="\n"))


def test_this_vendors_variant_comes_before_the_plain_file(golden):
    record(golden / "set.csv")
    assert helpers.golden_path("set.csv") == golden / "set.csv"
    helpers.assert_matches_golden(FRAME, "set.csv")
    record(golden / "set.AuthenticAMD.csv")
    (golden / "set.csv").write_text("claim,p\nstale,1\n")  # another machine's plain recording: not read here
    assert helpers.golden_path("set.csv") == golden / "set.AuthenticAMD.csv"
    helpers.assert_matches_golden(FRAME, "set.csv")


def test_a_set_recorded_on_other_vendors_only_skips_naming_them_and_how_to_record_this_one(golden):
    record(golden / "set.GenuineIntel.csv")
    record(golden / "set.HygonGenuine.csv")
    assert helpers.recorded_vendors("set.csv") == ["GenuineIntel", "HygonGenuine"]
    assert helpers.golden_path("set.csv") == golden / "set.AuthenticAMD.csv"
    with pytest.raises(pytest.skip.Exception) as skipped:
        helpers.assert_matches_golden(FRAME, "set.csv")
    message = str(skipped.value)
    assert "\n" not in message and "GenuineIntel, HygonGenuine only, not AuthenticAMD" in message
    assert "FAIRNAS_RECORD_GOLDEN=1" in message and "tests/golden/set.AuthenticAMD.csv" in message


def test_recording_a_vendor_only_set_writes_this_vendors_variant(golden, monkeypatch):
    record(golden / "set.GenuineIntel.csv")
    monkeypatch.setenv("FAIRNAS_RECORD_GOLDEN", "1")
    helpers.assert_matches_golden(FRAME, "set.csv")
    assert not (golden / "set.csv").exists() and pd.read_csv(golden / "set.AuthenticAMD.csv").equals(FRAME)
    monkeypatch.delenv("FAIRNAS_RECORD_GOLDEN")
    helpers.assert_matches_golden(FRAME, "set.csv")


def test_a_set_not_recorded_at_all_fails_and_a_changed_one_names_its_columns(golden):
    record(golden / "other.GenuineIntel.csv")  # another set's variant does not count
    assert helpers.recorded_vendors("set.csv") == []
    with pytest.raises(AssertionError, match="no golden file .*set.csv: record it with FAIRNAS_RECORD_GOLDEN=1"):
        helpers.assert_matches_golden(FRAME, "set.csv")
    record(golden / "set.AuthenticAMD.csv")
    with pytest.raises(pytest.fail.Exception, match=r"differs from the golden set in \['p'\]"):
        helpers.assert_matches_golden(FRAME.assign(p=[0.25, 0.5]), "set.csv")

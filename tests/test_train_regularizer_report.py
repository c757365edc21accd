"""A regulariser reports what it regularises: ``regularizer=robustness_bias`` turns on the robustness-bias report
(``eval.robustness_bias``) unless the command switches it off."""

from __future__ import annotations

import json

from fairnas.training.run import train

CHEAP_REPORT = ("estimator@eval.robustness.estimator=linear", "eval.robustness.max_probes=12", "logger=none")


def test_robustness_bias_regularizer_reports_robustness_bias_on_val_and_test(tiny_config, tmp_path):
    train(tiny_config("regularizer=robustness_bias", *CHEAP_REPORT, output_dir=tmp_path / "run"))
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for stage in ("val", "test"):
        assert {"robustness_bias", "robustness_sigma/g0", "robustness_sigma/g1"} <= set(saved[stage])


def test_the_report_can_still_be_switched_off(tiny_config):
    assert tiny_config("regularizer=robustness_bias").eval.robustness_bias is True
    assert tiny_config("regularizer=robustness_bias", "eval.robustness_bias=false").eval.robustness_bias is False
    assert tiny_config().eval.robustness_bias is False

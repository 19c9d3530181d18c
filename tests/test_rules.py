"""Every parameter rule is written once (issue 19): the estimators' tables and the options'.

The same rule, from the same table, refuses a bad value in ``check_params`` (so in ``fit``), in
the command line's config check and in the solver settings, with the same message.
"""

import inspect

import pytest
from test_experiment import _compose

from dpp import params as check
from dpp.errors import ConfigError
from dpp.estimators import ESTIMATORS, POOLED_ESTIMATORS, DPPClassifierCV
from dpp.experiment.config_check import check_config
from dpp.experiment.runner import RUN_FIGURES, TRIAL_FIGURES
from dpp.experiment.tables import REPORTS
from dpp.solvers.lbfgs import LBFGSSettings
from dpp.solvers.minibatch import AdamSettings
from dpp.solvers.options import OPTIMIZERS, OPTION_RULES

CLASSES = [*ESTIMATORS.values(), *POOLED_ESTIMATORS.values(), DPPClassifierCV]


def _bad_value(rule):
    """A value that ``rule`` refuses."""
    rule = rule.rule if isinstance(rule, check.Optional | check.Literal) else rule
    if isinstance(rule, check.Int):
        return rule.low - 1
    if isinstance(rule, check.Real):
        return float("nan")
    if isinstance(rule, check.Bool):
        return "yes"
    return "no such choice"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_rule_names_a_parameter_and_refuses_a_bad_value(cls):
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    table = cls.PARAMETER_RULES
    assert set(table) <= params, sorted(set(table) - params)  # no rule for a parameter gone
    for name, rule in table.items():
        estimator = cls().set_params(**{name: _bad_value(rule)})
        with pytest.raises(ValueError, match=rf"^{name} must be"):
            estimator.check_params()


def test_the_config_check_reads_the_same_tables():
    figures = [*TRIAL_FIGURES, *RUN_FIGURES]
    cases = {
        "model.patience=0": "model.patience must be a positive integer, got 0",
        "optimizer.memory_size=0": "optimizer.memory_size must be a positive integer, got 0",
        "optimizer=adam optimizer.batch_size=0": "optimizer.batch_size must be a positive",
        "kmeans.solver=gpu": "kmeans.solver must be one of",
    }
    for overrides, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            check_config(_compose(overrides.split()), figures, REPORTS)


def test_solver_settings_and_options_share_their_rules():
    with pytest.raises(ValueError, match="max_iter must be a positive integer, got 0"):
        LBFGSSettings(max_iter=0)
    with pytest.raises(ValueError, match="learning_rate must be a finite number > 0"):
        AdamSettings(learning_rate=0.0)
    assert OPTION_RULES["theta_max_iter"] is LBFGSSettings.RULES["max_iter"]
    for options in OPTIMIZERS.values():
        assert set(options) <= set(OPTION_RULES)

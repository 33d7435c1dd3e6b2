"""Privacy-profile adapters (LeBlond et al. 2023) on the offline breast_cancer 2-feature view, end to end."""

import math

import numpy as np
import pytest

from dpaudit.io import read_json, read_parquet
from dpaudit.plots.profile import figure_ranks_vs_beta
from dpaudit.profile.study import read_thresholds
from tests.scripts.fake import FakeSnakemake, named, run_script
from tests.scripts.test_adapters import RUN_KEYS, RUNS, metric_files  # noqa: F401  (fixture)

VIEW = {"source": "breast_cancer", "columns": [0, 1], "first_rows": 60, "scale_on_subset": True, "figures": True}


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("profile")
    base = {"data": out / "data.parquet", "per_example": out / "per_example.parquet",
            "worst_case": out / "worst_case.parquet", "base": out / "base.json"}
    run_script("profile_base", FakeSnakemake("profile_base", output=base, params={"view": VIEW, "lam": 1.0},
                                             wildcards={"view": "bc_toy"}, log=[out / "base.log"]))
    shared = {"base": base["base"], "worst_case": base["worst_case"]}
    run_script("profile_exact", FakeSnakemake("profile_exact", input=shared, output=named([out / "exact.parquet"]),
                                              params={"view": VIEW, "lam": 1.0}, wildcards={"view": "bc_toy"},
                                              log=[out / "exact.log"]))
    run_script("profile_single", FakeSnakemake(
        "profile_single", input=shared, output=named([out / "single.parquet"]),
        params={"lam": 1.0, "log10_epsilon": 2.0, "seed": 0}, log=[out / "single.log"]))
    typical = {"typical": out / "typical.parquet", "per_neighbour": out / "per_neighbour.parquet",
               "thresholds": out / "thresholds.json", "metrics": out / "metrics.parquet"}
    run_script("profile_typical", FakeSnakemake(
        "profile_typical", input=shared, output=typical, wildcards={"view": "bc_toy"},
        params={"lam": 1.0, "log10_epsilons": [-1, -0.5, 0, 1, 2, 3, 4, 6], "draws": 50, "seed": 3},
        log=[out / "typical.log"]))
    # A grid that ends on the low plateau: ε_low and ε_high are NaN (thresholds.json stores them as "nan").
    short = out / "short"
    run_script("profile_typical", FakeSnakemake(
        "profile_typical", input=shared, output={k: short / v.name for k, v in typical.items()},
        wildcards={"view": "bc_toy"}, params={"lam": 1.0, "log10_epsilons": [-1, -0.5, 0, 0.5], "draws": 20, "seed": 3},
        log=[out / "typical_short.log"]))
    run_script("profile_samples", FakeSnakemake(
        "profile_samples", input=shared, output=named([out / "samples.parquet"]), wildcards={"view": "bc_toy"},
        params={"view": VIEW, "lam": 1.0, "seed": 0,
                "samples": {"log10_epsilons": [0, 2], "per_distribution": 3, "neighbours": 4}},
        log=[out / "samples.log"]))
    return out


def _figures(folder, numbers):
    return {**{f"fig{k}": folder / f"fig{k}.png" for k in numbers},
            **{f"fig{k}_pdf": folder / f"fig{k}.pdf" for k in numbers}}


def _assert_written(paths):
    magic = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-"}
    for path in paths.values():
        head = path.read_bytes()[:8]
        assert head.startswith(magic[path.suffix]) and path.stat().st_size > 1000, path


def test_profile_chain_writes_keyed_artifacts(profile_dir):
    base = read_json(profile_dir / "base.json")
    worst = read_parquet(profile_dir / "worst_case.parquet")
    assert base["n"] == 60 and base["lam"] == 1.0 and worst["row_id"].tolist() == list(range(1, 61))
    exact = read_parquet(profile_dir / "exact.parquet")
    # A_wc vs exact retraining: relative deviation of order ‖(1/n)Σ s(1−s)xxᵀ‖/Λ ≤ 1/4 (LeBlond et al. 2023, Eq. 22 and Sec. 5.1).
    assert 0 < exact["rel_dev"].max() < 0.25
    typical = read_parquet(profile_dir / "typical.parquet")
    assert {"eps", "beta", "K", "seed", "lam", "rank", "mean_abs_l_over_beta", "sorted_delta"} <= set(typical.columns)
    np.testing.assert_allclose(typical["beta"], 60 * 1.0 * typical["eps"] / 2)  # β = nΛε/2
    thresholds = read_json(profile_dir / "thresholds.json")
    assert thresholds["y_max_row_id"] == int(worst.loc[worst["delta_norm"].idxmax(), "row_id"])
    # Predictors ε(τ) = 2 t_2(τ)/(nΛδ_max), t_2(0.05) = 3.24 and t_2(0.95) = 109 (our reproduction, see profiles.REFERENCE_TRANSITION_T; 3 digits).
    assert thresholds["eps_low_predicted"] == pytest.approx(2 * 3.24 / (60 * thresholds["delta_max"]), rel=3e-3)
    assert thresholds["eps_high_predicted"] == pytest.approx(2 * 109 / (60 * thresholds["delta_max"]), rel=6e-3)
    single = read_parquet(profile_dir / "single.parquet")
    centre = single[single["M_id"] == "centre"].set_index("row_id")
    np.testing.assert_allclose(centre.loc[worst["row_id"], "abs_l"], centre["beta"].iloc[0] * worst["delta_norm"],
                               rtol=1e-12)  # M = A(x): |l_i| = βδ_i


def test_profile_rows_join_metrics_table_without_a_run(tmp_path, profile_dir, metric_files):  # noqa: F811
    paths, trains = metric_files
    fake = FakeSnakemake(
        "aggregate_metrics",
        input={"metrics": [str(p) for p in paths], "dataset_metrics": [str(profile_dir / "metrics.parquet")],
               "train": [str(p) for p in trains]},
        output={"table": tmp_path / "metrics.parquet", "runs": tmp_path / "runs.html"},
        params={"runs": RUNS, "run_keys": RUN_KEYS}, log=[tmp_path / "aggregate.log"],
    )
    run_script("aggregate_metrics", fake)
    table = read_parquet(tmp_path / "metrics.parquet")
    profile = table[table["family"] == "profile"]
    assert set(profile["metric"]) == {"epsilon_low", "epsilon_low_predicted", "epsilon_high",
                                      "epsilon_high_predicted", "beta_star", "delta_max", "t_d"}
    assert sorted(profile.loc[profile["metric"] == "t_d", "tau"]) == [0.05, 0.5, 0.95]
    assert profile["run"].isna().all() and set(profile["dataset"]) == {"breast_cancer"}
    assert set(profile["view"]) == {"bc_toy"}
    per_run = table[table["family"] != "profile"]
    assert per_run["run"].notna().all() and per_run["mechanism"].notna().all()
    assert per_run.drop_duplicates("run").set_index("mechanism").loc["baseline", "accountant_epsilon"] == math.inf


@pytest.mark.parametrize("case", ["reached", "short"])
def test_plot_profile_writes_figs_2_to_7(profile_dir, case):
    folder = profile_dir if case == "reached" else profile_dir / "short"
    outputs = _figures(profile_dir / "figures" / case, range(2, 8))
    inputs = {"base": profile_dir / "base.json", "worst_case": profile_dir / "worst_case.parquet",
              "exact": profile_dir / "exact.parquet", "single": profile_dir / "single.parquet",
              "typical": folder / "typical.parquet", "per_neighbour": folder / "per_neighbour.parquet",
              "thresholds": folder / "thresholds.json"}
    run_script("plot_profile", FakeSnakemake("plot_profile", input=inputs, output=outputs,
                                             log=[profile_dir / f"plot_{case}.log"]))
    _assert_written(outputs)
    thresholds = read_thresholds(inputs["thresholds"])
    legend = [t.get_text() for t in figure_ranks_vs_beta(read_parquet(inputs["typical"]), thresholds).axes[0]
              .get_legend().get_texts()]
    if case == "short":
        # The grid ends at ε = 10^0.5, t = βδ_max ≈ 0.8 < t₂(0.05) = 3.24: no rank has left its low plateau.
        for key, name in (("eps_low", "ε_low"), ("eps_high", "ε_high")):
            assert read_json(inputs["thresholds"])[key] == "nan" and math.isnan(thresholds[key])
            assert any(text.startswith(f"measured {name}: not reached\non this ε grid") for text in legend)
    else:
        assert all(math.isfinite(thresholds[k]) for k in ("eps_low", "eps_high"))
        assert not any("not reached" in text for text in legend)


def test_plot_profile_samples_writes_figs_1_and_8(profile_dir):
    samples = read_parquet(profile_dir / "samples.parquet")
    # 2 ε × 2 mechanisms × (A(x) + 4 neighbours) × 3 samples, neighbours = the view's first 4 rows.
    assert len(samples) == 2 * 2 * 5 * 3
    assert sorted(samples["neighbor_row_id"].unique()) == [0, 1, 2, 3, 4]
    outputs = _figures(profile_dir / "figures" / "samples", (1, 8))
    run_script("plot_profile_samples", FakeSnakemake("plot_profile_samples",
                                                     input=named([profile_dir / "samples.parquet"]),
                                                     output=outputs, log=[profile_dir / "plot_samples.log"]))
    _assert_written(outputs)

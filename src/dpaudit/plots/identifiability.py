"""Figures 1–9 and both tables of Bernau et al. 2021 (identifiability).

Figures 1–3 are analytic; 4–9 read the audit tables (``audit_summary``,
``audit_runs``, ``audit_steps``, the dataset-sensitivity tables). Every figure is a
PNG and a PDF (TrueType fonts), built on ``Figure`` + Agg (no pyplot state).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy import special

from dpaudit.dp.hypothesis import max_advantage
from dpaudit.io import atomic_path, write_bytes
from dpaudit.metrics import identifiability as idf
from dpaudit.plots.text import number

CONFIG_STYLE = {  # (neighbourhood, mode) → label, colour
    ("bounded", "ls"): ("LS-B", "tab:red"),
    ("bounded", "gs"): ("GS-B", "tab:blue"),
    ("unbounded", "ls"): ("LS-U", "tab:orange"),
    ("unbounded", "gs"): ("GS-U", "tab:cyan"),
}


def _figure(width=6.4, height=4.0, **kwargs) -> Figure:
    fig = Figure(figsize=(width, height), **kwargs)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, png, pdf) -> None:
    fig.tight_layout()
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):
        with atomic_path(png, suffix=".png") as tmp:
            fig.savefig(tmp, dpi=130)
        with atomic_path(pdf, suffix=".pdf") as tmp:
            fig.savefig(tmp)


def _sigma(eps: float, delta: float) -> float:
    return math.sqrt(2.0 * math.log(1.25 / delta)) / eps


# N(loc, scale²)'s density and log-density as scipy.stats.norm computes them (its _norm_pdf and
# _norm_logpdf on (x − loc)/scale, then ÷ scale or − log scale), equal bit for bit (checked with
# np.array_equal on these figures' grids); scipy.stats itself costs ~0.5 s to import (issue 36).
_NORM_PDF_C = np.sqrt(2 * np.pi)


def _norm_pdf(x, loc: float, scale: float) -> np.ndarray:
    z = (np.asarray(x, dtype=np.float64) - loc) / scale
    return np.exp(-z**2 / 2.0) / _NORM_PDF_C / scale


def _norm_logpdf(x, loc: float, scale: float) -> np.ndarray:
    z = (np.asarray(x, dtype=np.float64) - loc) / scale
    return -z**2 / 2.0 - np.log(_NORM_PDF_C) - np.log(scale)


# ----------------------------------------------------------- analytic (Figs. 1–3)


def figure_1(png, pdf, delta: float = 1e-6, eps_values=(6.0, 3.0)) -> None:
    """(a) output densities of f(D) = 0 and f(D′) = 1 under the Gaussian mechanism;
    (b) the adversary's beliefs as a function of the released value."""
    fig = _figure(10, 3.8)
    ax_pdf, ax_belief = fig.subplots(1, 2)
    r = np.linspace(-4, 4, 801)
    ax_pdf.axvspan(-4, 0.5, color="tab:green", alpha=0.08, lw=0)
    ax_pdf.axvspan(0.5, 4, color="tab:purple", alpha=0.08, lw=0)
    ax_pdf.axvline(0.5, color="grey", lw=0.8)
    for eps, style in zip(eps_values, ("-", "--"), strict=True):
        s = _sigma(eps, delta)
        ax_pdf.plot(r, _norm_pdf(r, 0, s), style, color="tab:green", label=f"D, ε = {eps:g} (σ = {s:.3f})")
        ax_pdf.plot(r, _norm_pdf(r, 1, s), style, color="tab:purple", label=f"D′, ε = {eps:g}")
    ax_pdf.set(xlabel="released value r", ylabel="density", title=f"(a) Gaussian mechanism, Δf = 1, δ = {number(delta)}")
    ax_pdf.legend(fontsize=7, loc="upper left")
    r = np.linspace(-10, 10, 801)
    for eps, style in zip(eps_values, ("-", "--"), strict=True):
        s = _sigma(eps, delta)
        log_odds = (_norm_logpdf(r, 0, s) - _norm_logpdf(r, 1, s))
        ax_belief.plot(r, idf.belief(log_odds), style, color="tab:green", label=f"β(D), ε = {eps:g}")
        ax_belief.plot(r, idf.belief(-log_odds), style, color="tab:purple", label=f"β(D′), ε = {eps:g}")
    ax_belief.set(xlabel="released value r", ylabel="posterior belief", ylim=(0, 1), title="(b) beliefs")
    ax_belief.legend(fontsize=7, loc="center right")
    _save(fig, png, pdf)


def figure_2(png, pdf, delta: float = 1e-6, eps_values=(6.0, 3.0)) -> None:
    """Error regions of the Bayes-optimal decision (threshold r = ½) for two ε."""
    fig = _figure(10, 3.6)
    r = np.linspace(-4, 5, 901)
    for ax, eps, tag in zip(fig.subplots(1, 2), eps_values, ("a", "b"), strict=True):
        s = _sigma(eps, delta)
        p0, p1 = _norm_pdf(r, 0, s), _norm_pdf(r, 1, s)
        ax.plot(r, p0, color="tab:green", label="f(D) = 0")
        ax.plot(r, p1, color="tab:purple", label="f(D′) = 1")
        ax.fill_between(r, 0, p0, where=r > 0.5, color="tab:green", alpha=0.3, hatch="//", label="error under D")
        ax.fill_between(r, 0, p1, where=r < 0.5, color="tab:purple", alpha=0.3, hatch="\\\\", label="error under D′")
        ax.axvline(0.5, color="grey", lw=0.8)
        success = special.ndtr(1 / (2 * s))
        ax.set(xlabel="released value r", ylabel="density",
               title=f"({tag}) ε = {eps:g}: success {success:.3f}, $\\rho_\\alpha$ = {2 * success - 1:.3f}")
        ax.legend(fontsize=7, loc="upper right")
    _save(fig, png, pdf)


def figure_3(png, pdf) -> None:
    """(a) δ-adjusted ρ_β(ε) and (b) ρ_α(ε, δ) by Theorem 2, with Yeom's bound."""
    fig = _figure(10, 3.8)
    ax_b, ax_a = fig.subplots(1, 2)
    eps = np.logspace(-3, 1, 400)
    for delta in (1e-1, 1e-2, 1e-4, 1e-6, 1e-10, 0.0):
        ax_b.plot(eps, idf.rho_beta_expected(eps, delta), label=f"δ = {number(delta)}")
    ax_b.set(xscale="log", xlabel="ε", ylabel="$\\rho_\\beta$ + δ(1 − $\\rho_\\beta$)", title="(a) maximum posterior belief", ylim=(0.45, 1.02))
    ax_b.legend(fontsize=7, loc="upper left")
    eps = np.logspace(-3, 2, 400)
    for delta in (1e-1, 1e-2, 1e-4, 1e-6, 1e-10, 1e-20):
        ax_a.plot(eps, idf.rho_alpha_thm2(eps, delta), label=f"δ = {number(delta)}")
    ax_a.plot(eps, idf.yeom_bound(eps), ":", color="black", label=r"Yeom $\min(1,\, e^{\varepsilon} - 1)$")
    ax_a.set(xscale="log", xlabel="ε", ylabel="$\\rho_\\alpha$", title="(b) expected advantage (Theorem 2)", ylim=(-0.02, 1.02))
    ax_a.legend(fontsize=7, loc="upper left")
    _save(fig, png, pdf)


# ------------------------------------------------------------ audit (Figs. 4–9)


def _label(neighbourhood, mode):
    return CONFIG_STYLE.get((neighbourhood, mode), (f"{mode}-{neighbourhood}", "grey"))


def _empty(ax, text):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def figure_4(steps: pd.DataFrame, png, pdf, rho: float = 0.9) -> None:
    """Per-step LS_t of the bounded LS runs at ρ_β = ``rho`` (else the largest target),
    one box per dataset-sensitivity pair: max-dissimilar pairs should give larger LS."""
    datasets = sorted(steps["dataset"].unique())
    fig = _figure(4.2 * len(datasets), 3.8)
    axes = np.atleast_1d(fig.subplots(1, len(datasets), squeeze=False)[0])
    for ax, dataset in zip(axes, datasets, strict=True):
        sub = steps[(steps["dataset"] == dataset) & (steps["neighbourhood"] == "bounded") & (steps["sens_mode"] == "ls")]
        if sub.empty:
            _empty(ax, f"{dataset}: no bounded LS runs")
            continue
        target = rho if (sub["rho_target"] == rho).any() else sub["rho_target"].max()
        sub = sub[sub["rho_target"] == target]
        pairs = sorted(sub["pair"].unique(), key=lambda p: (not p.startswith("max"), p))
        ax.boxplot([sub.loc[sub["pair"] == p, "ls_t"].to_numpy() for p in pairs], tick_labels=pairs)
        ax.axhline(2 * sub["gs"].iloc[0] / 2, color="grey", ls=":", lw=0.8, label="GS = 2C")
        ax.set(title=f"{dataset} ($\\rho_\\beta$ = {target:g})", xlabel="dataset-sensitivity pair", ylabel="local sensitivity $LS_t$")
        ax.legend(fontsize=7, loc="lower right")
    _save(fig, png, pdf)


def figure_5(steps: pd.DataFrame, png, pdf, rho: float = 0.9) -> None:
    """Quantile plot of LS_t (LS runs) for bounded and unbounded neighbours, with C and 2C."""
    datasets = sorted(steps["dataset"].unique())
    fig = _figure(4.2 * len(datasets), 3.8)
    axes = np.atleast_1d(fig.subplots(1, len(datasets), squeeze=False)[0])
    for ax, dataset in zip(axes, datasets, strict=True):
        sub = steps[(steps["dataset"] == dataset) & (steps["sens_mode"] == "ls")]
        if sub.empty:
            _empty(ax, f"{dataset}: no LS runs")
            continue
        target = rho if (sub["rho_target"] == rho).any() else sub["rho_target"].max()
        sub = sub[(sub["rho_target"] == target) & sub["pair"].isin(["max1", "explicit"])]
        clip = sub["gs"].max() / (2 if (sub["neighbourhood"] == "bounded").any() else 1)
        for neighbourhood, style, colour in (("bounded", "-", "tab:red"), ("unbounded", "--", "tab:blue")):
            ls = np.sort(sub.loc[sub["neighbourhood"] == neighbourhood, "ls_t"].to_numpy())
            if ls.size:
                ax.plot(np.linspace(0, 1, ls.size), ls, style, color=colour, label=f"{neighbourhood} ({ls.size} steps)")
        ax.axhline(clip, color="grey", ls=":", lw=0.8)
        ax.axhline(2 * clip, color="grey", ls="-.", lw=0.8)
        ax.text(0.01, clip, " C (U)", va="bottom", fontsize=7, transform=ax.get_yaxis_transform())
        ax.text(0.01, 2 * clip, " 2C (B)", va="bottom", fontsize=7, transform=ax.get_yaxis_transform())
        ax.set(title=f"{dataset} ($\\rho_\\beta$ = {target:g})", xlabel="quantile F", ylabel="$LS_t$", ylim=(0, 2 * clip * 1.08))
        ax.legend(fontsize=7, loc="lower right")
    _save(fig, png, pdf)


def figure_6(runs: pd.DataFrame, png, pdf, rho: float = 0.9) -> None:
    """Final beliefs in the true dataset (D, or D′ in the runs a fair coin trained on
    it) per configuration (dashed: the target ρ_β) and test accuracy."""
    datasets = sorted(runs["dataset"].unique())
    fig = _figure(4.2 * len(datasets), 6.4)
    axes = fig.subplots(2, len(datasets), squeeze=False)
    for col, dataset in enumerate(datasets):
        sub = runs[(runs["dataset"] == dataset) & runs["pair"].isin(["max1", "explicit"])]
        target = rho if (sub["rho_target"] == rho).any() else sub["rho_target"].max()
        sub = sub[sub["rho_target"] == target]
        groups = [(key, g) for key, g in sub.groupby(["neighbourhood", "sens_mode"])]
        labels = [_label(*key)[0] for key, _ in groups]
        top, bottom = axes[0, col], axes[1, col]
        if not groups:
            _empty(top, f"{dataset}: no runs at $\\rho_\\beta$ = {rho:g}")
            _empty(bottom, "")
            continue
        top.boxplot([idf.belief_in_true_dataset(g["final_logodds"], g["b_true"]) for _, g in groups],
                    tick_labels=labels)
        top.axhline(target, color="black", ls="--", lw=0.8, label=f"$\\rho_\\beta$ = {target:g}")
        top.set(title=f"{dataset}: final belief in the true dataset", ylabel="β_k(true dataset)")
        top.legend(fontsize=7, loc="lower left")
        bottom.boxplot([g["test_acc"].to_numpy() for _, g in groups], tick_labels=labels)
        bottom.set(title=f"{dataset}: test accuracy", ylabel="accuracy")
    _save(fig, png, pdf)


def figure_audit(summary: pd.DataFrame, dataset: str, png, pdf, neighbourhood: str = "bounded") -> None:
    """Figs. 7–9 for one dataset: ε′ from sensitivities, from the maximum belief, from the
    advantage, and the advantage itself against its bounds, over the target ε."""
    sub = summary[(summary["dataset"] == dataset) & (summary["neighbourhood"] == neighbourhood)
                  & summary["pair"].isin(["max1", "explicit"])].sort_values("eps_target")
    fig = _figure(11, 8)
    axes = fig.subplots(2, 2).ravel()
    if sub.empty:
        for ax in axes:
            _empty(ax, f"{dataset}: no {neighbourhood} audit runs")
        _save(fig, png, pdf)
        return
    eps = np.sort(sub["eps_target"].unique())
    # Bounds as curves over the whole range, so a single target still shows them.
    grid = np.linspace(0.0, 1.15 * eps.max() + 0.1, 200)
    panels = (
        ("eps_prime_sens_max", "(a) ε′ from sensitivities (max over runs)"),
        ("eps_prime_belief", "(b) ε′ = logit(max belief)"),
        ("eps_prime_adv", "(c) ε′ from the advantage (inverse Thm. 2, clamped at 0)"),
    )
    for ax, (column, title) in zip(axes[:3], panels, strict=True):
        ax.plot(grid, grid, color="tab:green", lw=1, label="bound ε′ = ε")
        for mode, g in sub.groupby("sens_mode"):
            label, colour = _label(neighbourhood, mode)
            ax.plot(g["eps_target"], g[column], "o-", color=colour, label=label)
            if column == "eps_prime_adv":
                flagged = g[g["eps_prime_adv_clamped"]]
                ax.plot(flagged["eps_target"], flagged[column], "x", color="black", ms=8,
                        label="clamped (advantage ≤ 0)" if mode == "ls" else None)
        ax.set(title=title, xlabel="target ε", ylabel="ε′", xlim=(0, grid[-1]), ylim=(0, None))
        ax.legend(fontsize=7, loc="upper left")
    ax = axes[3]
    ax.plot(grid, idf.rho_alpha_thm2(grid, sub["delta"].iloc[0]), color="tab:green",
            label="$\\rho_\\alpha$ (Thm. 2): classically calibrated Gaussian")
    ax.plot(grid, max_advantage(grid, float(sub["delta"].iloc[0])), "-.", color="grey",
            label="bound of any (ε, δ)-DP mechanism")
    k, delta, conversion = int(sub["k"].iloc[0]), float(sub["delta"].iloc[0]), sub["conversion"].iloc[0]
    ax.plot(grid, [_rdp_advantage(e, k, delta, conversion) for e in grid],
            "--", color="tab:green", lw=0.8, label="$\\rho_\\alpha$ by RDP, 2Φ(√k/(2z)) − 1")
    ax.plot(grid, idf.yeom_bound(grid), color="tab:orange", label=r"Yeom $\min(1,\, e^{\varepsilon} - 1)$")
    for mode, g in sub.groupby("sens_mode"):
        label, colour = _label(neighbourhood, mode)
        ax.errorbar(g["eps_target"], g["adv_empirical"],
                    yerr=[g["adv_empirical"] - g["adv_ci_low"], g["adv_ci_high"] - g["adv_empirical"]],
                    fmt="o-", color=colour, capsize=3, label=f"{label} (CP {1 - g['alpha'].iloc[0]:.0%})")
        ax.plot(g["eps_target"], g["mi_adv_mean"], "s:", color="tab:purple",
                label="MI (Yeom threshold)" if mode == "ls" else None)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set(title="(d) advantage", xlabel="target ε", ylabel="advantage", ylim=(-0.3, 1.05), xlim=(0, grid[-1]))
    ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{dataset}: DI audit, {neighbourhood} neighbours, δ = {number(float(sub['delta'].iloc[0]))}")
    _save(fig, png, pdf)


def _rdp_advantage(eps: float, k: int, delta: float, conversion: str) -> float:
    """2Φ(√k/(2z)) − 1 for the z that reaches ε; NaN where no z in the authors'
    bracket does (the legacy order grid cannot reach very small ε)."""
    if eps <= 0:
        return 0.0
    try:
        z = idf.noise_multiplier_for_rho_beta(float(idf.rho_beta(eps)), k, delta, conversion, xtol=1e-6)
    except ValueError:
        return math.nan
    return float(idf.rho_alpha_rdp(k, z))


# -------------------------------------------------------------------- tables


def parameter_table(datasets: Mapping[str, Mapping], steps: int, conversion: str) -> pd.DataFrame:
    """The paper's parameter table for the configured datasets (plus z and RDP ρ_α)."""
    rows = []
    for dataset, options in datasets.items():
        for rho in options["rho_beta"]:
            eps = idf.epsilon_from_rho_beta(rho)
            z = idf.noise_multiplier_for_rho_beta(rho, steps, options["delta"], conversion)
            rows.append({"dataset": dataset, "rho_beta": rho, "delta": options["delta"], "epsilon": eps,
                         "rho_alpha_thm2": idf.rho_alpha_thm2(eps, options["delta"]),
                         "noise_multiplier": z, "rho_alpha_rdp": idf.rho_alpha_rdp(steps, z),
                         "k": steps, "conversion": conversion})
    return pd.DataFrame(rows)


def success_table(summary: pd.DataFrame, rhos) -> pd.DataFrame:
    """Empirical advantage / δ′ per configuration at each configured target ρ_β in
    ``rhos`` (the paper's table is the ρ_β = 0.9 block), with the bounds and the health
    checks next to them. A target without any configuration in ``summary`` is refused."""
    rhos = sorted({float(rho) for rho in rhos})
    missing = [rho for rho in rhos if not (summary["rho_target"] == rho).any()]
    if missing:
        raise ValueError(f"no audit configuration at rho_beta {missing} in the summary "
                         f"(it has {sorted(summary['rho_target'].unique())})")
    sub = summary[summary["rho_target"].isin(rhos)]
    columns = ["rho_target", "dataset", "neighbourhood", "sens_mode", "pair", "runs", "adv_empirical", "adv_ci_low",
               "adv_ci_high", "rho_alpha_thm2", "rho_alpha_rdp", "rho_alpha_predicted", "delta_prime",
               "delta", "predicted_delta_prime", "max_belief", "eps_prime_sens_max", "eps_prime_belief",
               "eps_prime_adv", "eps_prime_adv_clamped", "mi_adv_mean", "eta_ks_pvalue", "eta_ks_pvalue_bonferroni",
               "ls_max", "ls_bound",
               "ls_violations"]
    return sub[columns].sort_values(["rho_target", "dataset", "neighbourhood", "sens_mode", "pair"])


MISSING = "—"  # as in the runs table and the budget ledger


def _cell(value) -> str:
    """4 significant digits; ∞ and "—" (missing) printed as every report table prints them."""
    if pd.isna(value):
        return MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.4g}"


def tables_html(parameters: pd.DataFrame, success: pd.DataFrame, summary: pd.DataFrame) -> str:
    def fmt(frame):
        shown = frame.copy()
        for column in shown.select_dtypes("number").columns:
            shown[column] = shown[column].map(_cell)
        return shown.to_html(index=False, border=0, na_rep=MISSING)

    health = summary[(summary["ls_violations"] > 0) | summary["eta_ks_failed"]]
    tested = int(summary["eta_ks_configurations"].max()) if len(summary) else 0
    ks_rule = (f"KS p-value of η_t ~ N(0, 1), Bonferroni-adjusted over the {tested} configurations (raw p-value "
               f"shown too), against the family-wise level {idf.ETA_KS_LEVEL:g}")
    warning = ("<p><b>Health check failures</b> (LS above its global bound, or η_t not N(0, 1): "
               f"{ks_rule}):</p>"
               + fmt(health[["dataset", "config", "ls_max", "ls_bound", "ls_violations", "eta_ks_pvalue",
                             "eta_ks_pvalue_bonferroni"]])
               if len(health) else "<p>Health checks: every configuration has LS_t within its global bound "
               f"and η_t consistent with N(0, 1) ({ks_rule}).</p>")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>identifiability audit</title>"
        "<style>table{border-collapse:collapse;font:12px sans-serif}td,th{padding:2px 6px;"
        "border-bottom:1px solid #ddd;text-align:right}</style></head><body>"
        "<h3>Experiment parameters (Bernau et al. 2021)</h3>" + fmt(parameters)
        + "<h3>Empirical success at each configured ρ<sub>β</sub> (the paper's table: ρ<sub>β</sub> = 0.9)</h3>"
        + fmt(success) + warning
        + "<h3>All configurations</h3>" + fmt(summary) + "</body></html>\n"
    )


def write_tables(parameters, success, summary, html_path) -> None:
    write_bytes(Path(html_path), tables_html(parameters, success, summary).encode())

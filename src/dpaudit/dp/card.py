"""Privacy card per trained model (Geambasu's DP lecture: what a given (ε, δ) means for an attacker): the theory of its (ε, δ) next to the
measured attack, and what DP does and does not promise, in plain words.

``privacy_card`` returns a ``PrivacyCard``: a flat dict row (for a Parquet table
of all cards), a Markdown snippet and an HTML snippet; optionally it writes the
attack ROC with the DP region overlaid as a PNG. The figure is the slow part
(~tens of ms), so it is optional and ``CardFigureRenderer`` reuses one matplotlib
figure across cards.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpaudit.dp.hypothesis import (
    max_advantage,
    max_attack_accuracy,
    roc_inside_dp_region,
    tpr_bound,
)
from dpaudit.dp.ledger import normalise_relation, parse_float
from dpaudit.dp.roc import RocCurve, roc_auc, tpr_at_fpr

__all__ = [
    "CardFigureRenderer",
    "PrivacyCard",
    "plain_language",
    "privacy_card",
    "privacy_card_from_info",
    "roc_inside_dp_region",
]

CARD_FPRS = (1e-3, 1e-2)


@dataclass
class PrivacyCard:
    row: dict
    markdown: str
    html: str
    figure_path: str | None


# What any (ε, δ) guarantee of a trained model covers and what it does not (the card and
# the dossier, dpaudit.report.dossier, say it in the same words).
GUARANTEE_SCOPE = (
    "It does not promise that nothing can be learned about you: conclusions drawn from "
    "population-level patterns (the model learning that smoking causes cancer, say) are "
    "allowed and may still affect you. It protects one example, not a user who owns "
    "several (unless accounted at user level), only under the stated neighbouring "
    "relation and sampling assumptions, and only for what is computed from the released "
    "model: anything that reads the training data again spends more budget."
)


def plain_language(eps: float, delta: float, relation: str | None = None) -> str:
    """What this (ε, δ) promises and what it does not, for a non-specialist.

    ``relation`` (the ledger's name) says what one neighbouring change is:
    replace_one = replacing one example by another; otherwise adding or removing one.
    """
    if math.isinf(eps):
        return (
            "This model was trained without differential privacy (ε = ∞). Nothing bounds how "
            "much it reveals about any training example: a membership-inference attack may "
            "succeed as well as the model's memorisation allows, and the measured attack "
            "below is only a lower bound on what a stronger attacker could do."
        )
    acc = max_attack_accuracy(eps, delta)
    change = ("replacing any one training example by another" if relation == "replace_one"
              else "adding or removing any one training example")
    return (
        f"Differential privacy with ε = {eps:.3g} and δ = {delta:.2g} means that {change} "
        f"changes the probability of any outcome of "
        f"training by at most a factor e^ε = {math.exp(eps):.3g}, except with probability δ. "
        f"So no attacker, whatever they already know, can tell whether a given example was "
        f"used with accuracy above {acc:.3f} (50% is guessing)"
        + (" — at this ε that bound is close to 1, so it protects little. " if eps > 8 else ". ")
        + GUARANTEE_SCOPE
    )


class CardFigureRenderer:
    """Draws card ROC figures (log-log ROC, DP region shaded) fast, by blitting.

    Axes, ticks, labels and legend are rasterised once into a background; each
    card restores it, draws only its three data artists and its title, and writes
    the pixel buffer as PNG with Pillow. Rebuilding a log-scale figure per card
    cost ~0.3 s; this costs a few ms, which is what makes cards for a 1,000-run
    grid affordable.
    """

    def __init__(self, size=(6.0, 4.8), dpi=110, fpr_min=1e-4, n_grid=200):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

        self.fig = Figure(figsize=size, dpi=dpi)
        self.canvas = FigureCanvasAgg(self.fig)
        ax = self.fig.add_axes((0.2, 0.14, 0.75, 0.76))
        self.ax = ax
        self.grid = np.logspace(math.log10(fpr_min), 0, n_grid)
        self.fpr_min = fpr_min
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(fpr_min, 1)
        ax.set_ylim(fpr_min, 1.05)
        exps = np.arange(math.floor(math.log10(fpr_min)), 1)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(FixedLocator(10.0 ** exps))
            axis.set_major_formatter(FixedFormatter([f"1e{e}" if e else "1" for e in exps]))
            axis.set_minor_locator(NullLocator())
            axis.set_tick_params(labelsize=10)
        ax.plot(self.grid, self.grid, color="grey", linestyle=":", linewidth=1, label="chance")
        ax.plot([], [], color="tab:blue", linewidth=1.2, label="(ε, δ)-DP bound")
        ax.plot([], [], color="black", linewidth=1.5, label="attack ROC")
        ax.set_xlabel("false positive rate (non-members flagged)", fontsize=11)
        ax.set_ylabel("true positive rate (members flagged)", fontsize=11)
        ax.legend(fontsize=10, loc="lower right")
        # Dynamic artists are animated: excluded from the background, drawn per card.
        self.region = ax.fill_between(self.grid, self.grid, self.grid, color="tab:blue",
                                      alpha=0.15, linewidth=0, animated=True)
        (self.bound,) = ax.plot(self.grid, self.grid, color="tab:blue", linewidth=1.2,
                                animated=True)
        (self.roc,) = ax.plot([], [], color="black", linewidth=1.5, animated=True)
        self.title = self.fig.text(0.5, 0.95, "", ha="center", va="center", fontsize=11,
                                   animated=True)
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.fig.bbox)

    def render(self, path, eps, delta, fpr=None, tpr=None, title=None) -> str:
        from PIL import Image

        from dpaudit.io import atomic_path

        g = self.grid
        if math.isinf(eps):
            upper = np.ones_like(g)
            lower = np.full_like(g, self.fpr_min)
        else:
            upper = tpr_bound(g, eps, delta)
            lower = np.maximum(1.0 - tpr_bound(1.0 - g, eps, delta), self.fpr_min)
        self.region.set_verts([np.column_stack([np.r_[g, g[::-1]], np.r_[upper, lower[::-1]]])])
        self.bound.set_data(g, upper)
        if fpr is not None and tpr is not None:
            f = np.asarray(fpr, dtype=np.float64)
            t = np.asarray(tpr, dtype=np.float64)
            keep = (f > 0) & (t > 0)  # log axes cannot show zeros
            self.roc.set_data(f[keep], t[keep])
        else:
            self.roc.set_data([], [])
        # Short on purpose: glyph rendering is a visible share of the per-card cost,
        # and the card's own heading names the run.
        eps_text = "∞" if math.isinf(eps) else f"{eps:.3g}"
        if title is not None:
            self.title.set_text(f"{title}: ε = {eps_text}")
        elif math.isinf(eps):  # no guarantee, so no δ: the whole square is allowed
            self.title.set_text("ε = ∞ (no DP): every ROC is allowed")
        else:
            self.title.set_text(f"ε = {eps_text}, δ = {delta:.2g}")
        self.canvas.restore_region(self.background)
        for artist in (self.region, self.bound, self.roc):
            self.ax.draw_artist(artist)
        self.fig.draw_artist(self.title)
        # The canvas is opaque, so dropping alpha loses nothing and encodes ~20% faster.
        rgb = np.ascontiguousarray(np.asarray(self.canvas.buffer_rgba())[:, :, :3])
        image = Image.fromarray(rgb)
        path = Path(path)
        with atomic_path(path, suffix=".png") as tmp:
            image.save(tmp, format="PNG", compress_level=1)
        return str(path)


def _fmt(v, spec=".4g"):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float | int | np.floating | np.integer):
        v = float(v)
        if math.isnan(v):
            return "—"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        return format(v, spec)
    return str(v)


def privacy_card(run: str, eps, delta, *, dataset: str | None = None,
                 mechanism: str | None = None, accountant: str | None = None,
                 neighbouring_relation: str | None = None, unit_of_protection: str | None = None,
                 sampling: str | None = None, roc: RocCurve | None = None,
                 eps_lower_bound: float | None = None, generalization_gap: float | None = None,
                 utility: float | None = None, utility_name: str = "accuracy",
                 figure_path: str | os.PathLike | None = None, alpha: float = 0.05,
                 renderer: CardFigureRenderer | None = None) -> PrivacyCard:
    """Build the privacy card of one model.

    Theory (from eps, delta; eps = inf or 'inf' for a non-private model): e^ε,
    max attack accuracy and advantage bounds, TPR bounds at the FPRs of ``CARD_FPRS``.
    Measurement (all optional, passed in): the attack ROC (``roc``, a
    ``dpaudit.dp.roc.RocCurve``: its TPR at ``CARD_FPRS`` and AUC are the mia
    family's functions, its counts feed the sampling-error check
    ``roc_inside_dp_region`` and the ε lower bound when ``eps_lower_bound`` is not
    given), generalization gap, utility.
    ``figure_path``: write the ROC/DP-region PNG there (None: no figure).

    Row keys (names as in dpaudit.contract.metrics where the card writes them as
    metrics; ``*_at_fpr`` values are dicts FPR -> value): dataset, run, mechanism,
    epsilon, delta, exp_epsilon, max_attack_accuracy_bound, max_advantage_bound,
    tpr_bound_at_fpr, attack_tpr_at_fpr, attack_auc, dp_region_epsilon_lower_bound,
    lower_bound_exceeds_epsilon, roc_inside_dp_region, roc_violations,
    generalization_gap, utility, utility_name, accountant, neighbouring_relation,
    unit_of_protection, sampling, figure.
    """
    eps = parse_float(eps)
    delta = parse_float(delta, default=0.0)
    if math.isnan(eps) or eps < 0:
        raise ValueError(f"epsilon must be >= 0 or inf, got {eps}")
    if math.isnan(delta):
        delta = 0.0
    row = {
        "dataset": dataset,
        "run": str(run),
        "mechanism": mechanism,
        "epsilon": eps,
        "delta": delta,
        "exp_epsilon": math.exp(eps) if eps < 709 else math.inf,
        "max_attack_accuracy_bound": max_attack_accuracy(eps, delta),
        "max_advantage_bound": max_advantage(eps, delta),
        "tpr_bound_at_fpr": {target: tpr_bound(target, eps, delta) for target in CARD_FPRS},
    }
    f = t = None
    inside = None
    n_viol = None
    if roc is not None:
        # The ROC points past flag-nobody (FPR = TPR = 0), as the DP-region test and the figure take them.
        f, t = roc.fpr[1:], roc.tpr[1:]
        row["attack_tpr_at_fpr"] = {target: point.tpr for target, point in tpr_at_fpr(roc, CARD_FPRS).items()}
        row["attack_auc"] = roc_auc(roc)
        check = roc_inside_dp_region(f, t, eps, delta, roc.n_members, roc.n_nonmembers, alpha)
        inside, n_viol = check["inside"], check["n_violations"]
        if eps_lower_bound is None:
            eps_lower_bound = check["eps_lower_bound"]
    else:
        row["attack_tpr_at_fpr"] = dict.fromkeys(CARD_FPRS, math.nan)
        row["attack_auc"] = math.nan
    lb = math.nan if eps_lower_bound is None else float(eps_lower_bound)
    # Named apart from the mia family's certified split-half bound
    # (``epsilon_lower_bound``): this one is the DP-region test's, Bonferroni over
    # every ROC point. Both come from dpaudit.dp.hypothesis.
    row["dp_region_epsilon_lower_bound"] = lb
    # A measured lower bound above the accountant's ε means a bug or a wrong assumption.
    row["lower_bound_exceeds_epsilon"] = bool(lb > eps) if not math.isnan(lb) else None
    row["roc_inside_dp_region"] = inside
    row["roc_violations"] = n_viol
    row["generalization_gap"] = math.nan if generalization_gap is None else float(generalization_gap)
    row["utility"] = math.nan if utility is None else float(utility)
    row["utility_name"] = utility_name
    row["accountant"] = accountant
    row["neighbouring_relation"] = neighbouring_relation
    row["unit_of_protection"] = unit_of_protection
    row["sampling"] = sampling
    fig_path = None
    if figure_path is not None:
        renderer = renderer or CardFigureRenderer()
        fig_path = renderer.render(figure_path, eps, delta, f, t)
    row["figure"] = fig_path
    return PrivacyCard(row=row, markdown=_markdown(row), html=_html(row), figure_path=fig_path)


def privacy_card_from_info(info: dict, **measurements) -> PrivacyCard:
    """privacy_card from a train-info dict (keys as in dpaudit.dp.ledger.build_ledger)."""
    eps = info.get("epsilon")
    if eps is None and info.get("mechanism") == "baseline":
        eps = math.inf
    return privacy_card(
        str(info.get("run", info.get("run_id", ""))), eps, info.get("delta", 0.0),
        dataset=info.get("dataset"), mechanism=info.get("mechanism"),
        accountant=info.get("accountant"),
        # the ledger's name for the relation, so cards and ledger say the same thing
        neighbouring_relation=normalise_relation(info.get("neighbouring_relation")),
        unit_of_protection=info.get("unit_of_protection"), sampling=info.get("sampling"),
        **measurements,
    )


NOT_APPLICABLE = "not applicable (no DP, ε = ∞)"


def _lines(row):
    private = not math.isinf(row["epsilon"])

    def dp_only(text):
        return text if private else NOT_APPLICABLE

    theory = [
        ("ε", _fmt(row["epsilon"])),
        ("δ", dp_only(_fmt(row["delta"], ".2g"))),
        ("e^ε (risk multiplier)", _fmt(row["exp_epsilon"])),
        ("max attack accuracy", _fmt(row["max_attack_accuracy_bound"])),
        ("max attack advantage (TPR − FPR)", _fmt(row["max_advantage_bound"])),
        *((f"TPR bound at FPR {target:g}", _fmt(value)) for target, value in row["tpr_bound_at_fpr"].items()),
        ("accountant", dp_only(_fmt(row["accountant"]))),
        ("neighbouring relation", dp_only(_fmt(row["neighbouring_relation"]))),
        ("unit of protection", _fmt(row["unit_of_protection"])),
        ("sampling (as the accountant assumes)", dp_only(_fmt(row["sampling"]))),
    ]
    inside = row["roc_inside_dp_region"]
    measured = [
        *((f"attack TPR at FPR {target:g}", _fmt(value)) for target, value in row["attack_tpr_at_fpr"].items()),
        ("attack AUC", _fmt(row["attack_auc"])),
        ("ε lower bound of the DP-region test (all ROC points, Bonferroni)",
         _fmt(row["dp_region_epsilon_lower_bound"])),
        ("ROC inside DP region (up to sampling error)",
         dp_only("—" if inside is None else ("yes" if inside else f"NO ({row['roc_violations']} points)"))),
        ("generalization gap", _fmt(row["generalization_gap"])),
        (row["utility_name"] or "utility", _fmt(row["utility"])),
    ]
    return theory, measured


def _warning(row):
    if row["lower_bound_exceeds_epsilon"] or row["roc_inside_dp_region"] is False:
        return ("The measured attack exceeds what the stated (ε, δ) allows: a bug or a wrong "
                "assumption (sampling, neighbouring relation, accountant).")
    return None


def _markdown(row) -> str:
    theory, measured = _lines(row)
    title = f"{row['dataset']} / {row['run']}" if row["dataset"] else row["run"]
    out = [f"### Privacy card: {title}", "", "| theory | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in theory]
    out += ["", "| measurement | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in measured]
    warn = _warning(row)
    if warn:
        out += ["", f"**Warning:** {warn}"]
    if row["figure"]:
        out += ["", f"![attack ROC and DP region]({Path(row['figure']).name})"]
    out += ["", plain_language(row["epsilon"], row["delta"], row["neighbouring_relation"]), ""]
    return "\n".join(out)


def _html(row) -> str:
    theory, measured = _lines(row)
    esc = html.escape
    title = f"{row['dataset']} / {row['run']}" if row["dataset"] else row["run"]

    def table(name, items):
        body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in items)
        return f'<table class="privacy-card-{name}">{body}</table>'

    parts = [f'<div class="privacy-card"><h3>Privacy card: {esc(title)}</h3>',
             table("theory", theory), table("measurement", measured)]
    warn = _warning(row)
    if warn:
        parts.append(f'<p class="warning"><strong>Warning:</strong> {esc(warn)}</p>')
    if row["figure"]:
        parts.append(f'<img src="{esc(Path(row["figure"]).name)}" '
                     'alt="attack ROC with the DP region">')
    parts.append(f"<p>{esc(plain_language(row['epsilon'], row['delta'], row['neighbouring_relation']))}</p></div>")
    return "".join(parts)

"""Reference models of a model trained elsewhere, from its training recipe (issue 44).

An ``external_models`` entry's ``reference_recipe`` states how the model was trained (mechanism
baseline or dpsgd, architecture, optimizer, epochs, batch size, learning rate); dpaudit trains K
reference models of it exactly as it trains any grid recipe's pool (``reference_pool`` in
rules/attacks.smk, ``dpaudit.reference.pool.build_reference_pool``: stacked, DP-matched), on the
entry's own audit population P (its members ∪ held-out rows, read from the model's
``P.OUTPUTS``), so LiRA and RMIA attack the model with them as they attack a grid run.

DP-matched means the promise's DP-SGD inputs: σ (``noise_multiplier``), the clip norm
(``promise.clip_norm``, or the recipe's own ``clip_norm``), the sampling and accountant; a dpsgd
recipe without them is refused (a reference model noisier or quieter than the target would make
LiRA's IN/OUT distributions another mechanism's). The recipe's name is ``external~<entry>``
(``recipe_name``), a name no grid recipe has (those start with ``mechanism~``).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["RECIPE_PREFIX", "external_recipes", "recipe_name", "recipe_params", "recipe_problems"]

RECIPE_PREFIX = "external~"
# The recipe keys that are grid values or training settings of train_model (dpaudit.training.params).
_RECIPE_KEYS = ("mechanism", "model", "optimizer", "epochs", "batch_size", "learning_rate", "clip_norm")


def recipe_name(run: str) -> str:
    return f"{RECIPE_PREFIX}{run}"


def recipe_problems(entry: Mapping, config: Mapping, where: str) -> list[str]:
    """Why the entry's ``reference_recipe`` cannot train a DP-matched pool (empty when it can)."""
    recipe = entry.get("reference_recipe")
    if recipe is None:
        return []
    where = f"{where}.reference_recipe"
    problems = []
    if "reference_outputs" in entry:
        problems.append(f"{where}: the entry also gives reference_outputs; give one source of reference models, "
                        "remove one of them")
    if not config["metrics"]["attacks"]["enabled"]:
        problems.append(f"{where}: reference models serve LiRA and RMIA only, and metrics.attacks.enabled is false; "
                        "set it to true, or remove reference_recipe")
    if recipe["mechanism"] == "dpsgd":
        promise = entry.get("promise") or {}
        if "noise_multiplier" not in promise:
            problems.append(f"{where}: mechanism dpsgd trains the reference models with the promise's σ, and "
                            f"{where[:-len('.reference_recipe')]}.promise states no DP-SGD inputs; give promise."
                            "noise_multiplier, sampling_probability, steps and delta, or use mechanism baseline")
        if "clip_norm" not in recipe and "clip_norm" not in promise:
            problems.append(f"{where}: mechanism dpsgd needs the clip norm C; give promise.clip_norm (or "
                            "reference_recipe.clip_norm)")
    elif "clip_norm" in recipe:
        problems.append(f"{where}.clip_norm: a baseline recipe clips nothing; remove it or use mechanism dpsgd")
    return problems


def recipe_params(entry: Mapping) -> dict:
    """The recipe's parameters for ``build_reference_pool`` (``train_model``'s, no seed): the recipe's
    keys as given (the training block's settings apply to the rest), and for dpsgd the promise's σ,
    clip norm, δ, sampling and accountant."""
    recipe = entry["reference_recipe"]
    params = {key: recipe[key] for key in _RECIPE_KEYS if key in recipe}
    if recipe["mechanism"] == "dpsgd":
        promise = entry["promise"]
        params["noise_multiplier"] = float(promise["noise_multiplier"])
        params.setdefault("clip_norm", promise.get("clip_norm"))
        params["delta"] = float(promise["delta"])
        params["sampling"] = promise.get("sampling", "poisson")
        params["accountant"] = promise.get("accountant", "rdp")
    return params


def external_recipes(config: Mapping, dataset: str) -> dict[str, dict]:
    """The dataset's recipes of models trained elsewhere, as ``dpaudit.config.recipe_lookup`` gives a
    grid's: ``{name: {"params": ..., "runs": [the entry]}}``."""
    return {recipe_name(run): {"params": recipe_params(entry), "runs": [run]}
            for run, entry in (config.get("external_models") or {}).items()
            if entry["dataset"] == dataset and "reference_recipe" in entry}

"""The promise of a model trained elsewhere (issue 44): what its trainer states, and what dpaudit's
accountant says of it.

Two forms. ``{epsilon, delta}``: an (ε, δ) guarantee as stated (nothing recomputes it). The DP-SGD
inputs ``{noise_multiplier, sampling_probability, steps, delta}`` with ``sampling`` (poisson,
default, or shuffle), ``accountant`` (rdp, default, or pld) and optionally ``clip_norm`` (C, which
the accountant does not read: a dpsgd reference recipe and PMP Recipe A on a model file need it): ε is recomputed from them by
``dpaudit.dp.accounting.dpsgd_epsilon``, the accountant of every dpaudit run, and that ε is the
promise audited; an ``epsilon`` given beside them is the trainer's statement, kept with the
relative mismatch (a statement more than ``MISMATCH_TOLERANCE`` below the recomputed ε claims more
privacy than the inputs give, and the record says so).

tensorflow-privacy's ``compute_dp_sgd_privacy_statement(n, batch_size, epochs, σ, δ,
used_microbatching=False)`` states, on its "Poisson sampling" line, the ε of
``sampling_probability = batch_size / n`` and ``steps = ceil(epochs / sampling_probability)``
with RDP over dp_accounting's default orders: the same event and accountant as here
(tests/unit/test_external.py compares them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from dpaudit.contract.delta import large_delta_problem
from dpaudit.external.outputs_file import ExternalModelError

__all__ = ["DPSGD_KEYS", "MISMATCH_TOLERANCE", "promise_problems", "promise_record"]

DPSGD_KEYS = ("noise_multiplier", "sampling_probability", "steps")
# The accounting check's tolerance (dpaudit.dp.accounting_check): a stated ε more than 1 % off the
# recomputed one is a mismatch worth a sentence.
MISMATCH_TOLERANCE = 0.01


def promise_problems(promise: Mapping | None, n_members: int | None, where: str,
                     allow_large_delta: bool = False) -> list[str]:
    """The promise's problems (its form, δ < 1/n members when n is known)."""
    if not promise:
        return []
    given = [key for key in DPSGD_KEYS if key in promise]
    problems = []
    if given and len(given) < len(DPSGD_KEYS):
        missing = [key for key in DPSGD_KEYS if key not in promise]
        problems.append(f"{where}: DP-SGD inputs need {', '.join(DPSGD_KEYS)} and delta; {', '.join(missing)} "
                        "missing (or state only epsilon and delta)")
    if not given:
        extra = [key for key in ("sampling", "accountant", "clip_norm") if key in promise]
        if extra:
            problems.append(f"{where}: {', '.join(extra)} describe DP-SGD inputs; give noise_multiplier, "
                            "sampling_probability and steps too, or remove them")
        if "epsilon" not in promise:
            problems.append(f"{where}: a promise is (epsilon, delta) or the DP-SGD inputs (noise_multiplier, "
                            "sampling_probability, steps, delta); write one of them")
    if "delta" not in promise:
        problems.append(f"{where}.delta: missing; the promise's δ (e.g. 1e-5, below 1/n members)")
    elif n_members is not None and not allow_large_delta:
        problem = large_delta_problem(float(promise["delta"]), n_members)
        if problem is not None:
            problems.append(f"{where}.delta: {problem}")
    return problems


def promise_record(promise: Mapping | None, n_members: int, where: str, allow_large_delta: bool = False) -> dict:
    """The promise as the record's fields: ``epsilon``, ``delta`` and, for DP-SGD inputs, the accountant's
    inputs and result (as a dpaudit run's train.json), plus ``promise`` (what was stated and how ε was had)."""
    problems = promise_problems(promise, n_members, where, allow_large_delta)
    if problems:
        raise ExternalModelError("\n  ".join(problems))
    if not promise:
        return {"epsilon": math.inf, "accountant": None,
                "promise": {"kind": "none", "sentence": "no promise stated: nothing is checked against one"}}
    delta = float(promise["delta"])
    if not any(key in promise for key in DPSGD_KEYS):
        epsilon = float(promise["epsilon"])
        return {"epsilon": epsilon, "delta": delta, "accountant": "stated",
                "promise": {"kind": "stated", "epsilon": epsilon, "delta": delta,
                            "sentence": f"(ε = {epsilon:g}, δ = {delta:g}) as stated by the trainer; dpaudit cannot "
                                        "recompute it (no DP-SGD inputs given)"}}
    from dpaudit.dp.accounting import dpsgd_epsilon

    sigma, q, steps = float(promise["noise_multiplier"]), float(promise["sampling_probability"]), int(promise["steps"])
    sampling, accountant = promise.get("sampling", "poisson"), promise.get("accountant", "rdp")
    result = dpsgd_epsilon(sigma, q, steps, delta, accountant=accountant, sampling=sampling)
    epsilon = float(result["epsilon"])
    record = {"kind": "dpsgd", "noise_multiplier": sigma, "sampling_probability": q, "steps": steps, "delta": delta,
              "sampling": sampling, "accountant": accountant, "recomputed_epsilon": epsilon}
    if "clip_norm" in promise:  # PMP Recipe A's C (dpaudit.external.gradients); the accountant does not read it
        record["clip_norm"] = float(promise["clip_norm"])
    sentence = (f"ε = {epsilon:.4g} at δ = {delta:g}, recomputed by dpaudit's {accountant} accountant from the "
                f"DP-SGD inputs (σ = {sigma:g}, q = {q:g}, {steps} steps, {sampling} sampling)")
    if "epsilon" in promise:
        stated = float(promise["epsilon"])
        relative = (epsilon - stated) / stated
        record |= {"stated_epsilon": stated, "mismatch_relative": relative,
                   "mismatch": bool(abs(relative) > MISMATCH_TOLERANCE)}
        if abs(relative) > MISMATCH_TOLERANCE:
            direction = ("claims more privacy than these inputs give" if epsilon > stated
                         else "is more cautious than these inputs need")
            sentence += (f"; the trainer states ε = {stated:g}, {abs(relative):.1%} "
                         f"{'below' if epsilon > stated else 'above'} it: the statement {direction}")
        else:
            sentence += f"; the trainer's stated ε = {stated:g} agrees (within {MISMATCH_TOLERANCE:.0%})"
    record["sentence"] = sentence
    fields = {key: result[key] for key in ("epsilon", "delta", "noise_multiplier", "sampling_probability", "steps",
                                           "accountant", "sampling", "neighbouring_relation")}
    if "clip_norm" in promise:
        fields["clip_norm"] = float(promise["clip_norm"])
    return {**fields, "promised_mechanism": "dpsgd", "accountant_inputs": result, "promise": record}

"""The ``layerwise_clipping`` gradient path: DP-SGD on any model ``layer_clipping`` covers.

One training-mode forward pass with taps (Dropout masks drawn explicitly, one per example,
when the model has Dropout, so the norm check's slow tapes can replay them), one backward
pass to the taps, exact per-example norms per layer (Conv2D: ghost or explicit, whichever
is cheaper), the clipped sum from the same pass (``LayerGradients.clipped``), then the
noise, canaries and divisor of ``StepContext`` exactly as the Dense paths of
``dpaudit.training.gradient_paths``.
"""

from __future__ import annotations

from collections.abc import Callable

from dpaudit.training.gradient_paths import GradientPath, StepContext
from dpaudit.training.layer_clipping import (
    chain_dropouts,
    dropout_mask_sampler,
    layer_gradients,
    model_chain,
    reference_forward,
    tapped_forward,
)

__all__ = ["layerwise_clipping"]


def layerwise_clipping(ctx: StepContext, *, dropout_masks: Callable | None = None, dropout_seed: int = 0,
                       **_) -> GradientPath:
    """Exact per-example clipping of a chain of Dense/Conv2D/Embedding/normalization layers."""
    tf = ctx.tf
    variables, m_canary, check = ctx.variables, ctx.m_canary, ctx.check
    opt = ctx.plain_optimizer()
    chain = model_chain(ctx.net)
    drops = chain_dropouts(chain)
    sample_masks = dropout_masks or (dropout_mask_sampler(drops, dropout_seed) if drops else None)
    clip_weights = ctx.ratio_weights

    def slow_norms(x, y, positions, masks):
        if masks is None:
            return ctx.slow_norms(x, y, positions)
        # Keras' own layer calls (not the tapped forward), under the example's masks
        return ctx.slow_norms(x, y, positions, masks, forward=lambda xi, mi: reference_forward(chain, xi, mi))

    @tf.function(input_signature=ctx.signature, autograph=False)
    def step(x, y, *extra):
        canary_mask = extra[0] if m_canary else None
        masks = sample_masks(tf.shape(x)[0]) if sample_masks is not None else None
        with tf.GradientTape(persistent=ctx.persistent) as tape:
            logits, taps = tapped_forward(chain, x, masks)
            losses, correct = ctx.batch_stats(y, logits)
            summed = tf.reduce_sum(losses)
        grads = layer_gradients(taps, tape.gradient(summed, [t.z for t in taps]))
        norms = tf.sqrt(tf.add_n([g.squared_norms for g in grads])) * ctx.norm_factor
        # before the update: the slow tapes must read the weights the norms were computed at
        checked = (ctx.checked(norms, extra[-1], tape, losses, logits, slow_norms(x, y, extra[-1], masks))
                   if check else None)
        factors, canary_weights = ctx.split_weights(clip_weights(ctx.with_canary_norms(norms)), tf.shape(y)[0])
        clipped = {}
        for g in grads:
            clipped.update(g.clipped(factors))
        clipped = [clipped[v.ref()] for v in variables]
        ctx.check_clipping(tape, x, y, losses, norms, clipped)
        noised = ctx.noised_update(clipped, tf.shape(y)[0], canary_mask, canary_weights)
        ctx.apply(opt.apply_gradients, noised)
        return ctx.finish((summed, correct, ctx.fraction_above_clip(norms)), checked)

    return GradientPath(step, opt, opt.apply_gradients, clip_weights)

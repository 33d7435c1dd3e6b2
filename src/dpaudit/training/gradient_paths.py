"""The four DP-SGD gradient paths of ``dpaudit.training.steps.build_train_step``, one builder each.

Every builder takes a ``StepContext`` (what the paths share: the clip weights' threshold,
the canary coordinates, the noised update with its fixed divisor, the norm check) and
returns a ``GradientPath``: the compiled step, the optimizer, the optimizer call the
noise-only update of an empty batch goes through, and the clip-weight function the
canaries' weights come from. The mathematics of each path is in ``steps``'s docstring.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from dpaudit.training.dense_taps import (
    dense_chain,
    dropout_layers,
    dropout_mask_sampler,
    ghost_squared_norms,
    tapped_forward,
)

__all__ = ["BUILDERS", "ONE_REPLICA", "GradientPath", "NoisedUpdate", "StepContext"]

# Keyword arguments of every Keras apply_gradients of a step. By default Keras all-reduces the
# update over the replicas (one here: an identity); tracing that all-reduce registers a custom
# gradient in TensorFlow's process-global gradient registry, which is never emptied and keeps
# the traced step's graph alive: 7.5 MB more per DP-SGD run in a warm process that trains run
# after run (issue 36). dpaudit trains on one replica, so its steps skip the all-reduce; the
# update is the same.
ONE_REPLICA = {"experimental_aggregate_gradients": False}


class NoisedUpdate(NamedTuple):
    """One step's update before the optimizer: what it receives, the canaries' noised sum (÷ C)
    and the clipped sums the noise was added to (the noise monitor's reference), and the update
    of the canary coordinates (their noised sum ÷ the divisor)."""

    update: list
    observed: Any
    clipped: list
    canary_clipped: Any
    canary_update: Any = None


class GradientPath(NamedTuple):
    """What a gradient path gives ``build_train_step``."""

    step: Callable
    optimizer: Any
    apply_noise: Callable  # the optimizer call of the noise-only update
    clip_weights: Callable  # norms → clip weights (the canaries' weights of a noise-only update)


@dataclass
class StepContext:
    """What the gradient paths of one DP-SGD step share (built by ``build_train_step``)."""

    net: Any
    signature: list  # (x, y[, canary mask][, norm-check positions]) tensor specs
    optimizer: str
    learning_rate: float
    momentum: float
    clip: float  # C of the noise and of the clipped fraction
    sigma: float  # the noise multiplier actually drawn
    clip_for_weights: float  # the clip weights' threshold (C unless a policy plants a bug)
    norm_factor: float  # the fast and ghost paths' norms are scaled by it (a planted bug unless 1)
    m_canary: int  # gradient canaries appended to the update
    canary_norm: float  # each canary's gradient norm
    check: bool  # the step recomputes a few examples' norms the slow way
    check_examples: int  # how many
    divisor: float  # B, or k with microbatches
    monitor: Any = None  # dpaudit.audit.noise_monitor.NoiseMonitor, or None
    # the noise's generator, one for the step and the empty-batch step (steps.build_train_step: a seeded
    # op such as tf.random.normal repeated the data step's draws in the noise step)
    generator: Any = None
    noise: Callable | None = None  # a planted noise bug's draw (tensors → noised tensors); None: N(0, σ²C²)
    weights: Any = None  # dpaudit.audit.weight_monitor.WeightMonitor (set once the optimizer exists), or None
    stray: Callable | None = None  # a planted stray update after the optimizer call (power tests); None: none
    clipping: Any = None  # dpaudit.audit.clip_monitor.ClipMonitor, or None

    def __post_init__(self):
        from dpaudit import _tf

        self.tf, self.keras, self.tfp = _tf.tf, _tf.keras, _tf
        self.variables = self.net.trainable_variables
        self.canary_norms = self.tf.fill([self.m_canary], self.canary_norm)
        # The canaries' coordinates are a variable of their own that the same optimizer call updates
        # with the model's weights: their observation is read back from its consecutive states.
        self.canary_variable = (self.tf.Variable(self.tf.zeros([self.m_canary]), name="canary_coordinates")
                                if self.m_canary else None)
        self.canary_slots: list = []

    def bind_optimizer(self, optimizer) -> None:
        """The step's optimizer, its slots created now: the step can read the canaries' state, and
        its first call traces once (a tf.function that creates variables is traced twice)."""
        optimizer._create_all_weights(self.optimized())
        if self.m_canary:
            self.canary_slots = [optimizer.get_slot(self.canary_variable, name) for name in optimizer.get_slot_names()]

    def optimized(self) -> list:
        """Every variable the optimizer call updates: the model's trainable ones, then the canaries'."""
        return [*self.variables, self.canary_variable] if self.m_canary else list(self.variables)

    def plain_optimizer(self):
        keras = self.keras
        if self.optimizer == "sgd":
            return keras.optimizers.legacy.SGD(learning_rate=self.learning_rate, momentum=self.momentum)
        return keras.optimizers.legacy.Adam(learning_rate=self.learning_rate)

    def batch_stats(self, y, logits):
        tf = self.tf
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))
        return losses, correct

    def with_canary_norms(self, norms):
        """Per-unit norms of the batch followed by the canaries' (one clip-weight call for both)."""
        return self.tf.concat([norms, self.canary_norms], axis=0) if self.m_canary else norms

    def split_weights(self, weights, units):
        """(data units' weights, canaries' weights) from ``clip_weights(with_canary_norms(.))``."""
        return (weights[:units], weights[units:]) if self.m_canary else (weights, None)

    def noised_update(self, clipped, units, canary_mask=None, canary_weights=None) -> NoisedUpdate:
        """Clipped sum (and the sampled canaries' clipped gradients at their coordinates)
        + N(0, σ²C²) per coordinate, divided by the fixed divisor."""
        canaries = [canary_mask * self.canary_norms * canary_weights] if self.m_canary else []
        if self.noise is not None:
            noised = self.noise([*clipped, *canaries])
        elif self.generator is None:
            raise RuntimeError("StepContext.generator is not set: build the step with build_train_step")
        else:
            scale = self.sigma * self.clip
            noised = [t + self.generator.normal(self.tf.shape(t), stddev=scale, dtype=t.dtype)
                      for t in [*clipped, *canaries]]
        observed = noised[-1] / self.clip if self.m_canary else None
        return NoisedUpdate([g / self.divisor for g in noised[:len(clipped)]], observed, list(clipped),
                            canaries[0] if canaries else None, noised[-1] / self.divisor if self.m_canary else None)

    def apply(self, apply_gradients, noised: NoisedUpdate) -> None:
        """Hand the noised update to the optimizer; the noise monitor reads the noise it
        actually carries from the same tensors: r = update · divisor − clipped sum; the weight
        monitor reads the state the call changes and the update it is handed."""
        update = list(noised.update)
        if self.monitor is not None:
            canary = [noised.observed * self.clip - noised.canary_clipped] if self.m_canary else []
            self.monitor.observe_update(update, noised.clipped, self.divisor, canary)
        if self.m_canary:
            update.append(noised.canary_update)
        if self.weights is not None:
            self.weights.observe(update)
        apply_gradients(zip(update, self.optimized(), strict=True), **ONE_REPLICA)
        if self.stray is not None:
            self.stray(noised)

    @property
    def persistent(self) -> bool:
        """Whether the step's tape is read again after the path's own backward pass (norm or clip check)."""
        return self.check or self.clipping is not None

    def check_clipping(self, tape, x, y, unit_losses, norms, clipped) -> None:
        """The clipping certificate's reading (``dpaudit.audit.clip_monitor``): the batch the step trained
        on, the path's clipped sum, the norms it clipped by and, on the same tape, the clipped units' own
        losses (examples, or microbatch groups)."""
        if self.clipping is not None:
            self.clipping.observe(tape, x, y, unit_losses, norms, clipped, self.variables)

    def canary_state(self):
        """[1 + slots, m]: the canary coordinates' weights and optimizer slots (``get_slot_names()`` order)
        as the optimizer call left them (read after it: the step's program order)."""
        return self.tf.stack([self.tf.identity(self.canary_variable), *(self.tf.identity(s) for s in self.canary_slots)])

    def finish(self, outputs, checked=None):
        extra = (self.canary_state(),) if self.m_canary else ()
        return (*outputs, *extra, *(checked or ()))

    def slow_norms(self, x, y, positions, masks=None, chain=None, forward=None):
        """(norms, logits) of the examples at ``positions``, one tape per example alone (same masks;
        ``forward(xi, masks_i)``: the path's own replay of Keras' layer calls, else the model's)."""
        tf = self.tf
        out, logits_out = [], []
        for j in range(self.check_examples):
            at = positions[j:j + 1]
            xi, yi = tf.gather(x, at), tf.gather(y, at)
            with tf.GradientTape() as tape:
                if forward is not None:
                    logits = forward(xi, None if masks is None else [tf.gather(mk, at) for mk in masks])
                elif masks is None:
                    logits = self.net(xi, training=True)
                else:
                    logits, _ = tapped_forward(chain, xi, tf, [tf.gather(mk, at) for mk in masks])
                loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(yi, logits))
            grads = tape.gradient(loss, self.variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            out.append(_norm(grads, tf))
            logits_out.append(logits[0])
        return tf.stack(out), tf.stack(logits_out)

    def slow_group_norms(self, x, y, group, sizes, groups, logits_batched):
        """(norms, forward gaps) of the clipped units of the microbatch path at ``groups``: one tape
        each of its group's mean loss through a fresh forward pass of the model (its Dropout masks;
        the path has no Dropout taps), and the largest relative difference of the group's logits
        there from the step's own forward pass."""
        tf = self.tf
        out, gaps = [], []
        for j in range(self.check_examples):
            member = tf.cast(tf.equal(group, groups[j]), tf.float32)
            size = tf.maximum(tf.cast(tf.gather(sizes, groups[j]), tf.float32), 1.0)
            with tf.GradientTape() as tape:
                logits = self.net(x, training=True)
                loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits) * member) / size
            grads = tape.gradient(loss, self.variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            out.append(_norm(grads, tf))
            diff = tf.reduce_max(tf.abs(logits - logits_batched), axis=1) * member
            size_b = tf.reduce_max(tf.abs(logits_batched), axis=1) * member
            gaps.append(tf.reduce_max(diff) / tf.maximum(1.0, tf.reduce_max(size_b)))
        return tf.stack(out), tf.stack(gaps)

    def unit_norms(self, tape, unit_losses: Callable):
        """Norms of the gradients of ``unit_losses()`` (one scalar per checked unit, formed on the
        persistent ``tape``) through the step's own forward pass: the gradients the step clipped and
        summed, with the same rounding."""
        tf = self.tf
        with tape:  # a persistent tape records again: the units' losses must be on it
            losses = unit_losses()
        return tf.stack([_norm(tape.gradient(loss, self.variables, unconnected_gradients=tf.UnconnectedGradients.ZERO),
                               tf) for loss in losses])

    def checked(self, norms, positions, tape, losses, logits, alone):
        """The norm check's four values per checked example (``dpaudit.training.train``'s decision):
        the path's clip norm, the norm of the gradient it summed (the step's own forward pass), the
        norm from one tape of the example alone, and the relative gap of its logits alone from the
        step's (rounding, unless the batch mixes examples)."""
        tf = self.tf
        batched = self.unit_norms(tape, lambda: [tf.gather(losses, positions[j]) for j in range(self.check_examples)])
        alone_norms, alone_logits = alone
        own = tf.gather(logits, positions)
        gap = (tf.reduce_max(tf.abs(own - alone_logits), axis=1)
               / tf.maximum(1.0, tf.reduce_max(tf.abs(own), axis=1)))
        return tf.gather(norms, positions), batched, alone_norms, gap

    def dense_clipped(self, taps, deltas, factors):
        """{variable ref: Σ_i w_i g_i} of a Dense chain's taps: hᵀ(w ⊙ δ) per kernel, Σ w ⊙ δ per bias."""
        clipped = {}
        for (h, _, layer), delta in zip(taps, deltas, strict=True):
            # Σ_i w_i h_i δ_iᵀ = hᵀ (w ⊙ δ): the clipped sum without per-example gradients.
            weighted = delta * factors[:, None]
            clipped[layer.kernel.ref()] = self.tf.matmul(h, weighted, transpose_a=True)
            if layer.use_bias:
                clipped[layer.bias.ref()] = self.tf.reduce_sum(weighted, axis=0)
        return [clipped[v.ref()] for v in self.variables]

    def fraction_above_clip(self, norms):
        return self.tf.reduce_mean(self.tf.cast(norms > self.clip, self.tf.float32))

    def ratio_weights(self, norms):
        # C / max(C, ‖g_i‖) = min(1, C/‖g_i‖), and 1 for a zero gradient.
        if math.isinf(self.clip_for_weights):
            return self.tf.ones_like(norms)
        return self.clip_for_weights / self.tf.maximum(self.clip_for_weights, norms)


def fast_gradient_clipping(ctx: StepContext, **_) -> GradientPath:
    """tensorflow-privacy's ghost norms of Dense layers, then a weighted-loss backward pass."""
    tf, keras, _tf = ctx.tf, ctx.keras, ctx.tfp
    net, variables, m_canary, check = ctx.net, ctx.variables, ctx.m_canary, ctx.check
    opt = ctx.plain_optimizer()
    # The fast path reads the per-example loss from net.loss; "sum" reduction so
    # the clipped gradient is Σ_i clip_C(g_i), divided by B below.
    net.compile(
        optimizer=opt,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum"),
    )
    registry = _tf.tfp_layer_registry.make_default_layer_registry()

    def clip_weights(norms):
        if math.isinf(ctx.clip_for_weights):
            return tf.ones_like(norms)
        return _tf.clip_grads.compute_clip_weights(ctx.clip_for_weights, norms)

    @tf.function(input_signature=ctx.signature, autograph=False)
    def step(x, y, *extra):
        canary_mask = extra[0] if m_canary else None
        # clip_grads.compute_clipped_gradients_and_outputs, unrolled so the
        # per-example norms are available for the clipped fraction.
        norms = _tf.clip_grads.compute_gradient_norms(
            net, registry, x, y, trainable_vars=variables
        ) * ctx.norm_factor
        # before the update: the slow tapes must read the weights the norms were computed at
        alone = ctx.slow_norms(x, y, extra[-1]) if check else None
        weights, canary_weights = ctx.split_weights(clip_weights(ctx.with_canary_norms(norms)), tf.shape(y)[0])
        with tf.GradientTape(persistent=ctx.persistent) as tape:
            logits = net(x, training=True)
            clipped_loss = net.loss(y, logits, weights)
            losses, correct = ctx.batch_stats(y, logits)
        clipped = tape.gradient(
            clipped_loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO
        )
        checked = ctx.checked(norms, extra[-1], tape, losses, logits, alone) if check else None
        ctx.check_clipping(tape, x, y, losses, norms, clipped)
        noised = ctx.noised_update(clipped, tf.shape(y)[0], canary_mask, canary_weights)
        ctx.apply(opt.apply_gradients, noised)
        return ctx.finish((tf.reduce_sum(losses), correct, ctx.fraction_above_clip(norms)), checked)

    return GradientPath(step, opt, opt.apply_gradients, clip_weights)


def masked_ghost_clipping(ctx: StepContext, *, dropout_masks: Callable | None = None, dropout_seed: int = 0,
                          **_) -> GradientPath:
    """Explicit Dropout masks, one forward pass, ghost norms and the clipped sum hᵀ diag(w) δ."""
    tf, keras = ctx.tf, ctx.keras
    m_canary, check = ctx.m_canary, ctx.check
    opt = ctx.plain_optimizer()
    chain = dense_chain(ctx.net, keras)
    sample_masks = dropout_masks or dropout_mask_sampler(dropout_layers(chain, keras), dropout_seed)
    clip_weights = ctx.ratio_weights

    @tf.function(input_signature=ctx.signature, autograph=False)
    def step(x, y, *extra):
        canary_mask = extra[0] if m_canary else None
        masks = sample_masks(tf.shape(x)[0])
        with tf.GradientTape(persistent=ctx.persistent) as tape:
            logits, taps = tapped_forward(chain, x, tf, masks)
            losses, correct = ctx.batch_stats(y, logits)
            summed = tf.reduce_sum(losses)
        deltas = tape.gradient(summed, [z for _, z, _ in taps])
        norms = tf.sqrt(ghost_squared_norms(taps, deltas, tf)) * ctx.norm_factor
        checked = (ctx.checked(norms, extra[-1], tape, losses, logits, ctx.slow_norms(x, y, extra[-1], masks, chain))
                   if check else None)
        factors, canary_weights = ctx.split_weights(clip_weights(ctx.with_canary_norms(norms)), tf.shape(y)[0])
        clipped = ctx.dense_clipped(taps, deltas, factors)
        ctx.check_clipping(tape, x, y, losses, norms, clipped)
        noised = ctx.noised_update(clipped, tf.shape(y)[0], canary_mask, canary_weights)
        ctx.apply(opt.apply_gradients, noised)
        return ctx.finish((summed, correct, ctx.fraction_above_clip(norms)), checked)

    return GradientPath(step, opt, opt.apply_gradients, clip_weights)


def vectorized_optimizer(ctx: StepContext, **_) -> GradientPath:
    """tensorflow-privacy's vectorized DP optimizer (Jacobian of the per-example losses)."""
    tf, keras, _tf = ctx.tf, ctx.keras, ctx.tfp
    variables = ctx.variables
    cls = (
        _tf.VectorizedDPKerasSGDOptimizer
        if ctx.optimizer == "sgd"
        else _tf.VectorizedDPKerasAdamOptimizer
    )
    kwargs = {"momentum": ctx.momentum} if ctx.optimizer == "sgd" else {}
    opt = cls(
        l2_norm_clip=ctx.clip,
        noise_multiplier=ctx.sigma,
        num_microbatches=None,
        learning_rate=ctx.learning_rate,
        **kwargs,
    )
    # The DP class refuses apply_gradients before its own gradient call; the
    # noise-only update of an empty batch goes to the parent Keras optimizer.
    base_apply = super(cls, opt).apply_gradients
    chain = dense_chain(ctx.net, keras)

    @tf.function(input_signature=ctx.signature, autograph=False)
    def step(x, y):
        # Persistent: the optimizer's Jacobian and the norm pass read one
        # forward pass, so both see the same Dropout masks.
        with tf.GradientTape(persistent=True) as tape:
            logits, taps = tapped_forward(chain, x, tf)
            losses, correct = ctx.batch_stats(y, logits)
            summed = tf.reduce_sum(losses)
        grads_and_vars = opt._compute_gradients(losses, variables, tape=tape)
        deltas = tape.gradient(summed, [z for _, z, _ in taps])
        norms = tf.sqrt(ghost_squared_norms(taps, deltas, tf))
        # The optimizer returns (Σ clip_C(g_i) + N(0, σ²C²)) / |b|; rescaling by
        # |b|/B gives the same sum divided by the expected batch size B.
        scale = tf.cast(tf.shape(y)[0], tf.float32) / ctx.divisor
        update = [g * scale for g, _ in grads_and_vars]
        # tensorflow-privacy draws the noise inside the optimizer and keeps the clipped sum to itself;
        # the clipped sum computed here (ghost norms, hᵀ(w ⊙ δ) from the same forward pass) is the
        # noise monitor's reference: update · B − it is the noise that reaches the weights
        clipped = (ctx.dense_clipped(taps, deltas, ctx.ratio_weights(norms))
                   if ctx.monitor is not None or ctx.stray is not None or ctx.clipping is not None else update)
        ctx.check_clipping(tape, x, y, losses, norms, clipped)
        del tape
        ctx.apply(opt.apply_gradients, NoisedUpdate(update, None, clipped, None))
        return summed, correct, ctx.fraction_above_clip(norms)

    return GradientPath(step, opt, base_apply, ctx.ratio_weights)


def microbatch_group_gradients(ctx: StepContext, *, microbatches: int | None = None, **_) -> GradientPath:
    """Group-mean gradients of k contiguous groups, one batched matmul per layer, clipped per group."""
    tf, keras = ctx.tf, ctx.keras
    variables, m_canary, check = ctx.variables, ctx.m_canary, ctx.check
    k = int(microbatches)
    if k < 1:
        raise ValueError(f"microbatches must be >= 1, got {k}")
    opt = ctx.plain_optimizer()
    chain = dense_chain(ctx.net, keras)
    clip_weights = ctx.ratio_weights

    @tf.function(input_signature=ctx.signature, autograph=False)
    def step(x, y, *extra):
        canary_mask = extra[0] if m_canary else None
        m = tf.shape(y)[0]
        # np.array_split sizes: the first m mod k groups hold one example more.
        sizes = m // k + tf.cast(tf.range(k) < m % k, tf.int32)
        starts = tf.cumsum(sizes, exclusive=True)
        group = tf.repeat(tf.range(k), sizes)
        weight = 1.0 / tf.cast(tf.gather(sizes, group), tf.float32)
        with tf.GradientTape(persistent=ctx.persistent) as tape:
            logits, taps = tapped_forward(chain, x, tf)
            losses, correct = ctx.batch_stats(y, logits)
            # Σ_j mean_{i∈b_j} loss_i: its δ at each pre-activation carries the
            # 1/|b_j| of the group mean.
            group_mean_sum = tf.reduce_sum(losses * weight)
        deltas = tape.gradient(group_mean_sum, [z for _, z, _ in taps])
        # Groups laid out as a [k, width] grid of example positions (padded by
        # masking), so the group gradients are one batched matmul per layer.
        width = (m + k - 1) // k
        slot = tf.range(width)
        valid = slot[None, :] < sizes[:, None]
        pos = tf.minimum(starts[:, None] + slot[None, :], m - 1)
        mask = tf.cast(valid, tf.float32)[:, :, None]
        sq = tf.zeros([k])
        group_grads = {}
        for (h, _, layer), delta in zip(taps, deltas, strict=True):
            dg = tf.gather(delta, pos) * mask
            gk = tf.matmul(tf.gather(h, pos), dg, transpose_a=True)
            sq += tf.reduce_sum(tf.square(gk), axis=[1, 2])
            group_grads[layer.kernel.ref()] = gk
            if layer.use_bias:
                gb = tf.reduce_sum(dg, axis=1)
                sq += tf.reduce_sum(tf.square(gb), axis=1)
                group_grads[layer.bias.ref()] = gb
        norms = tf.sqrt(sq) * ctx.norm_factor
        checked = None
        if check:
            groups = extra[-1]
            alone, gaps = ctx.slow_group_norms(x, y, group, sizes, groups, logits)
            batched = ctx.unit_norms(tape, lambda: [
                tf.reduce_sum(losses * weight * tf.cast(tf.equal(group, groups[j]), tf.float32))
                for j in range(ctx.check_examples)])
            checked = (tf.gather(norms, groups), batched, alone, gaps)
        factors, canary_weights = ctx.split_weights(clip_weights(ctx.with_canary_norms(norms)), k)
        clipped = [tf.tensordot(factors, group_grads[v.ref()], axes=1) for v in variables]
        if ctx.clipping is not None:
            with tape:  # the groups' mean losses, the units the path clips
                group_losses = tf.math.unsorted_segment_sum(losses * weight, group, k)
            ctx.check_clipping(tape, x, y, group_losses, norms, clipped)
        noised = ctx.noised_update(clipped, k, canary_mask, canary_weights)
        ctx.apply(opt.apply_gradients, noised)
        nonempty = sizes > 0
        n_clipped = tf.reduce_sum(tf.cast(tf.logical_and(norms > ctx.clip, nonempty), tf.float32))
        fraction = n_clipped / tf.reduce_sum(tf.cast(nonempty, tf.float32))
        return ctx.finish((tf.reduce_sum(losses), correct, fraction), checked)

    return GradientPath(step, opt, opt.apply_gradients, clip_weights)


def _norm(grads, tf):
    return tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.convert_to_tensor(g))) for g in grads]))


# implementation name (``steps.DP_IMPLEMENTATIONS`` without "auto") → its builder
BUILDERS: dict[str, Callable[..., GradientPath]] = {
    "fast_gradient_clipping": fast_gradient_clipping,
    "masked_ghost_clipping": masked_ghost_clipping,
    "vectorized_optimizer": vectorized_optimizer,
    "microbatch_group_gradients": microbatch_group_gradients,
}

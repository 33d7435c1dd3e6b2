"""One DP-SGD (or non-private) update step of a Keras MLP: the four gradient paths.

DP-SGD update (Abadi et al. 2016; Geambasu's DP lecture, DP in ML), per step with batch b ⊆ members:

    θ ← opt( (Σ_{i∈b} clip_C(g_i) + N(0, σ²C²I)) / B ),   B = q·n the EXPECTED batch size

Dividing by the fixed B (not the random |b|) keeps the noise scale data-independent,
which is what the Poisson-subsampled Gaussian accountant analyses.

Microbatches (``microbatches = k``; TF Privacy's ``num_microbatches``, Negoescu et al. 2023, Sec. 4, and
§9.9): b is cut into k contiguous groups b_1..b_k and the MEAN gradient of each group
is clipped:

    θ ← opt( (Σ_j clip_C(mean_{i∈b_j} g_i) + N(0, σ²C²I)) / k )

k = 1 clips the batch-mean gradient. The divisor k is TF Privacy's and, like B,
does not depend on the data. Group sizes follow ``np.array_split``: the first
|b| mod k groups get one example more, so a Poisson batch of any size m ≥ 1 is
split as evenly as possible. A batch with m < k examples has k − m EMPTY groups;
an empty group contributes a zero gradient (not clipped, not counted in the
clipped fraction) and the divisor stays k. With ``sampling: shuffle`` the last
|b| mod k examples of each batch are dropped (as TF Privacy does), so k divides the
batch and the groups are exactly TF Privacy's ``reshape(loss, [k, -1])`` rows.

Gradient implementations, all exact (g_i is example i's gradient under the
Dropout masks of the forward pass that the update uses):

* ``fast_gradient_clipping`` (tensorflow-privacy ``clip_grads.compute_gradient_norms``
  + ``compute_clip_weights`` + ``gradient_clipping_utils.add_aggregate_noise``):
  per-example gradient norms of Dense layers from one extra backward pass (ghost
  norms). Used when the model has no Dropout: its norm pass runs the layers in
  inference mode and a second forward pass draws new Dropout masks, so with
  Dropout the norms would not belong to the gradients being clipped.
* ``masked_ghost_clipping`` (ours; used when dropout > 0): the step draws every
  example's Dropout masks explicitly (``dropout_mask_sampler``), runs ONE
  training-mode forward pass under them, and one backward pass gives each Dense
  layer's input h_i and the gradient δ_i of Σ_i loss_i at its pre-activation.
  Examples do not interact, so example i's kernel gradient is h_i δ_iᵀ, with
  squared norm ‖h_i‖²‖δ_i‖² (ghost norm; bias: ‖δ_i‖²), and the clipped sum is
  Σ_i w_i h_i δ_iᵀ = hᵀ diag(w) δ with w_i = min(1, C/‖g_i‖): one matmul per
  layer. Norms and update read the same pass, hence the same masks.
* ``vectorized_optimizer`` (``VectorizedDPKeras{SGD,Adam}Optimizer``): the Jacobian
  of the per-example loss vector from ONE forward pass, so clip factors and
  gradients share the Dropout masks. Exact, but 4–9× the non-private epoch time
  on an MLP 20-64-2 and 160× or more with 512 hidden units
  (``bench/bench_training.py``); kept as tensorflow-privacy's implementation, by
  explicit choice only.
* ``microbatch_group_gradients`` (ours; used whenever microbatches is set): one
  forward and one backward pass give each Dense layer's input h_i and the
  gradient δ_i of Σ_j mean_{i∈b_j} loss_i at its pre-activation; a group's kernel
  gradient is Σ_{i∈b_j} h_i δ_iᵀ, one batched matmul over the k groups. Dropout
  masks are shared because there is a single forward pass.

Every step also reports the fraction of clipping units (examples, or non-empty
groups) whose gradient norm exceeded C (Abadi et al. 2016).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

DP_IMPLEMENTATIONS = (
    "auto",
    "fast_gradient_clipping",
    "masked_ghost_clipping",
    "vectorized_optimizer",
    "microbatch_group_gradients",
)


@dataclass(frozen=True)
class MechanismPolicy:
    """How a step departs from the mechanism its accountant analyses; the default is the
    correct mechanism. Any other value plants a bug on purpose, for the audit's power
    tests and benchmarks (never a config value, never used by the released training):

    * ``noise_factor``: the noise actually drawn is σ·f (the accountant keeps σ);
    * ``clip_factor``: the clip weights use the threshold f·C while the noise stays σC
      (``math.inf``: no clipping);
    * ``sample_rate_factor``: Poisson batches are drawn at rate f·q while the accountant
      assumes q (``dpaudit.training.train``);
    * ``norm_factor``: the fast and ghost paths' per-example norms are scaled by f (the
      audit twin's norm check must stop the job).
    """

    noise_factor: float = 1.0
    clip_factor: float = 1.0
    sample_rate_factor: float = 1.0
    norm_factor: float = 1.0

    def __post_init__(self):
        for name in ("noise_factor", "clip_factor", "sample_rate_factor", "norm_factor"):
            value = float(getattr(self, name))
            if not value > 0 or math.isnan(value) or (math.isinf(value) and name != "clip_factor"):
                raise ValueError(f"MechanismPolicy.{name} must be a finite number > 0, got {value!r}")

    @property
    def correct(self) -> bool:
        return self == MechanismPolicy()

    def as_dict(self) -> dict[str, float]:
        """The departures from the correct mechanism (empty when correct)."""
        default = MechanismPolicy()
        return {k: float(getattr(self, k)) for k in ("noise_factor", "clip_factor", "sample_rate_factor",
                                                     "norm_factor") if getattr(self, k) != getattr(default, k)}


CORRECT = MechanismPolicy()

# The audit twin recomputes this many examples' gradients per step the slow way (one tape
# each) and compares their norms with the fast path's (``build_train_step``).
NORM_CHECK_EXAMPLES = 2
NORM_CHECK_RTOL = 1e-3


def optimizer_class_name(opt) -> str:
    """The optimizer's class as recorded in train.json (DP classes by their tensorflow-privacy name)."""
    from dpaudit import _tf

    # tensorflow-privacy's factory names every DP class "DPOptimizerClass".
    for name in ("VectorizedDPKerasSGDOptimizer", "VectorizedDPKerasAdamOptimizer"):
        if isinstance(opt, getattr(_tf, name)):
            return name
    return f"{type(opt).__module__.split('.')[0]}.{type(opt).__name__}"


def _dense_chain(net, keras) -> list:
    """The Dense/Dropout layers of a ``build_mlp`` logits view, in call order."""
    chain = []
    for layer in net.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        if not isinstance(layer, (keras.layers.Dense, keras.layers.Dropout)):
            raise ValueError(
                f"per-example/group gradients support Dense and Dropout layers only, got {layer.name!r}"
            )
        chain.append(layer)
    owned = {v.ref() for layer in chain for v in layer.trainable_variables}
    if any(v.ref() not in owned for v in net.trainable_variables):
        raise ValueError("every trainable variable must belong to a Dense layer of the chain")
    return chain


def dropout_layers(chain, keras) -> list[tuple[float, int]]:
    """(rate, width) of every Dropout layer of a ``_dense_chain``, in call order."""
    found = []
    width = None
    for layer in chain:
        if isinstance(layer, keras.layers.Dropout):
            if layer.noise_shape is not None:
                raise ValueError(f"Dropout {layer.name!r} has a noise_shape; only per-unit masks are supported")
            if width is None:
                width = int(layer.input_shape[-1])
            found.append((float(layer.rate), width))
        else:
            width = int(layer.units)
    return found


def dropout_mask_sampler(rates_and_widths: list[tuple[float, int]], seed: int):
    """``sample(m)``: one Dropout mask per example and Dropout layer, from a seeded generator.

    Same law as Keras' inverted Dropout: each unit is kept with probability 1 − rate
    and then scaled by 1/(1 − rate), independently per example and unit.
    """
    from dpaudit import _tf

    tf = _tf.tf
    generator = tf.random.Generator.from_seed(int(seed))

    def sample(m):
        return [
            tf.cast(generator.uniform(tf.stack([m, width])) >= rate, tf.float32) / (1.0 - rate)
            for rate, width in rates_and_widths
        ]

    return sample


def _tapped_forward(chain, x, tf, masks=None):
    """Training-mode logits plus (input, pre-activation, layer) of every Dense layer.

    Dense is computed by hand (same ops as ``Dense.call`` on 2-D input) so the
    pre-activation is a tensor on the caller's tape: its gradient δ_i together with
    the layer input h_i gives per-example or per-group kernel gradients without a
    Jacobian. ``masks`` (one [m, width] tensor per Dropout layer) replaces the
    layers' own random draws.
    """
    taps = []
    h = x
    remaining = None if masks is None else list(masks)
    for layer in chain:
        if hasattr(layer, "kernel"):
            z = tf.matmul(h, layer.kernel)
            if layer.use_bias:
                z = tf.nn.bias_add(z, layer.bias)
            taps.append((h, z, layer))
            h = layer.activation(z)
        elif remaining is None:
            h = layer(h, training=True)
        else:
            h = h * remaining.pop(0)
    if remaining:
        raise ValueError(f"{len(remaining)} Dropout masks left over: more masks than Dropout layers")
    return h, taps


def _ghost_squared_norms(taps, deltas, tf):
    """‖g_i‖² summed over Dense layers: ‖h_i‖²‖δ_i‖² per kernel plus ‖δ_i‖² per bias.

    δ_i = ∂(Σ_j loss_j)/∂z_i is example i's own δ because examples do not interact,
    and its kernel gradient h_i δ_iᵀ is a rank-1 matrix with that squared norm.
    """
    sq = 0.0
    for (h, _, layer), delta in zip(taps, deltas, strict=True):
        dd = tf.reduce_sum(tf.square(delta), axis=1)
        sq += tf.reduce_sum(tf.square(h), axis=1) * dd
        if layer.use_bias:
            sq += dd
    return sq


def build_train_step(
    net,
    *,
    mechanism: str,
    optimizer: str,
    learning_rate: float,
    momentum: float = 0.0,
    clip_norm: float | None = None,
    noise_multiplier: float = 0.0,
    expected_batch_size: float | None = None,
    implementation: str = "fast_gradient_clipping",
    microbatches: int | None = None,
    dropout_seed: int = 0,
    dropout_masks: Callable | None = None,
    gradient_canaries: int = 0,
    canary_gradient_norm: float | None = None,
    check_norms: bool = False,
    policy: MechanismPolicy = CORRECT,
):
    """Return ``(step, noise_step, optimizer_object)`` for a logits-output model ``net``.

    ``gradient_canaries = m > 0`` (the white-box canary audit, ``dpaudit.training.canary``):
    the update gains m coordinates that the loss does not depend on (as first-layer
    weights of inputs the data never use would be, without the other weights of those
    inputs, which carry no gradient and would only cost time). Canary i's gradient is
    ``canary_gradient_norm`` (default C) at its coordinate; the step takes a third
    argument, the [m] 0/1 mask of canaries sampled into this batch. The canaries pass
    through every piece of the step a data row passes through after its gradient is
    formed: their norms are appended to the per-example (or per-group) norms and clipped
    by the same clip-weight computation, their clipped gradients join the clipped sum
    before the same noise call, and the update is divided by the same divisor. The step
    returns a fourth value: the noised sum at the canary coordinates divided by C
    (s_i + σ·z for a clipped canary). ``noise_step`` then takes the mask too.

    ``check_norms`` (fast and ghost paths; the audit twin): the step takes one more
    argument, ``NORM_CHECK_EXAMPLES`` positions in the batch, recomputes those examples'
    gradients the slow way (one tape per example, same Dropout masks) and returns two
    more values: the fast path's norms at those positions and the slow ones (the caller
    compares them; per-example norms cannot be shared with an injected gradient, so they
    are checked instead).

    ``policy`` (``MechanismPolicy``) plants a bug on purpose for power tests; the
    vectorized optimizer supports only the correct mechanism.

    ``step(x, y)`` applies one update and returns (summed CE, #correct, clipped
    fraction) of the batch (training-mode logits); the clipped fraction is the share
    of examples (or of non-empty microbatch groups) whose gradient norm exceeded C,
    NaN for the baseline. ``noise_step()`` is the DP update of an empty Poisson
    batch: noise only, N(0, σ²C²)/B (or /k with microbatches). For the baseline it
    is None. ``implementation="microbatch_group_gradients"`` needs ``microbatches``.

    ``masked_ghost_clipping`` draws its Dropout masks with
    ``dropout_mask_sampler(..., dropout_seed)``; ``dropout_masks`` (a function of the
    batch size returning one [m, width] mask per Dropout layer) replaces that
    sampler, e.g. to fix the masks in a test.
    """
    from dpaudit import _tf

    tf, keras = _tf.tf, _tf.keras
    d = int(net.input_shape[-1])
    signature = [tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64)]
    variables = net.trainable_variables

    def plain_optimizer():
        if optimizer == "sgd":
            return keras.optimizers.legacy.SGD(learning_rate=learning_rate, momentum=momentum)
        return keras.optimizers.legacy.Adam(learning_rate=learning_rate)

    def batch_stats(y, logits):
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))
        return losses, correct

    if mechanism == "baseline":
        opt = plain_optimizer()

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y):
            with tf.GradientTape() as tape:
                losses, correct = batch_stats(y, net(x, training=True))
                loss = tf.reduce_mean(losses)
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
            return tf.reduce_sum(losses), correct, tf.constant(math.nan)

        return step, None, opt

    if mechanism != "dpsgd":
        raise ValueError(f"unknown mechanism {mechanism!r}")
    if not isinstance(policy, MechanismPolicy):
        raise TypeError(f"policy must be a MechanismPolicy, got {type(policy).__name__}")
    clip = float(clip_norm)
    # The noise actually drawn; the accountant (the caller) keeps the claimed σ.
    sigma = float(noise_multiplier) * float(policy.noise_factor)
    # Clipping threshold of the clip weights; the noise stays σ·C with the claimed C.
    clip_for_weights = clip * float(policy.clip_factor)
    m_canary = int(gradient_canaries)
    if m_canary < 0:
        raise ValueError(f"gradient_canaries must be >= 0, got {m_canary}")
    if (m_canary or check_norms or not policy.correct) and implementation == "vectorized_optimizer":
        raise ValueError("canaries, norm checks and planted bugs need a gradient path of dpaudit, "
                         "not vectorized_optimizer")
    check = bool(check_norms) and implementation in ("fast_gradient_clipping", "masked_ghost_clipping")
    canary_norm = clip if canary_gradient_norm is None else float(canary_gradient_norm)
    if not canary_norm > 0 or not math.isfinite(canary_norm):
        raise ValueError(f"canary_gradient_norm must be finite and > 0, got {canary_gradient_norm!r}")
    if m_canary:
        signature = [*signature, tf.TensorSpec([m_canary], tf.float32)]
    if check:
        signature = [*signature, tf.TensorSpec([NORM_CHECK_EXAMPLES], tf.int32)]
    canary_norms = tf.fill([m_canary], canary_norm)

    def with_canary_norms(norms):
        """Per-unit norms of the batch followed by the canaries' (one clip-weight call for both)."""
        return tf.concat([norms, canary_norms], axis=0) if m_canary else norms

    def split_weights(weights, units):
        """(data units' weights, canaries' weights) from ``clip_weights(with_canary_norms(.))``."""
        return (weights[:units], weights[units:]) if m_canary else (weights, None)

    def noised_update(clipped, units, canary_mask=None, canary_weights=None):
        """Clipped sum (and the sampled canaries' clipped gradients at their coordinates)
        + N(0, σ²C²) per coordinate, divided by the fixed divisor."""
        canaries = [canary_mask * canary_norms * canary_weights] if m_canary else []
        noised = _tf.gradient_clipping_utils.add_aggregate_noise([*clipped, *canaries], units, clip, sigma,
                                                                 loss_reduction="sum")
        observed = noised[-1] / clip if m_canary else None
        return [g / divisor for g in noised[:len(clipped)]], observed

    def finish(outputs, observed, checked=None):
        extra = (observed,) if m_canary else ()
        return (*outputs, *extra, *(checked or ()))

    def slow_norms(x, y, positions, masks=None, chain=None):
        """Norms of the examples at ``positions``, one tape per example (same masks)."""
        out = []
        for j in range(NORM_CHECK_EXAMPLES):
            at = positions[j:j + 1]
            xi, yi = tf.gather(x, at), tf.gather(y, at)
            with tf.GradientTape() as tape:
                if masks is None:
                    logits = net(xi, training=True)
                else:
                    logits, _ = _tapped_forward(chain, xi, tf, [tf.gather(mk, at) for mk in masks])
                loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(yi, logits))
            grads = tape.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            out.append(tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads])))
        return tf.stack(out)

    if (implementation == "microbatch_group_gradients") != (microbatches is not None):
        raise ValueError("microbatches go with implementation microbatch_group_gradients only")
    # TF Privacy divides by the number of microbatches; per-example DP-SGD by B.
    divisor = float(microbatches) if microbatches is not None else float(expected_batch_size)

    def fraction_above_clip(norms):
        return tf.reduce_mean(tf.cast(norms > clip, tf.float32))

    def ratio_weights(norms):
        # C / max(C, ‖g_i‖) = min(1, C/‖g_i‖), and 1 for a zero gradient.
        if math.isinf(clip_for_weights):
            return tf.ones_like(norms)
        return clip_for_weights / tf.maximum(clip_for_weights, norms)

    if implementation == "fast_gradient_clipping":
        opt = plain_optimizer()
        # The fast path reads the per-example loss from net.loss; "sum" reduction so
        # the clipped gradient is Σ_i clip_C(g_i), divided by B below.
        net.compile(
            optimizer=opt,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum"),
        )
        registry = _tf.tfp_layer_registry.make_default_layer_registry()
        base_apply = opt.apply_gradients

        def clip_weights(norms):
            if math.isinf(clip_for_weights):
                return tf.ones_like(norms)
            return _tf.clip_grads.compute_clip_weights(clip_for_weights, norms)

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y, *extra):
            canary_mask = extra[0] if m_canary else None
            # clip_grads.compute_clipped_gradients_and_outputs, unrolled so the
            # per-example norms are available for the clipped fraction.
            norms = _tf.clip_grads.compute_gradient_norms(
                net, registry, x, y, trainable_vars=variables
            ) * policy.norm_factor
            # before the update: the slow tapes must read the weights the norms were computed at
            checked = (tf.gather(norms, extra[-1]), slow_norms(x, y, extra[-1])) if check else None
            weights, canary_weights = split_weights(clip_weights(with_canary_norms(norms)), tf.shape(y)[0])
            with tf.GradientTape() as tape:
                logits = net(x, training=True)
                clipped_loss = net.loss(y, logits, weights)
            clipped = tape.gradient(
                clipped_loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO
            )
            update, observed = noised_update(clipped, tf.shape(y)[0], canary_mask, canary_weights)
            opt.apply_gradients(zip(update, variables, strict=True))
            losses, correct = batch_stats(y, logits)
            return finish((tf.reduce_sum(losses), correct, fraction_above_clip(norms)), observed, checked)

    elif implementation == "masked_ghost_clipping":
        opt = plain_optimizer()
        base_apply = opt.apply_gradients
        chain = _dense_chain(net, keras)
        sample_masks = dropout_masks or dropout_mask_sampler(dropout_layers(chain, keras), dropout_seed)
        clip_weights = ratio_weights

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y, *extra):
            canary_mask = extra[0] if m_canary else None
            masks = sample_masks(tf.shape(x)[0])
            with tf.GradientTape() as tape:
                logits, taps = _tapped_forward(chain, x, tf, masks)
                losses, correct = batch_stats(y, logits)
                summed = tf.reduce_sum(losses)
            deltas = tape.gradient(summed, [z for _, z, _ in taps])
            norms = tf.sqrt(_ghost_squared_norms(taps, deltas, tf)) * policy.norm_factor
            checked = (tf.gather(norms, extra[-1]), slow_norms(x, y, extra[-1], masks, chain)) if check else None
            factors, canary_weights = split_weights(clip_weights(with_canary_norms(norms)), tf.shape(y)[0])
            clipped = {}
            for (h, _, layer), delta in zip(taps, deltas, strict=True):
                # Σ_i w_i h_i δ_iᵀ = hᵀ (w ⊙ δ): the clipped sum without per-example gradients.
                weighted = delta * factors[:, None]
                clipped[layer.kernel.ref()] = tf.matmul(h, weighted, transpose_a=True)
                if layer.use_bias:
                    clipped[layer.bias.ref()] = tf.reduce_sum(weighted, axis=0)
            update, observed = noised_update([clipped[v.ref()] for v in variables], tf.shape(y)[0], canary_mask,
                                             canary_weights)
            opt.apply_gradients(zip(update, variables, strict=True))
            return finish((summed, correct, fraction_above_clip(norms)), observed, checked)

    elif implementation == "vectorized_optimizer":
        cls = (
            _tf.VectorizedDPKerasSGDOptimizer
            if optimizer == "sgd"
            else _tf.VectorizedDPKerasAdamOptimizer
        )
        kwargs = {"momentum": momentum} if optimizer == "sgd" else {}
        opt = cls(
            l2_norm_clip=clip,
            noise_multiplier=sigma,
            num_microbatches=None,
            learning_rate=learning_rate,
            **kwargs,
        )
        # The DP class refuses apply_gradients before its own gradient call; the
        # noise-only update of an empty batch goes to the parent Keras optimizer.
        base_apply = super(cls, opt).apply_gradients
        chain = _dense_chain(net, keras)
        clip_weights = ratio_weights

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y):
            # Persistent: the optimizer's Jacobian and the norm pass read one
            # forward pass, so both see the same Dropout masks.
            with tf.GradientTape(persistent=True) as tape:
                logits, taps = _tapped_forward(chain, x, tf)
                losses, correct = batch_stats(y, logits)
                summed = tf.reduce_sum(losses)
            grads_and_vars = opt._compute_gradients(losses, variables, tape=tape)
            deltas = tape.gradient(summed, [z for _, z, _ in taps])
            del tape
            sq = _ghost_squared_norms(taps, deltas, tf)
            # The optimizer returns (Σ clip_C(g_i) + N(0, σ²C²)) / |b|; rescaling by
            # |b|/B gives the same sum divided by the expected batch size B.
            scale = tf.cast(tf.shape(y)[0], tf.float32) / divisor
            opt.apply_gradients([(g * scale, v) for g, v in grads_and_vars])
            return summed, correct, fraction_above_clip(tf.sqrt(sq))

    elif implementation == "microbatch_group_gradients":
        k = int(microbatches)
        if k < 1:
            raise ValueError(f"microbatches must be >= 1, got {k}")
        opt = plain_optimizer()
        base_apply = opt.apply_gradients
        chain = _dense_chain(net, keras)
        clip_weights = ratio_weights

        @tf.function(input_signature=signature, autograph=False)
        def step(x, y, *extra):
            canary_mask = extra[0] if m_canary else None
            m = tf.shape(y)[0]
            # np.array_split sizes: the first m mod k groups hold one example more.
            sizes = m // k + tf.cast(tf.range(k) < m % k, tf.int32)
            starts = tf.cumsum(sizes, exclusive=True)
            group = tf.repeat(tf.range(k), sizes)
            weight = 1.0 / tf.cast(tf.gather(sizes, group), tf.float32)
            with tf.GradientTape() as tape:
                logits, taps = _tapped_forward(chain, x, tf)
                losses, correct = batch_stats(y, logits)
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
            norms = tf.sqrt(sq)
            factors, canary_weights = split_weights(clip_weights(with_canary_norms(norms)), k)
            clipped = [tf.tensordot(factors, group_grads[v.ref()], axes=1) for v in variables]
            update, observed = noised_update(clipped, k, canary_mask, canary_weights)
            opt.apply_gradients(zip(update, variables, strict=True))
            nonempty = sizes > 0
            n_clipped = tf.reduce_sum(tf.cast(tf.logical_and(norms > clip, nonempty), tf.float32))
            fraction = n_clipped / tf.reduce_sum(tf.cast(nonempty, tf.float32))
            return finish((tf.reduce_sum(losses), correct, fraction), observed)

    else:
        raise ValueError(f"unknown DP implementation {implementation!r}")

    noise_signature = signature[2:3] if m_canary else []

    @tf.function(input_signature=noise_signature, autograph=False)
    def noise_step(canary_mask=None):
        zeros = [tf.zeros_like(v) for v in variables]
        canary_weights = clip_weights(canary_norms) if m_canary else None
        update, observed = noised_update(zeros, 1, canary_mask, canary_weights)
        base_apply(zip(update, variables, strict=True))
        return finish((tf.constant(0.0), tf.constant(0.0), tf.constant(math.nan)), observed)

    return step, noise_step, opt

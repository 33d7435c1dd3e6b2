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
  + ``compute_clip_weights``; the noise from the step's own generator, ``StepContext.generator``):
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

``build_train_step`` is the public entry: it checks the arguments, builds the
``StepContext`` the paths share (clip weights, canary coordinates, noised update, norm
check) and calls the path's builder in ``dpaudit.training.gradient_paths``; the Dense
algebra (taps, ghost norms, Dropout masks) is ``dpaudit.training.dense_taps``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpaudit.training.gradient_paths import BUILDERS as DENSE_BUILDERS
from dpaudit.training.gradient_paths import ONE_REPLICA, StepContext
from dpaudit.training.layer_path import layerwise_clipping
from dpaudit.training.sampling import SAMPLER_BUGS

# layer_path builds on gradient_paths' StepContext, so it is registered here (no import cycle).
BUILDERS = {**DENSE_BUILDERS, "layerwise_clipping": layerwise_clipping}

DP_IMPLEMENTATIONS = (
    "auto",
    "fast_gradient_clipping",
    "masked_ghost_clipping",
    "vectorized_optimizer",
    "microbatch_group_gradients",
    "layerwise_clipping",
)


NOISE_LAWS = ("gaussian", "laplace", "uniform")
STRAY_UPDATES = ("extra_step", "second_optimizer", "data_state")
_FACTORS = ("noise_factor", "clip_factor", "sample_rate_factor", "norm_factor", "accountant_rate_factor",
            "accountant_steps_factor")


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
    * ``norm_factor``: the per-example (or per-group) norms of dpaudit's paths are scaled by
      f (the audit twin's norm check must stop the job);
    * ``noise_law``: the noise is drawn from another law of the same variance σ²C²
      (``laplace``, ``uniform``);
    * ``noiseless_variable``: the trainable variable at this position gets no noise;
    * ``noise_reuse``: one noise draw, added again at every step;
    * ``accountant_rate_factor``, ``accountant_steps_factor``: the accountant is given f·q
      (f·T steps) while the sampler draws at q for T steps (``dpaudit.training.train``);
    * ``sampler_bug``: a Poisson sampler that draws other rows than Poisson sampling would
      (``dpaudit.training.sampling.planted_batches``: ``shuffled``, ``truncated``,
      ``half_rows``, ``repeated_epochs``) while the loop and the accountant claim Poisson.
    * ``stray_update``: after the optimizer's correct noised step, something else moves the
      model with the data: ``extra_step`` one more SGD step of the clipped sum without noise,
      assigned to the weights outside the optimizer call; ``second_optimizer`` a second optimizer
      (SGD at the run's rate) applied to the clipped sum; ``data_state`` a non-trainable
      variable of the model (added to its first trainable layer) that follows the first
      variable's clipped sum (a buffer of raw gradients).

    The vectorized optimizer supports ``noise_factor`` (it draws σ·f inside
    tensorflow-privacy) and ``stray_update`` only.
    """

    noise_factor: float = 1.0
    clip_factor: float = 1.0
    sample_rate_factor: float = 1.0
    norm_factor: float = 1.0
    noise_law: str = "gaussian"
    noiseless_variable: int | None = None
    noise_reuse: bool = False
    accountant_rate_factor: float = 1.0
    accountant_steps_factor: float = 1.0
    sampler_bug: str | None = None
    stray_update: str | None = None

    def __post_init__(self):
        for name in _FACTORS:
            value = float(getattr(self, name))
            if not value > 0 or math.isnan(value) or (math.isinf(value) and name != "clip_factor"):
                raise ValueError(f"MechanismPolicy.{name} must be a finite number > 0, got {value!r}")
        if self.noise_law not in NOISE_LAWS:
            raise ValueError(f"MechanismPolicy.noise_law must be one of {NOISE_LAWS}, got {self.noise_law!r}")
        if self.sampler_bug is not None and self.sampler_bug not in SAMPLER_BUGS:
            raise ValueError(f"MechanismPolicy.sampler_bug must be one of {SAMPLER_BUGS}, got {self.sampler_bug!r}")
        if self.stray_update is not None and self.stray_update not in STRAY_UPDATES:
            raise ValueError(f"MechanismPolicy.stray_update must be None or one of {STRAY_UPDATES}, "
                             f"got {self.stray_update!r}")

    @property
    def correct(self) -> bool:
        return self == MechanismPolicy()

    @property
    def vectorized_supported(self) -> bool:
        """Whether the vectorized optimizer can carry this policy (its noise is tensorflow-privacy's)."""
        return MechanismPolicy(noise_factor=self.noise_factor, stray_update=self.stray_update) == self

    @property
    def noise_planted(self) -> bool:
        """Whether the noise draw itself departs from N(0, σ²C²) beyond its scale."""
        return self.noise_law != "gaussian" or self.noiseless_variable is not None or self.noise_reuse

    def as_dict(self) -> dict[str, Any]:
        """The departures from the correct mechanism (empty when correct)."""
        default = MechanismPolicy()
        out: dict[str, Any] = {}
        for k in (*_FACTORS, "noise_law", "noiseless_variable", "noise_reuse", "sampler_bug", "stray_update"):
            value = getattr(self, k)
            if value != getattr(default, k):
                out[k] = float(value) if k in _FACTORS else value
        return out


CORRECT = MechanismPolicy()

# The audit twin recomputes this many examples' gradients per step the slow way (one tape
# each) and compares their norms with the fast path's (``build_train_step``): one per step,
# a fresh random example each step (150 per run on the default synthetic data), keeps the
# twin at 1.46x the released loop; two per step cost 1.68x (bench/bench_canary.py --only twin).
NORM_CHECK_EXAMPLES = 1
NORM_CHECK_RTOL = 1e-3


def checks_norms(implementation: str | None, *, has_dropout: bool) -> bool:
    """Whether the audit twin's step recomputes norms the slow way on this path: every path of
    dpaudit's, but the microbatch path with Dropout (its slow tape would draw other masks)."""
    if implementation == "microbatch_group_gradients":
        return not has_dropout
    return implementation in ("fast_gradient_clipping", "masked_ghost_clipping", "layerwise_clipping")


def optimizer_class_name(opt) -> str:
    """The optimizer's class as recorded in train.json (DP classes by their tensorflow-privacy name)."""
    from dpaudit import _tf

    # tensorflow-privacy's factory names every DP class "DPOptimizerClass".
    for name in ("VectorizedDPKerasSGDOptimizer", "VectorizedDPKerasAdamOptimizer"):
        if isinstance(opt, getattr(_tf, name)):
            return name
    return f"{type(opt).__module__.split('.')[0]}.{type(opt).__name__}"


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
    noise_monitor: Any = None,
    noise_seed: int = 0,
    weight_monitor: Callable | None = None,
    clip_monitor: Any = None,
):
    """Return ``(step, noise_step, optimizer_object)`` for a logits-output model ``net``.

    ``gradient_canaries = m > 0`` (the white-box canary audit, ``dpaudit.audit.twin``):
    the update gains m coordinates that the loss does not depend on (as first-layer
    weights of inputs the data never use would be, without the other weights of those
    inputs, which carry no gradient and would only cost time). Canary i's gradient is
    ``canary_gradient_norm`` (default C) at its coordinate; the step takes a third
    argument, the [m] 0/1 mask of canaries sampled into this batch. The canaries pass
    through every piece of the step a data row passes through after its gradient is
    formed: their norms are appended to the per-example (or per-group) norms and clipped
    by the same clip-weight computation, their clipped gradients join the clipped sum
    before the same noise call, and the update is divided by the same divisor. Their
    coordinates are a variable of their own that the same optimizer call updates; the step
    returns a fourth value, that variable's state after the call (below). ``noise_step``
    then takes the mask too.

    ``check_norms`` (fast, ghost, layerwise and microbatch paths; the audit twin; with
    microbatches the positions are groups and the slow norm is one tape of the group's mean
    loss): the step takes one more argument, ``NORM_CHECK_EXAMPLES`` positions in the batch,
    and returns four more values per position: the path's clip norm, the norm of the
    gradient it summed (one more backward pass on the step's own tape), the norm from one
    tape of the example alone (same Dropout masks) and the relative gap of its logits there
    (``StepContext.checked``; ``dpaudit.training.norm_check`` decides; per-example norms
    cannot be shared with an injected gradient, so they are checked instead).

    ``policy`` (``MechanismPolicy``) plants a bug on purpose for power tests; the
    vectorized optimizer supports a noise factor and stray updates only. The noise (planted or
    not) is drawn from one generator seeded by ``noise_seed``, shared by the step and the
    empty-batch noise step (``StepContext.generator``: tensorflow-privacy's seeded
    ``tf.random.normal`` gets the same op seed in both traced functions, so the noise step's
    first draw repeated the data step's: with empty batches two updates carried the same noise,
    issue 45).

    ``noise_monitor`` (``dpaudit.audit.noise_monitor.NoiseMonitor`` over the trainable
    variables, then the canary coordinates): every update, the empty batches' included,
    hands it the noise it carries, read from the tensors the optimizer receives
    (``StepContext.apply``); the noise certificate reads it after training. The
    vectorized optimizer draws its noise inside tensorflow-privacy; its monitor's reference
    is the clipped sum the step computes from the same forward pass (ghost norms).

    ``clip_monitor`` (``dpaudit.audit.clip_monitor.ClipMonitor`` over the trainable variables): at the
    steps it chose, it checks on the step's own tape that the path's clipped sum is Σ_i min(1, C/n_i)·g_i
    for the norms n_i the path clipped by, and a few n_i against their unit's own gradient
    (``StepContext.check_clipping``; the clipping certificate).

    ``weight_monitor`` (``dpaudit.training.observer.TrainingObserver.weight_monitor``): called
    once the optimizer exists with ``variables`` (the model's trainable variables, then the
    canary coordinates), ``optimizer``, ``frozen`` (the model's non-trainable variables) and
    ``rule`` (the claimed optimizer, learning rate and momentum); what it returns reads, just
    before every optimizer call, the state the call changes and the update it is handed (the
    weight certificate, ``dpaudit.audit.weight_certificate``).

    With gradient canaries the step's fourth value is the canary coordinates' state after the
    optimizer call, [1 + slots, m]: their weights, then the optimizer's slots for them (in
    ``optimizer.get_slot_names()`` order); the auditor reconstructs each step's observation
    from consecutive states with the optimizer's rule.

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

    tf = _tf.tf
    d = int(net.input_shape[-1])
    signature = [tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64)]

    if mechanism == "baseline":
        return _baseline_step(net, signature, optimizer, learning_rate, momentum)
    if mechanism != "dpsgd":
        raise ValueError(f"unknown mechanism {mechanism!r}")
    if not isinstance(policy, MechanismPolicy):
        raise TypeError(f"policy must be a MechanismPolicy, got {type(policy).__name__}")
    clip = float(clip_norm)
    m_canary = int(gradient_canaries)
    if m_canary < 0:
        raise ValueError(f"gradient_canaries must be >= 0, got {m_canary}")
    if (m_canary or check_norms or not policy.vectorized_supported) and implementation == "vectorized_optimizer":
        raise ValueError("canaries, norm checks and planted bugs other than a noise factor or a stray update need a "
                         "gradient path of dpaudit, not vectorized_optimizer")
    check = bool(check_norms) and checks_norms(implementation, has_dropout=any(
        isinstance(layer, _tf.keras.layers.Dropout) for layer in net.layers))
    canary_norm = clip if canary_gradient_norm is None else float(canary_gradient_norm)
    if not canary_norm > 0 or not math.isfinite(canary_norm):
        raise ValueError(f"canary_gradient_norm must be finite and > 0, got {canary_gradient_norm!r}")
    if m_canary:
        signature = [*signature, tf.TensorSpec([m_canary], tf.float32)]
    if check:
        signature = [*signature, tf.TensorSpec([NORM_CHECK_EXAMPLES], tf.int32)]
    if (implementation == "microbatch_group_gradients") != (microbatches is not None):
        raise ValueError("microbatches go with implementation microbatch_group_gradients only")
    ctx = StepContext(
        net=net, signature=signature, optimizer=optimizer, learning_rate=learning_rate, momentum=momentum,
        clip=clip,
        # The noise actually drawn; the accountant (the caller) keeps the claimed σ.
        sigma=float(noise_multiplier) * float(policy.noise_factor),
        # Clipping threshold of the clip weights; the noise stays σ·C with the claimed C.
        clip_for_weights=clip * float(policy.clip_factor),
        norm_factor=policy.norm_factor, m_canary=m_canary, canary_norm=canary_norm, check=check,
        check_examples=NORM_CHECK_EXAMPLES,
        # TF Privacy divides by the number of microbatches; per-example DP-SGD by B.
        divisor=float(microbatches) if microbatches is not None else float(expected_batch_size),
        monitor=noise_monitor,
        clipping=clip_monitor,
        noise=_planted_noise(policy, net, m_canary, float(noise_multiplier) * float(policy.noise_factor) * clip,
                             noise_seed) if policy.noise_planted else None,
        generator=tf.random.Generator.from_seed(int(noise_seed)),
    )
    if implementation not in BUILDERS:
        raise ValueError(f"unknown DP implementation {implementation!r}")
    if policy.stray_update is not None:  # before the weight monitor lists the model's non-trainable state
        ctx.stray = _planted_stray(policy.stray_update, ctx)
    path = BUILDERS[implementation](ctx, dropout_masks=dropout_masks, dropout_seed=dropout_seed,
                                    microbatches=microbatches)
    ctx.bind_optimizer(path.optimizer)
    if weight_monitor is not None:
        ctx.weights = weight_monitor(variables=ctx.optimized(), optimizer=path.optimizer,
                                     frozen=list(net.non_trainable_variables),
                                     rule={"optimizer": optimizer, "learning_rate": float(learning_rate),
                                           "momentum": float(momentum)})
    noise_signature = signature[2:3] if m_canary else []

    @tf.function(input_signature=noise_signature, autograph=False)
    def noise_step(canary_mask=None):
        zeros = [tf.zeros_like(v) for v in ctx.variables]
        canary_weights = path.clip_weights(ctx.canary_norms) if m_canary else None
        noised = ctx.noised_update(zeros, 1, canary_mask, canary_weights)
        ctx.apply(path.apply_noise, noised)
        return ctx.finish((tf.constant(0.0), tf.constant(0.0), tf.constant(math.nan)))

    monitors = [m for m in (noise_monitor, ctx.weights) if m is not None]
    step, noise = path.step, noise_step
    if monitors:  # the loop reports each update to the monitors (their blocks fold)
        step, noise = _monitored(path.step, monitors), _monitored(noise_step, monitors)
    return step, noise, path.optimizer


def _monitored(step: Callable, monitors: list) -> Callable:
    """``step`` followed by every monitor's ``after_step`` (same arguments and outputs)."""
    def run(*args):
        out = step(*args)
        for monitor in monitors:
            monitor.after_step()
        return out

    return run


def _planted_stray(kind: str, ctx: StepContext) -> Callable:
    """A planted stray update (``MechanismPolicy.stray_update``): run right after the optimizer call."""
    from dpaudit import _tf

    keras = _tf.keras
    lr = float(ctx.learning_rate)
    if kind == "extra_step":
        def stray(noised):
            for v, c in zip(ctx.variables, noised.clipped, strict=True):
                v.assign_sub(lr * c / ctx.divisor)
    elif kind == "second_optimizer":
        second = keras.optimizers.legacy.SGD(learning_rate=lr)

        def stray(noised):
            second.apply_gradients(zip([c / ctx.divisor for c in noised.clipped], ctx.variables, strict=True),
                                   **ONE_REPLICA)
    else:  # data_state
        owner = next(layer for layer in ctx.net.layers if layer.trainable_weights)
        first = ctx.variables[0]
        state = owner.add_weight(name="planted_state", shape=first.shape, initializer="zeros", trainable=False)

        def stray(noised):
            state.assign(0.9 * state + 0.1 * noised.clipped[0])
    return stray


def _planted_noise(policy: MechanismPolicy, net, m_canary: int, scale: float, seed: int) -> Callable:
    """The noise draw of a planted noise bug (``MechanismPolicy.noise_planted``): tensors → noised tensors."""
    from dpaudit import _tf

    tf = _tf.tf
    shapes = [tuple(v.shape) for v in net.trainable_variables] + ([(m_canary,)] if m_canary else [])
    generator = tf.random.Generator.from_seed(int(seed))
    fixed = None
    if policy.noise_reuse:
        rng = np.random.default_rng([int(seed), 8])
        fixed = [tf.constant(scale * rng.standard_normal(s), tf.float32) for s in shapes]

    def draw(shape):
        if policy.noise_law == "laplace":  # variance 2b² = σ²C²
            u = generator.uniform(shape, -0.5, 0.5)
            return -(scale / math.sqrt(2.0)) * tf.sign(u) * tf.math.log1p(-2.0 * tf.abs(u))
        if policy.noise_law == "uniform":  # variance a²/3 = σ²C²
            return generator.uniform(shape, -scale * math.sqrt(3.0), scale * math.sqrt(3.0))
        return generator.normal(shape, stddev=scale)

    def noised(tensors):
        out = []
        for i, t in enumerate(tensors):
            if i == policy.noiseless_variable:
                out.append(t)
            elif fixed is not None:
                out.append(t + fixed[i])
            else:
                out.append(t + draw(tf.shape(t)))
        return out

    return noised


def _baseline_step(net, signature, optimizer: str, learning_rate: float, momentum: float):
    """The non-private step: plain SGD or Adam on the batch-mean loss; no noise step."""
    from dpaudit import _tf

    tf, keras = _tf.tf, _tf.keras
    variables = net.trainable_variables
    if optimizer == "sgd":
        opt = keras.optimizers.legacy.SGD(learning_rate=learning_rate, momentum=momentum)
    else:
        opt = keras.optimizers.legacy.Adam(learning_rate=learning_rate)

    @tf.function(input_signature=signature, autograph=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = net(x, training=True)
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))
            loss = tf.reduce_mean(losses)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True), **ONE_REPLICA)
        return tf.reduce_sum(losses), correct, tf.constant(math.nan)

    return step, None, opt

"""Exact per-example gradient norms and clipped sums of a Keras model made of a chain of layers.

Any model whose layers run one after the other (Sequential, or a functional chain, nested
models flattened) is covered when every trainable layer is one of

* ``Dense`` (any input rank) and ``Conv2D`` (any kernel, stride, dilation (float64 too), padding,
  channels; channels_last, groups = 1). Both are linear maps over positions: with A_i the
  [P, D_in] matrix of example i's inputs at the P output positions (Dense: the positions of
  its leading axes; Conv2D: the unfolded input patches, D_in = k_h·k_w·c_in) and δ_i the
  [P, D_out] gradient of Σ_j loss_j at the pre-activation, the kernel gradient is
  G_i = A_iᵀ δ_i (examples do not interact) and the bias gradient Σ_p δ_{i,p}. Its squared
  norm comes either from the ghost form Σ_{p,p'} (a_{i,p}·a_{i,p'})(δ_{i,p}·δ_{i,p'}), at
  O(P²(D_in + D_out)) per example, or from G_i itself, at O(P·D_in·D_out): the cheaper one is
  taken per layer, as in mixed ghost clipping (Bu et al. 2022, "Scalable and efficient
  training of large convolutional neural networks with differential privacy"). The clipped
  sum Σ_i w_i G_i is Aᵀ(w ⊙ δ) over the batch's positions (ghost) or a contraction of the
  G_i with w (explicit): the per-layer algebra of one weighted backward pass.
* ``Embedding``: the table gradient of example i is the δ rows scattered to its ids; its
  squared norm sums the rows of each (example, id) pair before squaring, as
  tensorflow-privacy's ``embedding_sqr_norm_fn`` does (that one takes float32 only, and the
  exactness tests run in float64), the clipped sum is one ``unsorted_segment_sum`` of w ⊙ δ.
* ``LayerNormalization`` and ``GroupNormalization`` (channel axis last): out = x̂ ⊙ γ + β with
  x̂ the normalized input, which does not depend on γ, β, and mixes no examples. Example i's
  gradients Σ δ_i ⊙ x̂_i (γ) and Σ δ_i (β), summed over the axes γ does not span, are small
  and formed explicitly.

Parameter-free layers that keep examples apart (reshaping, pooling, activations, padding,
Dropout) are called as they are. ``Dropout`` masks may be drawn explicitly, one per example
(``dropout_mask_sampler``), so a slow per-example tape can replay them; a single forward pass
gives norms and clipped sums, so both see the same masks either way.

One forward pass with taps and one backward pass to the taps give every norm; the clipped
sum reuses them (``LayerGradients.clipped``). ``model_chain`` refuses what no exact path
covers, naming the layer: a layer that mixes the examples of a batch (BatchNormalization:
use GroupNormalization, as Opacus suggests), a trainable layer of another kind, a layer not
known to keep examples apart, or a model that is not a chain.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "LayerGradients",
    "Tap",
    "chain_dropouts",
    "dropout_mask_sampler",
    "layer_gradients",
    "model_chain",
    "per_example_gradients",
    "per_example_squared_norms",
    "reference_forward",
    "tapped_forward",
]

# Parameter-free layers known to act on each example alone (batch axis untouched).
_PASS_THROUGH = (
    "InputLayer", "Reshape", "Flatten", "Permute", "RepeatVector",
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
    "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalAveragePooling1D", "GlobalAveragePooling2D",
    "Activation", "ReLU", "LeakyReLU", "ELU", "PReLU", "Softmax", "ThresholdedReLU",
    "ZeroPadding1D", "ZeroPadding2D", "Cropping1D", "Cropping2D", "Rescaling", "Dropout",
)
# Layers whose training-mode output for one example depends on the other examples of the batch.
_MIXING = {"BatchNormalization": "GroupNormalization (or LayerNormalization)",
           "SyncBatchNormalization": "GroupNormalization (or LayerNormalization)",
           "UnitNormalization": None}
COVERED = ("Dense", "Conv2D", "Embedding", "LayerNormalization", "GroupNormalization")


class Tap(NamedTuple):
    """One trainable layer of a tapped forward pass: δ is taken at ``z``."""

    layer: Any
    kind: str  # "linear", "embedding" or "norm"
    z: Any  # pre-activation (linear), the looked-up rows (embedding), the normalized-affine output (norm)
    record: dict  # what the norms need besides δ


def _flatten(layers, keras) -> list:
    out = []
    for layer in layers:
        if isinstance(layer, keras.Model):
            out.extend(_flatten(layer.layers, keras))
        else:
            out.append(layer)
    return out


def model_chain(net, *, dpsgd: bool = True, check_chain: bool = True) -> list:
    """The layers of ``net`` in call order, each checked to be covered; refusals name the layer.

    ``check_chain`` runs the chain once on a random input and compares it with ``net``: a model
    that is not a chain (branches, skip connections) gives another output and is refused.
    """
    from dpaudit import _tf

    keras, tf = _tf.keras, _tf.tf
    chain = [layer for layer in _flatten(net.layers, keras) if type(layer).__name__ != "InputLayer"]
    for layer in chain:
        kind = type(layer).__name__
        if kind in _MIXING and dpsgd:
            fix = _MIXING[kind]
            raise ValueError(
                f"layer {layer.name!r} ({kind}) mixes the examples of a batch, so per-example gradients "
                "and DP-SGD's clipping do not exist for it" + (f"; use {fix} instead" if fix else ""))
        trainable = bool(layer.trainable_weights)
        if trainable and kind not in COVERED:
            raise ValueError(
                f"layer {layer.name!r} ({kind}) has trainable weights but no exact per-example gradient "
                f"path covers it (covered: {', '.join(COVERED)}); make it non-trainable or replace it")
        if not trainable and kind not in _PASS_THROUGH and kind not in COVERED:
            raise ValueError(
                f"layer {layer.name!r} ({kind}) is not known to keep the examples of a batch apart; use "
                f"a standard layer ({', '.join(_PASS_THROUGH[1:8])}, ...) instead")
        if kind == "Conv2D" and (layer.groups != 1 or layer.data_format != "channels_last"):
            raise ValueError(f"Conv2D {layer.name!r}: only groups=1 and channels_last are covered")
        if kind == "GroupNormalization" and layer.axis not in (-1, len(layer.input_shape) - 1):
            raise ValueError(f"GroupNormalization {layer.name!r}: only the last (channel) axis is covered")
        if kind == "LayerNormalization" and list(layer.axis) != sorted(layer.axis):
            raise ValueError(f"LayerNormalization {layer.name!r}: give its axis in increasing order")
        if kind == "Dropout" and layer.noise_shape is not None:
            raise ValueError(f"Dropout {layer.name!r} has a noise_shape; only per-unit masks are covered")
    owned = {v.ref() for layer in chain for v in layer.trainable_weights}
    stray = [v.name for v in net.trainable_variables if v.ref() not in owned]
    if stray:
        raise ValueError(f"trainable variables {stray} belong to no layer of the model's chain")
    if check_chain:
        shape = [2, *[int(s) for s in net.input_shape[1:]]]
        x = tf.random.stateless_uniform(shape, seed=[1, 2], dtype=net.inputs[0].dtype)
        try:
            mine = reference_forward(chain, x, training=False)
        except Exception as err:  # noqa: BLE001 -- any failure means "not a chain"
            raise ValueError(f"model {net.name!r} is not a chain of layers (a layer failed on the previous "
                             f"one's output: {err}); only chains are covered") from err
        theirs = net(x, training=False)
        if mine.shape != theirs.shape or not bool(tf.reduce_all(tf.abs(mine - theirs) <= 1e-4 * (
                1 + tf.abs(theirs)))):
            raise ValueError(f"model {net.name!r} is not a chain of layers (calling its layers one after "
                             "the other gives another output: branches or skip connections?); only chains "
                             "are covered")
    return chain


def chain_dropouts(chain) -> list[tuple[float, tuple[int, ...]]]:
    """(rate, per-example input shape) of every Dropout layer of a chain, in call order."""
    return [(float(layer.rate), tuple(int(s) for s in layer.input_shape[1:]))
            for layer in chain if type(layer).__name__ == "Dropout"]


def dropout_mask_sampler(rates_and_shapes, seed: int):
    """``sample(m)``: one inverted-Dropout mask per example and Dropout layer, from a seeded generator.

    Each unit is kept with probability 1 − rate and scaled by 1/(1 − rate), independently per
    example and unit (the law of Keras' Dropout).
    """
    from dpaudit import _tf

    tf = _tf.tf
    generator = tf.random.Generator.from_seed(int(seed))

    def sample(m):
        return [tf.cast(generator.uniform(tf.concat([[m], shape], axis=0)) >= rate, tf.float32) / (1.0 - rate)
                for rate, shape in rates_and_shapes]

    return sample


def reference_forward(chain, x, masks=None, training: bool = True):
    """The chain's output through Keras' own layer calls (Dropout replaced by ``masks`` if given)."""
    remaining = None if masks is None else list(masks)
    h = x
    for layer in chain:
        if type(layer).__name__ == "Dropout" and remaining is not None:
            h = h * remaining.pop(0)
        else:
            h = layer(h, training=training)
    return h


def tapped_forward(chain, x, masks=None):
    """Training-mode output plus one ``Tap`` per trainable layer (the layer's math written out so
    the tensor δ is taken at lies on the caller's tape)."""
    from dpaudit import _tf

    tf = _tf.tf
    taps = []
    remaining = None if masks is None else list(masks)
    h = x
    for layer in chain:
        kind = type(layer).__name__
        if not layer.trainable_weights:
            if kind == "Dropout" and remaining is not None:
                h = h * tf.cast(remaining.pop(0), h.dtype)
            else:
                h = layer(h, training=True)
        elif kind == "Dense":
            z = tf.tensordot(h, layer.kernel, axes=1) if h.shape.rank > 2 else tf.matmul(h, layer.kernel)
            if layer.use_bias:
                z = z + layer.bias
            taps.append(Tap(layer, "linear", z, {"a": h, "patches": False}))
            h = layer.activation(z)
        elif kind == "Conv2D":
            # Keras' own convolution op (tf.nn.convolution): the same rounding as the layer's call, and
            # a dilated kernel's gradient in float64 too (tf.nn.conv2d's CPU backprop refuses dilation > 1
            # in float64; tf.nn.convolution goes through space-to-batch)
            z = layer.convolution_op(h, layer.kernel)
            if layer.use_bias:
                z = z + layer.bias
            taps.append(Tap(layer, "linear", z, {"a": h, "patches": True}))
            h = layer.activation(z)
        elif kind == "Embedding":
            ids = tf.cast(h, tf.int32) if h.dtype not in (tf.int32, tf.int64) else h
            z = tf.gather(layer.embeddings, ids)
            taps.append(Tap(layer, "embedding", z, {"ids": ids}))
            h = z
        elif kind in ("LayerNormalization", "GroupNormalization"):
            xhat, axes = _normalized(layer, h, tf)
            z = xhat
            if layer.scale:
                z = z * tf.reshape(layer.gamma, _broadcast_shape(h.shape.rank, axes, layer.gamma.shape))
            if layer.center:
                z = z + tf.reshape(layer.beta, _broadcast_shape(h.shape.rank, axes, layer.beta.shape))
            taps.append(Tap(layer, "norm", z, {"xhat": xhat, "axes": axes}))
            h = z
        else:  # model_chain refused it; a hand-made chain could still get here
            raise ValueError(f"layer {layer.name!r} ({kind}) has no exact per-example gradient path")
    if remaining:
        raise ValueError(f"{len(remaining)} Dropout masks left over: more masks than Dropout layers")
    return h, taps


def _broadcast_shape(rank, axes, param_shape):
    shape = [1] * rank
    for axis, size in zip(axes, param_shape, strict=True):
        shape[axis] = int(size)
    return shape


def _normalized(layer, h, tf):
    """x̂ of LayerNormalization / GroupNormalization (the same moments and ε as Keras), and the
    axes γ and β span."""
    rank = h.shape.rank
    if type(layer).__name__ == "LayerNormalization":
        axes = sorted(a % rank for a in layer.axis)
        mean, var = tf.nn.moments(h, axes, keepdims=True)
        return (h - mean) * tf.math.rsqrt(var + layer.epsilon), axes
    channels, groups = int(h.shape[-1]), int(layer.groups)
    shape = tf.shape(h)
    grouped = tf.reshape(h, tf.concat([shape[:-1], [groups, channels // groups]], axis=0))
    reduce = [a for a in range(1, rank + 1) if a != rank - 1]  # all but the batch and group axes
    mean, var = tf.nn.moments(grouped, reduce, keepdims=True)
    return tf.reshape((grouped - mean) * tf.math.rsqrt(var + layer.epsilon), shape), [rank - 1]


def _ghost_is_cheaper(p: int, d_in: int, d_out: int) -> bool:
    # Per example: ghost P²(D_in + D_out) vs explicit P·D_in·D_out multiply-adds (Bu et al. 2022).
    return p * (d_in + d_out) < d_in * d_out


class LayerGradients:
    """Per-example squared gradient norms of one tapped layer, and its clipped sums Σ_i w_i g_i."""

    def __init__(self, tap: Tap, delta, force_explicit: bool = False):
        from dpaudit import _tf

        self.tf, self.tap, self.delta = _tf.tf, tap, delta
        self.layer = tap.layer
        self.explicit: dict = {}  # variable ref → per-example gradients [b, *shape]
        getattr(self, f"_{tap.kind}")(force_explicit)

    def _linear(self, force_explicit):
        tf, layer, delta = self.tf, self.layer, self.delta
        a = self.tap.record["a"]
        if self.tap.record["patches"]:
            kh, kw = layer.kernel_size
            a = tf.image.extract_patches(a, sizes=[1, kh, kw, 1], strides=[1, *layer.strides, 1],
                                         rates=[1, *layer.dilation_rate, 1], padding=layer.padding.upper())
        d_in, d_out = int(a.shape[-1]), int(delta.shape[-1])
        b = tf.shape(delta)[0]
        a = tf.reshape(a, [b, -1, d_in])
        delta = tf.reshape(delta, [b, -1, d_out])
        p = 1
        for s in self.tap.z.shape[1:-1]:
            p *= int(s)
        self.a, self.d = a, delta
        self.ghost = not force_explicit and _ghost_is_cheaper(p, d_in, d_out)
        kernel = layer.kernel
        if p == 1 and not force_explicit:
            sq = tf.reduce_sum(tf.square(a[:, 0]), 1) * tf.reduce_sum(tf.square(delta[:, 0]), 1)
        elif self.ghost:
            sq = tf.einsum("bpq,bpq->b", tf.matmul(a, a, transpose_b=True), tf.matmul(delta, delta, transpose_b=True))
        else:
            g = tf.matmul(a, delta, transpose_a=True)  # [b, D_in, D_out]
            self.explicit[kernel.ref()] = tf.reshape(g, tf.concat([[b], tf.shape(kernel)], axis=0))
            sq = tf.reduce_sum(tf.square(g), axis=[1, 2])
        if layer.use_bias:
            gb = tf.reduce_sum(delta, axis=1)
            self.explicit[layer.bias.ref()] = gb
            sq += tf.reduce_sum(tf.square(gb), axis=1)
        self.squared_norms = sq

    def _embedding(self, force_explicit):
        tf, layer, delta = self.tf, self.layer, self.delta
        ids = tf.cast(self.tap.record["ids"], tf.int64)
        b = tf.shape(ids, out_type=tf.int64)[0]
        vocab = int(layer.input_dim)
        rows = tf.reshape(delta, [-1, int(delta.shape[-1])])
        self.ids_flat, self.rows = tf.reshape(ids, [-1]), rows
        # The δ rows of one example and id add up before squaring: group them by (example, id).
        slot = tf.repeat(tf.range(b), tf.size(ids, out_type=tf.int64) // b) * vocab + self.ids_flat
        unique, position = tf.unique(slot)
        summed = tf.math.unsorted_segment_sum(rows, position, tf.size(unique))
        self.squared_norms = tf.math.unsorted_segment_sum(tf.reduce_sum(tf.square(summed), 1), unique // vocab, b)
        if force_explicit:
            g = tf.math.unsorted_segment_sum(rows, slot, b * vocab)
            self.explicit[layer.embeddings.ref()] = tf.reshape(g, [b, vocab, -1])

    def _norm(self, force_explicit):
        tf, layer, delta = self.tf, self.layer, self.delta
        xhat, axes = self.tap.record["xhat"], self.tap.record["axes"]
        others = [a for a in range(1, delta.shape.rank) if a not in axes]
        sq = 0.0
        for on, var, values in ((layer.scale, "gamma", delta * xhat), (layer.center, "beta", delta)):
            if on:
                weight = getattr(layer, var)
                g = tf.reduce_sum(values, axis=others) if others else values
                g = tf.reshape(g, tf.concat([[tf.shape(delta)[0]], tf.shape(weight)], axis=0))
                self.explicit[weight.ref()] = g
                sq += tf.reduce_sum(tf.reshape(tf.square(g), [tf.shape(g)[0], -1]), axis=1)
        self.squared_norms = sq

    def clipped(self, weights) -> dict:
        """variable ref → Σ_i w_i g_i over the batch (``weights`` [b])."""
        tf = self.tf
        out = {}
        for ref, g in self.explicit.items():
            out[ref] = tf.tensordot(tf.cast(weights, g.dtype), g, axes=1)
        if self.tap.kind == "linear" and self.layer.kernel.ref() not in out:
            weighted = self.d * tf.cast(weights, self.d.dtype)[:, None, None]
            a = tf.reshape(self.a, [-1, int(self.a.shape[-1])])
            out[self.layer.kernel.ref()] = tf.reshape(
                tf.matmul(a, tf.reshape(weighted, [-1, int(weighted.shape[-1])]), transpose_a=True),
                tf.shape(self.layer.kernel))
        if self.tap.kind == "embedding" and self.layer.embeddings.ref() not in out:
            b = tf.shape(self.tap.record["ids"])[0]
            w_rows = tf.repeat(tf.cast(weights, self.rows.dtype), tf.shape(self.rows)[0] // b)
            out[self.layer.embeddings.ref()] = tf.math.unsorted_segment_sum(
                self.rows * w_rows[:, None], self.ids_flat, int(self.layer.input_dim))
        return out


def layer_gradients(taps, deltas, force_explicit: bool = False) -> list[LayerGradients]:
    return [LayerGradients(tap, delta, force_explicit) for tap, delta in zip(taps, deltas, strict=True)]


def _per_example_pass(net, chain, x, y, force_explicit: bool, inference: bool = False):
    from dpaudit import _tf

    tf = _tf.tf
    masks = None
    if inference:  # Dropout is the identity at inference: masks of ones
        b = tf.shape(x)[0]
        masks = [tf.ones(tf.concat([[b], shape], axis=0)) for _, shape in chain_dropouts(chain)]
    with tf.GradientTape() as tape:
        logits, taps = tapped_forward(chain, x, masks)
        summed = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    deltas = tape.gradient(summed, [t.z for t in taps])
    return layer_gradients(taps, deltas, force_explicit)


def per_example_squared_norms(net, x, y, chain=None, inference: bool = False):
    """‖g_i‖² over all trainable weights of the logits model ``net`` (training-mode forward;
    ``inference``: Dropout off, as extraction reads a released model)."""
    from dpaudit import _tf

    chain = model_chain(net) if chain is None else chain
    return _tf.tf.add_n([lg.squared_norms for lg in _per_example_pass(net, chain, x, y, False, inference)])


def per_example_gradients(net, x, y, chain=None, inference: bool = False):
    """[b, P] per-example gradients, flattened in ``net.trainable_variables`` order (``inference``:
    Dropout off)."""
    from dpaudit import _tf

    tf = _tf.tf
    chain = model_chain(net) if chain is None else chain
    found = {}
    for lg in _per_example_pass(net, chain, x, y, True, inference):
        found.update(lg.explicit)
    b = tf.shape(y)[0]
    return tf.concat([tf.reshape(found[v.ref()], [b, -1]) for v in net.trainable_variables], axis=1)

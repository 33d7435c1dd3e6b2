"""The per-example gradient algebra of a Dense MLP (``build_mlp``'s logits view).

A Dense layer's kernel gradient for example i is h_i δ_iᵀ (its input times the gradient
of the summed loss at its pre-activation; examples do not interact), so per-example norms
and clipped sums need one forward and one backward pass, no Jacobian
(``dpaudit.training.gradient_paths`` and ``dpaudit.reference.pool_training`` build on it).
Dropout masks can be drawn explicitly, one per example and Dropout layer, so the norms and
the update read the same masks.
"""

from __future__ import annotations

__all__ = ["dense_chain", "dropout_layers", "dropout_mask_sampler", "ghost_squared_norms", "tapped_forward"]


def dense_chain(net, keras) -> list:
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
    """(rate, width) of every Dropout layer of a ``dense_chain``, in call order."""
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


def tapped_forward(chain, x, tf, masks=None):
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


def ghost_squared_norms(taps, deltas, tf):
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

"""A second implementation of per-example gradients, in TensorFlow: the oracle of
``dpaudit.extract.dense_model`` (extraction computes them in numpy since issue 23; this is
the ``tf.vectorized_map`` path it used before)."""

import numpy as np

from dpaudit import _tf


def tf_per_example_gradient_fn(net):
    """``fn(x, y) -> (norms float64, flat float32)`` over all trainable weights, inference mode."""
    tf = _tf.tf
    d = int(net.input_shape[-1])
    variables = net.trainable_variables

    def one(args):
        xi, yi = args
        with tf.GradientTape() as tape:
            logits = net(xi[None, :], training=False)
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(yi[None], logits)[0]
        grads = tape.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)

    @tf.function(input_signature=[tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64)],
                 autograph=False)
    def fn(x, y):
        flat = tf.vectorized_map(one, (x, y))
        return tf.sqrt(tf.reduce_sum(tf.square(tf.cast(flat, tf.float64)), axis=1)), flat

    return fn


def tf_per_example_gradients(net, x, y):
    """(norms float64, N × P float32) of the logits model ``net`` on all rows."""
    norms, flat = tf_per_example_gradient_fn(net)(_tf.tf.constant(np.asarray(x, np.float32)),
                                                  _tf.tf.constant(np.asarray(y, np.int64)))
    return norms.numpy(), flat.numpy()

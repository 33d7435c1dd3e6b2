"""Per-example losses, gradients and PMP pair tables of a saved model, computed in numpy."""

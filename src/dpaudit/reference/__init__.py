"""The reference models of a training recipe: pool training, the pool record, its accounting, the linear references and the parent set."""

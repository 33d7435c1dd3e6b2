"""Models trained outside dpaudit (issue 44): an outputs file (or a Keras model file) with the ids
of its members and held-out rows, and optionally the promise its trainer states.

``outputs_file`` reads and checks the file (tensorflow-privacy's AttackInputData convention: one
row per example id with logits, class probabilities or a per-example loss), ``membership`` the ids
of the members, held-out and utility rows, ``promise`` the stated (ε, δ) or the DP-SGD inputs the
accountant recomputes ε from, ``checks`` everything that is refused at parse time (before any job),
and ``importer`` what the job writes: the per-example outputs table every family reads
(``P.OUTPUTS``) and the model's record in place of a train.json (``P.TRAIN_INFO``).
"""

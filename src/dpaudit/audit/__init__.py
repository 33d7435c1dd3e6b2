"""What audits a training by training: the canary audit twin and its plan, the linear mechanisms' many-runs audit, the noise monitor and the mechanism checks."""

"""dpaudit.simulations: simulation studies that need no trained model (Negoescu et al. 2023, App. B)."""

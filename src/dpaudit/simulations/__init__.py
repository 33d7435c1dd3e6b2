"""dpaudit.simulations: simulation studies that need no trained model (source 002 App. B)."""
